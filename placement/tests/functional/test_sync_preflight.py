"""``placement-manage db sync`` on a database that may not take the
change triggers: MariaDB with binary logging on and a user granted only
its own schema, as managed databases are; PostgreSQL tables another role
owns. The sync must stop before it changes anything, with one line
naming the fix and the doc; ``placement-status`` must give the same
advice; once the fix is made, the sync completes.

The installed commands run against a private MariaDB or PostgreSQL (one
per module, started by the test), so this needs nothing of the run's
database: it runs once, in the SQLite run.
"""
import os
import subprocess
import sys
import uuid

import pytest
import sqlalchemy as sa

from placement.db import change_triggers
from placement.db import migration
from placement.tests.functional import mariadb_server
from placement.tests.functional import pg_server

pytestmark = pytest.mark.once('starts its own database server')

BIN = os.path.dirname(sys.executable)
DOC = 'doc/source/upgrade.rst'
PASSWORD = 'secret'


@pytest.fixture(scope='module')
def server():
    if not mariadb_server.available():
        pytest.skip('mariadbd is not installed')
    with mariadb_server.TempMariaDB(
            ['--log-bin=binlog', '--server-id=1']) as server:
        yield server


def _run(url, tmp_path, command, *args):
    """The installed ``command``, configured as a deployer would: a
    config directory and the connection in the environment."""
    conf_dir = tmp_path / 'etc'
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / 'placement.conf').write_text('')
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['OS_PLACEMENT_CONFIG_DIR'] = str(conf_dir)
    env['OS_PLACEMENT_DATABASE__CONNECTION'] = url
    return subprocess.run(
        [os.path.join(BIN, command)] + list(args), env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)


def _extra_version(url):
    engine = sa.create_engine(url)
    try:
        return migration.version(engine, migration.EXTRA)
    finally:
        engine.dispose()


def _missing_triggers(url):
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return change_triggers.missing(conn)
    finally:
        engine.dispose()


class Account:
    """A schema and a user granted ``ALL`` on it and nothing else."""

    def __init__(self, server, revoke=()):
        self.server = server
        self.name = 'p' + uuid.uuid4().hex[:10]
        user = "'%s'@'127.0.0.1'" % self.name
        server.root_sql(
            'SET GLOBAL log_bin_trust_function_creators = 0',
            'CREATE DATABASE %s' % self.name,
            "CREATE USER %s IDENTIFIED BY '%s'" % (user, PASSWORD),
            'GRANT ALL ON %s.* TO %s' % (self.name, user),
            *['REVOKE %s ON %s.* FROM %s' % (priv, self.name, user)
              for priv in revoke])
        self.url = server.url(self.name, PASSWORD, self.name)

    def run(self, tmp_path, command, *args):
        return _run(self.url, tmp_path, command, *args)

    def tables(self):
        return {r[0] for r in self.server.root_sql(
            'SHOW TABLES FROM %s' % self.name)}

    def routines(self):
        return {r[0] for r in self.server.root_sql(
            "SELECT routine_name FROM information_schema.routines "
            "WHERE routine_schema = '%s'" % self.name)}

    def extra_version(self):
        return _extra_version(self.url)

    def missing_triggers(self):
        return _missing_triggers(self.url)


@pytest.fixture
def account(server):
    return Account(server)


def _one_clear_line(result):
    out = (result.stdout + result.stderr).strip()
    assert 'Traceback' not in out, out
    lines = out.splitlines()
    assert len(lines) == 1, out
    return lines[0]


def test_sync_stops_before_any_change_then_completes(server, account,
                                                     tmp_path):
    result = account.run(tmp_path, 'placement-manage', 'db', 'sync')
    assert result.returncode != 0
    line = _one_clear_line(result)
    assert 'log_bin_trust_function_creators = 1' in line, line
    assert 'SUPER' in line and DOC in line, line
    assert account.tables() == set()

    server.root_sql('SET GLOBAL log_bin_trust_function_creators = 1')
    result = account.run(tmp_path, 'placement-manage', 'db', 'sync')
    assert result.returncode == 0, result.stdout + result.stderr
    assert account.missing_triggers() == []
    assert account.extra_version() == migration.head(migration.EXTRA)


