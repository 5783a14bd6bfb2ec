"""placement-status upgrade check [--json]: is this deployment ready to
run a newer placement? Exit codes are oslo.upgradecheck's: 0 success,
1 warning, 2 failure, 255 the checks themselves broke."""
import sys

from oslo_upgradecheck import common_checks
from oslo_upgradecheck import upgradecheck

from placement import conf as placement_conf
from placement import context as placement_context
from placement.db import api as db_api
from placement.db import change_triggers
from placement.db import migration
from placement.db import trigger_preflight
from placement.objects import data_migration

_RUN_MIGRATIONS = ('Run the "placement-manage db online_data_migrations" '
                   'command.')


class Checks(upgradecheck.UpgradeCommands):
    """The checks, named as upstream names them in the results table."""

    def __init__(self, config=None):
        self.config = config

    def _context(self):
        return placement_context.admin_context(self.config)

    def _check_root_provider_ids(self):
        """Providers from before nested providers may lack a root id; the
        schema migrations after this release refuse to run until the online
        data migration has filled it in."""
        if data_migration.has_missing_root_ids(self._context()):
            return upgradecheck.Result(
                upgradecheck.Code.FAILURE,
                details='There is at least one resource provider table '
                        'record which misses its root provider id. '
                        + _RUN_MIGRATIONS)
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _check_incomplete_consumers(self):
        """Allocations written before consumers were recorded have no
        consumers row (so no project, user or generation); the online data
        migration creates them."""
        missing = data_migration.count_incomplete_consumers(self._context())
        if missing:
            return upgradecheck.Result(
                upgradecheck.Code.WARNING,
                details='There are %s incomplete consumers table records '
                        'for existing allocations. %s'
                        % (missing, _RUN_MIGRATIONS))
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _check_extra_schema(self):
        """Our own schema track (placement_extra_version): the change log
        that lets API processes answer allocation candidates from memory.
        Without it the service still works, reading SQL for every
        request."""
        current = migration.version(track=migration.EXTRA)
        head = migration.head(migration.EXTRA)
        blocked = current != head and self._sync_blocked()
        if blocked:
            return upgradecheck.Result(
                upgradecheck.Code.FAILURE,
                details='"placement-manage db sync" will stop before '
                        'changing anything: %s' % blocked)
        if current is None:
            return upgradecheck.Result(
                upgradecheck.Code.WARNING,
                details='The candidates world is not in use; run '
                        '"placement-manage db sync".')
        if current != head:
            return upgradecheck.Result(
                upgradecheck.Code.WARNING,
                details='The extra schema is at revision %s, not %s; run '
                        '"placement-manage db sync".' % (current, head))
        # A trigger dropped, or disabled by a bulk tool, counts nothing:
        # the service answers from SQL until it is back.
        broken = change_triggers.not_firing_on(db_api.get_engine())
        if broken:
            return upgradecheck.Result(
                upgradecheck.Code.FAILURE,
                details='Change triggers are not firing on %s: writes '
                        'there go uncounted and allocation candidates are '
                        'answered from SQL; run "placement-manage db '
                        'sync".' % broken)
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _sync_blocked(self):
        """What db sync's preflight would refuse (see
        placement.db.trigger_preflight), or None: "run db sync" alone
        would send the operator into the same refusal."""
        with db_api.get_engine().connect() as conn:
            found = trigger_preflight.problems(conn)
        return trigger_preflight.advice(found) if found else None

    def _check_policy_json(self):
        """JSON policy files are deprecated in favour of YAML."""
        return common_checks.check_policy_json(self, self.config)

    _upgrade_checks = (
        ('Missing Root Provider IDs', _check_root_provider_ids),
        ('Incomplete Consumers', _check_incomplete_consumers),
        ('Policy File JSON to YAML Migration', _check_policy_json),
        ('Candidates Change Log', _check_extra_schema),
    )


class _OptCollector(list):
    """Receives the 'upgrade check' SubCommandOpt from oslo.upgradecheck
    so that build_conf registers it before parsing."""

    def register_cli_opt(self, opt):
        self.append(opt)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    checks = Checks()
    opts = _OptCollector()
    upgradecheck.register_cli_options(opts, checks)
    config = placement_conf.build_conf(args=argv, cli_opts=opts)
    checks.config = config
    # oslo.upgradecheck reads --json from its module-level CONF.
    upgradecheck.CONF = config
    db_api.configure(config)
    return upgradecheck.run(config)


if __name__ == '__main__':
    sys.exit(main())
