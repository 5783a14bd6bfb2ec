"""placement-manage: schema migrations, online data migrations and the
standard traits / resource classes, for operators.

    placement-manage [--config-file F | --config-dir D] db sync
    placement-manage db version [--extra]
    placement-manage db stamp <version>
    placement-manage db drop_extra
    placement-manage db online_data_migrations [--max-count N]
    placement-manage os-traits sync
    placement-manage audit [--json] [--fix]      (see placement.cmd.ops)
    placement-manage capacity '<query>' [--json]
    placement-manage explain '<query>' [--provider X ...] [--json]

Configuration is read like the service reads it: ``--config-file`` /
``--config-dir``, else ``$OS_PLACEMENT_CONFIG_DIR/placement.conf``, else
oslo.config's usual places, with ``OS_<GROUP>__<OPTION>`` overrides.
"""
import collections
import functools
import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_log import log as logging
import os_resource_classes as orc
import os_traits
import prettytable

from placement.cmd import ops as ops_cmd
from placement import conf as placement_conf
from placement import context as placement_context
from placement.db import api as db_api
from placement.db import change_triggers
from placement.db import migration
from placement.db import startup
from placement.db import trigger_preflight
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
        """Upstream's schema track, then ours (see placement.db.migration);
        one at a time with API nodes migrating at start-up. Change
        triggers missing or disabled at the head are installed again."""
        with startup.startup_lock():
            mended = migration.upgrade('head')
        if mended:
            print('Change triggers were not firing on %s: installed again '
                  '(a new epoch: every API process reloads its allocation '
                  'candidates world).' % mended)
        return 0

    def version(self):
        """Upstream's revision, as upstream prints it (deployment tools
        compare it); with --extra, our own track's instead."""
        if self.config.command.extra:
            print(migration.version(track=migration.EXTRA))
        else:
            print(migration.version())
        return 0

    def drop_extra(self):
        with startup.startup_lock():
            migration.drop_extra()
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


def _add_parsers(subparsers, db, traits, ops):
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
    sub.add_argument('--extra', action='store_true',
                     help="this service's own schema track (the tables "
                          "upstream's placement does not have) instead of "
                          "upstream's")
    sub.set_defaults(func=db.version)

    text = 'Stamp the revision table with the given version.'
    sub = db_parsers.add_parser('stamp', help=text, description=text)
    sub.add_argument('version', help='the version to stamp')
    sub.set_defaults(func=db.stamp)

    text = ("Drop the tables this service adds to upstream's schema, and "
            "their version table, for going back to upstream's placement "
            "once none of this service's API nodes is left (a later "
            "db sync adds them again).")
    sub = db_parsers.add_parser('drop_extra', help=text, description=text)
    sub.set_defaults(func=db.drop_extra)

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

    ops_cmd.add_parsers(subparsers, ops)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # The parsers are built while the config is parsed, so the command
    # objects get the parsed config afterwards.
    db, traits = DbCommands(None), OsTraitsCommands(None)
    ops = ops_cmd.OpsCommands(None)
    command_opt = cfg.SubCommandOpt(
        'db', dest='command', title='Command', help='Available commands',
        handler=functools.partial(_add_parsers, db=db, traits=traits,
                                  ops=ops))
    config = placement_conf.build_conf(args=argv, cli_opts=[command_opt])
    db.config = traits.config = ops.config = config
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
    except trigger_preflight.NotReady as exc:
        print('ERROR: db sync changed nothing: %s' % exc, file=sys.stderr)
        return 1
    except change_triggers.InstallFailed as exc:
        print('ERROR: %s' % exc, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