def test_status_advises_where_sync_would_stop(server, account, tmp_path):
    """The state the refusal used to leave (our track at its first
    revision, no triggers): placement-status names the fix, not only
    "run db sync", and db sync leaves the revision as it is."""
    first = 'c3a1f0e2d4b7'
    engine = sa.create_engine(server.root_url(account.name))
    try:
        migration.upgrade(first, engine=engine)
    finally:
        engine.dispose()

    check = account.run(tmp_path, 'placement-status', 'upgrade', 'check')
    assert check.returncode == 2, check.stdout + check.stderr
    assert 'log_bin_trust_function_creators = 1' in check.stdout
    assert DOC in check.stdout

    result = account.run(tmp_path, 'placement-manage', 'db', 'sync')
    assert result.returncode != 0
    assert 'log_bin_trust_function_creators' in _one_clear_line(result)
    assert account.extra_version() == first

    server.root_sql('SET GLOBAL log_bin_trust_function_creators = 1')
    check = account.run(tmp_path, 'placement-status', 'upgrade', 'check')
    assert 'log_bin_trust_function_creators' not in check.stdout


def test_sync_names_the_missing_schema_grant(server, tmp_path):
    account = Account(server, revoke=['TRIGGER'])
    server.root_sql('SET GLOBAL log_bin_trust_function_creators = 1')
    result = account.run(tmp_path, 'placement-manage', 'db', 'sync')
    assert result.returncode != 0
    line = _one_clear_line(result)
    assert 'GRANT TRIGGER' in line and DOC in line, line
    assert account.tables() == set()


def test_triggers_failing_half_way_leave_none(server, account):
    """Past the check (a grant revoked in between, say), a trigger the
    server refuses takes the ones made before it away with it, and the
    error says what to do."""
    server.root_sql('SET GLOBAL log_bin_trust_function_creators = 1')
    engine = sa.create_engine(account.url)
    try:
        migration.upgrade('head', engine=engine)
        with engine.begin() as conn:
            change_triggers.remove(conn)
        server.root_sql('SET GLOBAL log_bin_trust_function_creators = 0')
        with pytest.raises(change_triggers.InstallFailed) as failed:
            with engine.begin() as conn:
                change_triggers.install(conn)
    finally:
        engine.dispose()
    assert 'log_bin_trust_function_creators' in str(failed.value)
    assert DOC in str(failed.value)
    assert account.routines() == set()
    assert len(account.missing_triggers()) == len(
        change_triggers.made('mysql'))


# -- PostgreSQL --------------------------------------------------------------

@pytest.fixture(scope='module')
def pg():
    if pg_server.find_bindir() is None:
        pytest.skip('PostgreSQL is not installed')
    with pg_server.TempPostgres() as pg:
        yield pg


def test_pg_sync_names_the_tables_it_does_not_own(pg, tmp_path):
    """Upstream's tables made by another role (the one upstream's db sync
    ran as): only a table's owner may put a trigger on it."""
    name = 'p' + uuid.uuid4().hex[:10]
    admin = sa.create_engine(pg.url, isolation_level='AUTOCOMMIT')
    with admin.connect() as conn:
        conn.exec_driver_sql('CREATE DATABASE %s' % name)
        conn.exec_driver_sql('CREATE ROLE %s LOGIN' % name)
    admin.dispose()
    owner_url = pg.url.rsplit('/', 1)[0] + '/' + name
    app_url = owner_url.replace('//%s@' % pg_server.USER, '//%s@' % name)
    owner = sa.create_engine(owner_url)
    try:
        migration.upgrade('head', engine=owner)
        migration.drop_extra(engine=owner)
        with owner.begin() as conn:
            conn.exec_driver_sql(
                'GRANT CREATE, USAGE ON SCHEMA public TO %s; GRANT ALL ON '
                'ALL TABLES IN SCHEMA public TO %s; GRANT ALL ON ALL '
                'SEQUENCES IN SCHEMA public TO %s' % (name, name, name))

        result = _run(app_url, tmp_path, 'placement-manage', 'db', 'sync')
        assert result.returncode != 0
        line = _one_clear_line(result)
        assert 'does not own' in line and 'OWNER TO %s' % name in line
        assert 'resource_providers' in line and DOC in line, line
        assert _extra_version(app_url) is None

        tables = sorted(set(change_triggers.WATCHED)
                        | set(change_triggers.RENAMES))
        with owner.begin() as conn:
            for table in tables:
                conn.exec_driver_sql('ALTER TABLE %s OWNER TO %s'
                                     % (table, name))
    finally:
        owner.dispose()
    result = _run(app_url, tmp_path, 'placement-manage', 'db', 'sync')
    assert result.returncode == 0, result.stdout + result.stderr
    assert _missing_triggers(app_url) == []
