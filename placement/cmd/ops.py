"""placement-manage commands for operators beyond upstream's:

    placement-manage audit [--json] [--fix]
    placement-manage capacity '<allocation candidates query>' [--json]
    placement-manage explain '<allocation candidates query>'
        [--provider X ...] [--json] [--microversion 1.39] [--sample N]
    placement-manage reload
"""
import json
import sys

import prettytable
import webob
import webob.exc

from placement import context as placement_context
from placement import exception
from placement import microversion
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

    def reload(self):
        """Make every API process reload its in-memory copy of the
        world: after writes the triggers cannot see (a TRUNCATE on
        MySQL or SQLite, a bulk load with the triggers off)."""
        from placement.objects import changes
        if changes.reload_everywhere(self._context()):
            print('Every API process reloads providers, inventories, usage, '
                  'traits and aggregates on its next request.')
            return 0
        print('This database does not count its changes (run '
              '"placement-manage db sync"); nothing to reload.',
              file=sys.stderr)
        return 1

    def explain(self):
        """Explain an allocation-candidates query (GET
        /ops/explain/allocation_candidates without the HTTP): exit 0 with
        the explanation, 1 with the error the API would answer."""
        cmd = self.config.command
        query = cmd.query.strip()
        if '?' in query:
            query = query.split('?', 1)[1]
        want = _version(cmd.microversion)
        if want is None:
            print('ERROR: --microversion must be "latest" or one of %s to '
                  '%s' % (microversion.min_version_string(),
                          microversion.max_version_string()),
                  file=sys.stderr)
            return 1
        if want < (1, 10):
            print('ERROR: allocation candidates need microversion 1.10 or '
                  'later', file=sys.stderr)
            return 1
        from placement.handlers import explain as explain_handler
        params = webob.Request.blank('/?' + query).GET
        ctx = self._context()
        try:
            params, names, sample = explain_handler.split_params(params)
            if cmd.sample is not None:
                sample = cmd.sample
            body = explain_handler.explain_query(
                ctx, params, want, names + list(cmd.provider or ()), sample)
        except webob.exc.HTTPException as exc:
            print('ERROR: %s' % exc.detail, file=sys.stderr)
            return 1
        except exception.PlacementError as exc:
            print('ERROR: %s' % exc.format_message(), file=sys.stderr)
            return 1
        if cmd.json:
            print(json.dumps(body, indent=2, sort_keys=False))
        else:
            print(render_explanation(body))
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


def _fits_text(tree):
    """A tree's figure as the table shows it: "up to N" when it competes
    with other trees for a sharing provider, "at least N" when unproven
    (the JSON's ``shared`` and ``exact``)."""
    if not tree['exact']:
        return 'at least %d%s' % (tree['fits'],
                                  ', shared' if tree.get('shared') else '')
    return ('up to %d' if tree.get('shared') else '%d') % tree['fits']


def _print_capacity(report):
    table = prettytable.PrettyTable(['Root provider', 'Name', 'Fits'])
    table.align = 'l'
    table.align['Fits'] = 'r'
    for tree in report['trees']:
        table.add_row([tree['root_provider_uuid'], tree['name'],
                       _fits_text(tree)])
    print(table)
    if report['aggregates']:
        table = prettytable.PrettyTable(['Aggregate', 'Fits'])
        table.align = 'l'
        table.align['Fits'] = 'r'
        for agg, fits in sorted(report['aggregates'].items()):
            table.add_row([agg, fits])
        print(table)
    if any(tree.get('shared') for tree in report['trees']):
        print('"up to": trees competing for a sharing provider; each '
              'figure ignores the others, the total does not.')
    print('Total: %d more fit (%s)' % (
        report['total'], 'exact' if report['exact'] else
        'a lower bound: the exact count was too costly here'))


def _version(text):
    latest = microversion.parse(microversion.max_version_string())
    try:
        want = latest if text == 'latest' else microversion.parse(text)
    except (TypeError, ValueError):
        return None
    if not (microversion.parse(microversion.min_version_string()) <= want
            <= latest):
        return None
    want.max_version = latest
    want.min_version = microversion.parse(microversion.min_version_string())
    return want


def render_explanation(body):
    """The explanation as text tables for a terminal."""
    lines = ['Query: %s (microversion %s)' % (body['query'],
                                              body['microversion']),
             'Candidates: %d; providers kept: %d of %d'
             % (body['candidates'], body['providers']['kept'],
                body['providers']['total']), '']
    table = prettytable.PrettyTable(['Group', 'Step', 'In', 'Kept',
                                     'Removed'])
    table.align['Step'] = 'l'
    table.align['Group'] = 'l'
    for group in body['groups']:
        name = group['name']
        for step in group['steps']:
            table.add_row([name, step['label'], step['in'], step['kept'],
                           step['removed']])
            name = ''
    comb = body['combination']
    name = 'combined'
    for step in comb['steps']:
        if step['removed'] or step['step'] in ('limit', 'isolate',
                                               'same_subtree',
                                               'one_per_tree'):
            table.add_row([name, step['label'], step['in'], step['kept'],
                           step['removed']])
            name = ''
    table.add_row([name or '', 'kept (in a candidate)', comb['in'],
                   comb['kept'], comb['in'] - comb['kept']])
    lines.append(table.get_string())
    if body['explained']:
        table = prettytable.PrettyTable(['Provider', 'Outcome', 'Reason'])
        table.align = 'l'
        for entry in body['explained']:
            reason = entry['reason']
            prefix = '%s: ' % entry['provider']
            if reason.startswith(prefix):
                reason = reason[len(prefix):]
            if entry['kept']:
                outcome = 'kept'
            elif entry['step'] is None:
                outcome = 'unknown'
            else:
                outcome = 'excluded: %s' % entry['step']
                if entry['group']:
                    outcome += ' (group %s)' % entry['group']
            table.add_row([entry['provider'], outcome, reason])
        table.max_width['Reason'] = 90
        lines += ['', table.get_string()]
    if body['not_shown']:
        lines.append('%d more providers not shown (--sample N or '
                     '--provider X to see them).' % body['not_shown'])
    if body['suggestions']:
        lines += ['', 'Nothing fits. What would change that:']
        lines += ['  - %s' % text for text in body['suggestions']]
    return '\n'.join(lines)


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

    text = ('Explain an allocation candidates query: how many providers '
            'each step kept and why the others were excluded.')
    sub = subparsers.add_parser('explain', help=text, description=text)
    sub.add_argument('query', help="GET /allocation_candidates' query "
                     "string, e.g. 'resources=VCPU:1&required=HW_CPU_X86_"
                     "AVX2'")
    sub.add_argument('--provider', action='append', metavar='X',
                     help='a provider (uuid or name) to explain; repeat '
                     'for more')
    sub.add_argument('--json', action='store_true',
                     help='print the JSON the API answers')
    sub.add_argument('--microversion', default='latest',
                     help='the microversion to ask at (default latest)')
    sub.add_argument('--sample', type=int, default=None, metavar='N',
                     help='how many other providers to explain (default '
                     '10)')
    sub.set_defaults(func=ops.explain)

    text = ('Make every API process reload providers, inventories, usage, '
            'traits and aggregates from the database on its next request: '
            'needed only after writes the change triggers do not see '
            '(TRUNCATE on MySQL or SQLite, a bulk load with the triggers '
            'off); SQL by hand and upstream API nodes are seen anyway.')
    sub = subparsers.add_parser('reload', help=text, description=text)
    sub.set_defaults(func=ops.reload)
