"""placement-manage commands for operators beyond upstream's:

    placement-manage audit [--json] [--fix]
    placement-manage capacity '<allocation candidates query>' [--json]
"""
import json
import sys

import prettytable
import webob.exc

from placement import context as placement_context
from placement.objects import audit as audit_obj


class OpsCommands:
    def __init__(self, config):
        self.config = config

    def _context(self):
        return placement_context.admin_context(self.config)

    def audit(self):
        """Print the findings; exit 1 when any is left unrepaired."""
        args = self.config.command
        conf = self.config.placement
        ctx = self._context()
        findings = audit_obj.find(ctx, conf.incomplete_consumer_project_id,
                                  conf.incomplete_consumer_user_id)
        fixed = []
        if args.fix:
            fixed = audit_obj.delete_empty_consumers(ctx)
            gone = set(fixed)
            findings = [f for f in findings
                        if not (f['kind'] == audit_obj.EMPTY_CONSUMER
                                and f['consumer'] in gone)]
        if args.json:
            print(json.dumps({'findings': findings,
                              'fixed': [{'kind': audit_obj.EMPTY_CONSUMER,
                                         'consumer': u, 'action': 'deleted'}
                                        for u in fixed]}, indent=2))
        else:
            _print_findings(findings)
            for uuid in fixed:
                print('Fixed: deleted consumer %s, which had no '
                      'allocations' % uuid)
        return 1 if findings else 0

    def capacity(self):
        """Print how many more requests like the query fit."""
        from placement.handlers import capacity
        args = self.config.command
        try:
            report = capacity.report_for_query(self._context(), args.query)
        except webob.exc.HTTPException as exc:
            print('ERROR: %s' % exc.detail, file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            _print_capacity(report)
        return 0


def _print_findings(findings):
    if not findings:
        print('No inconsistencies found.')
        return
    for kind in audit_obj.KINDS:
        rows = [f for f in findings if f['kind'] == kind]
        if not rows:
            continue
        print('%s: %d' % (kind, len(rows)))
        columns = [k for k in rows[0] if k != 'kind']
        table = prettytable.PrettyTable(columns)
        table.align = 'l'
        for row in rows:
            table.add_row(['(none)' if row[c] is None else row[c]
                           for c in columns])
        print(table)


def _print_capacity(report):
    table = prettytable.PrettyTable(['Root provider', 'Name', 'Fits'])
    table.align = 'l'
    table.align['Fits'] = 'r'
    for tree in report['trees']:
        table.add_row([tree['root_provider_uuid'], tree['name'],
                       tree['fits']])
    print(table)
    if report['aggregates']:
        table = prettytable.PrettyTable(['Aggregate', 'Fits'])
        table.align = 'l'
        table.align['Fits'] = 'r'
        for agg, fits in sorted(report['aggregates'].items()):
            table.add_row([agg, fits])
        print(table)
    print('Total: %d more fit (%s)' % (
        report['total'], 'exact' if report['exact'] else
        'a lower bound: numbered groups are placed greedily'))


def add_parsers(subparsers, ops):
    text = ('Check the database for inconsistencies the API would not '
            'have written; exit 1 when any is found.')
    sub = subparsers.add_parser('audit', help=text, description=text)
    sub.add_argument('--json', action='store_true',
                     help='Print the findings as JSON.')
    sub.add_argument('--fix', action='store_true',
                     help='Delete consumers without allocations (the only '
                          'unambiguous repair) and say so.')
    sub.set_defaults(func=ops.audit)

    text = ('How many more requests like the query (GET '
            '/allocation_candidates syntax) fit, per provider tree, per '
            'aggregate and overall.')
    sub = subparsers.add_parser('capacity', help=text, description=text)
    sub.add_argument('query', help="e.g. 'resources=VCPU:2,MEMORY_MB:2048'")
    sub.add_argument('--json', action='store_true',
                     help='Print the report as JSON.')
    sub.set_defaults(func=ops.capacity)
