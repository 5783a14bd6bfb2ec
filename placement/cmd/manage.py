"""placement-manage: schema migrations, online data migrations and the
standard traits / resource classes, for operators.

    placement-manage [--config-file F | --config-dir D] db sync
    placement-manage db version
    placement-manage db stamp <version>
    placement-manage db online_data_migrations [--max-count N]
    placement-manage os-traits sync
    placement-manage explain '<query string>' [--provider X ...] [--json]
        [--microversion 1.39] [--sample N]

Configuration is read like the service reads it: ``--config-file`` /
``--config-dir``, else ``$OS_PLACEMENT_CONFIG_DIR/placement.conf``, else
oslo.config's usual places, with ``OS_<GROUP>__<OPTION>`` overrides.
"""
import collections
import functools
import json
import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_log import log as logging
import os_resource_classes as orc
import os_traits
import prettytable
import webob
import webob.exc

from placement import conf as placement_conf
from placement import context as placement_context
from placement.db import api as db_api
from placement.db import migration
from placement import exception
from placement.handlers import explain as explain_handler
from placement import microversion
from placement.objects import data_migration
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj

LOG = logging.getLogger(__name__)

# Batch size when --max-count is not given: batches run until none is left.
DEFAULT_BATCH = 50


class DbCommands:
    def __init__(self, config):
        self.config = config

    def _context(self):
        return placement_context.admin_context(self.config)

    def sync(self):
        migration.upgrade('head')
        return 0

    def version(self):
        print(migration.version())
        return 0

    def stamp(self):
        migration.stamp(self.config.command.version)
        return 0

    def online_data_migrations(self):
        """Exit 0 when nothing is left to migrate; 1 when --max-count was
        given and a batch migrated something (run again); 2 when migrations
        raised and nothing else progressed; 127 for a bad --max-count."""
        max_count = self.config.command.max_count
        limited = max_count is not None
        if limited:
            try:
                max_count = int(max_count)
            except ValueError:
                max_count = 0
            if max_count < 1:
                print('Must supply a positive value for max_count')
                return 127
        else:
            max_count = DEFAULT_BATCH
            print('Running batches of %i until complete' % max_count)

        totals = collections.OrderedDict()
        failed = False
        while True:
            batch, failed = self._one_batch(max_count)
            ran = 0
            for name, (found, done) in batch.items():
                old_found, old_done = totals.get(name, (0, 0))
                totals[name] = (old_found + found, old_done + done)
                ran += done
            if limited or not ran:
                break

        table = prettytable.PrettyTable(
            ['Migration', 'Total Found', 'Completed'])
        for name, (found, done) in totals.items():
            table.add_row([name, found, done])
        print(table)

        # With --max-count, errors are not final while other migrations
        # still progress: their work may unblock the failing ones.
        if failed and not (limited and ran):
            print('Some migrations failed unexpectedly. Check log for '
                  'details.')
            return 2
        return 1 if ran else 0

    def _one_batch(self, max_count):
        ctx = self._context()
        ran = 0
        failed = False
        results = collections.OrderedDict()
        for func in data_migration.ONLINE_MIGRATIONS:
            name = func.__name__
            try:
                found, done = func(ctx, max_count - ran)
            except Exception:
                msg = 'Error attempting to run %s' % name
                print(msg)
                LOG.exception(msg)
                failed = True
                found = done = 0
            if found:
                print('%i rows matched query %s, %i migrated'
                      % (found, name, done))
            results[name] = (found, done)
            ran += done
            if ran >= max_count:
                break
        return results, failed


class OsTraitsCommands:
    def __init__(self, config):
        self.config = config

    def sync(self):
        """Add the standard traits and resource classes the installed
        os-traits and os-resource-classes know and the database lacks."""
        ctx = placement_context.admin_context(self.config)
        traits = trait_obj.ensure_sync(ctx) or 0
        classes = rc_obj.ensure_sync(ctx) or 0
        print('Standard traits: %d added, %d known to os-traits'
              % (traits, len(os_traits.get_traits())))
        print('Standard resource classes: %d added, %d known to '
              'os-resource-classes' % (classes, len(orc.STANDARDS)))
        return 0


class ExplainCommands:
    def __init__(self, config):
        self.config = config

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
        params = webob.Request.blank('/?' + query).GET
        ctx = placement_context.admin_context(self.config)
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


def _add_parsers(subparsers, db, traits, explainer=None):
    # Not required, so that a bare "placement-manage" reaches main() and
    # prints the full help instead of an argparse usage error.
    subparsers.required = False

    parser = subparsers.add_parser('db', help='Database commands.')
    parser.set_defaults(func=parser.print_help)
    db_parsers = parser.add_subparsers(description='database commands')

    text = 'Sync the database to the current version.'
    sub = db_parsers.add_parser('sync', help=text, description=text)
    sub.set_defaults(func=db.sync)

    text = 'Report the current database version.'
    sub = db_parsers.add_parser('version', help=text, description=text)
    sub.set_defaults(func=db.version)

    text = 'Stamp the revision table with the given version.'
    sub = db_parsers.add_parser('stamp', help=text, description=text)
    sub.add_argument('version', help='the version to stamp')
    sub.set_defaults(func=db.stamp)

    text = 'Run the online data migrations.'
    sub = db_parsers.add_parser('online_data_migrations', help=text,
                                description=text)
    sub.add_argument('--max-count', metavar='<number>',
                     help='Maximum number of objects to consider')
    sub.set_defaults(func=db.online_data_migrations)

    parser = subparsers.add_parser(
        'os-traits', help='Standard traits and resource classes.')
    parser.set_defaults(func=parser.print_help)
    trait_parsers = parser.add_subparsers(
        description='standard trait commands')
    text = ('Add the standard traits and resource classes of the installed '
            'os-traits and os-resource-classes to the database.')
    sub = trait_parsers.add_parser('sync', help=text, description=text)
    sub.set_defaults(func=traits.sync)

    if explainer is None:
        return
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
                     help='how many other providers to explain '
                     '(default %d)' % explain_handler.DEFAULT_SAMPLE)
    sub.set_defaults(func=explainer.explain)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # The parsers are built while the config is parsed, so the command
    # objects get the parsed config afterwards.
    db, traits = DbCommands(None), OsTraitsCommands(None)
    explainer = ExplainCommands(None)
    command_opt = cfg.SubCommandOpt(
        'db', dest='command', title='Command', help='Available commands',
        handler=functools.partial(_add_parsers, db=db, traits=traits,
                                  explainer=explainer))
    config = placement_conf.build_conf(args=argv, cli_opts=[command_opt])
    db.config = traits.config = explainer.config = config
    try:
        func = config.command.func
    except cfg.NoSuchOptError:
        # No command given.
        config.print_help()
        return 1
    db_api.configure(config)
    try:
        return func() or 0
    except alembic_util.CommandError as exc:
        print('ERROR: %s' % exc, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
