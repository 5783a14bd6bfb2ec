"""Upstream's API nodes and ours over one database, in either order, and
back: replacing upstream's nodes one at a time must never stop the ones
left, and deployment tools run ``placement-manage db sync`` of whichever
package a host has on every deploy.

Upstream is the real openstack-placement 16.0.0 of ``.upstream-venv``: its
``placement-manage`` console script and its WSGI application, booted with
``sync_on_startup = True`` (``wsgi_boot.py``). Ours runs as deployed too:
``python -m placement.cmd.manage`` and the same boot script. On the
backend under test (``PLACEMENT_TEST_DB_URL``, else SQLite).
"""
import json
import os
import subprocess
import sys
import uuid

import pytest
import sqlalchemy as sa

from placement.db import migration
from placement.db import models
from placement.tests import db as test_db
from placement.tests.functional import upstream_venv

UPSTREAM_HEAD = 'a082b8bb98d0'
# The change log's revision: an earlier release of ours stamped it in
# alembic_version; now the first revision of our own track.
CHANGE_LOG = 'c3a1f0e2d4b7'
EXTRA_VERSION_TABLE = 'placement_extra_version'
CHANGE_TABLES = {'placement_change_slots', 'placement_changes'}
BOOT = os.path.join(os.path.dirname(__file__), 'wsgi_boot.py')


@pytest.fixture(scope='module')
def upstream_bin():
    venv = upstream_venv.require('upstream')
    return os.path.join(venv, 'bin')


class _Hosts:
    """One database; an upstream host and one of ours, each with a
    placement.conf naming it (sync_on_startup on)."""

    def __init__(self, db, conf_dir, upstream_bin):
        self.db = db
        self.conf_dir = conf_dir
        self.upstream_bin = upstream_bin
        conf_dir.mkdir()
        (conf_dir / 'placement.conf').write_text(
            '[placement_database]\nconnection = %s\nsync_on_startup = True\n'
            '[api]\nauth_strategy = noauth2\n' % db.url)

    def _env(self, upstream):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('OS_', 'PLACEMENT_'))}
        if upstream:
            # Our checkout on the path would shadow upstream's package.
            env.pop('PYTHONPATH', None)
        env['OS_PLACEMENT_CONFIG_DIR'] = str(self.conf_dir)
        return env

    def _run(self, upstream, argv):
        return subprocess.run(
            argv, env=self._env(upstream), cwd=str(self.conf_dir),
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=180)

    def manage(self, upstream, *args):
        """placement-manage of the upstream host or ours; exit code 0
        asserted, stdout returned."""
        if upstream:
            argv = [os.path.join(self.upstream_bin, 'placement-manage')]
        else:
            argv = [sys.executable, '-m', 'placement.cmd.manage']
        # Upstream's placement-manage reads no OS_PLACEMENT_CONFIG_DIR.
        conf = ['--config-file', str(self.conf_dir / 'placement.conf')]
        result = self._run(upstream, argv + conf + list(args))
        assert result.returncode == 0, (
            '%s placement-manage %s: exit %d\n%s%s' % (
                'upstream' if upstream else 'our', ' '.join(args),
                result.returncode, result.stdout, result.stderr[-3000:]))
        return result.stdout

    def serve(self, upstream, *requests):
        """Boot the upstream application or ours (sync_on_startup) and
        send ``requests`` ((method, path, body) each); the answers."""
        python = (os.path.join(self.upstream_bin, 'python') if upstream
                  else sys.executable)
        result = self._run(upstream, [python, BOOT,
                                      json.dumps(list(requests))])
        assert result.returncode == 0, (
            '%s application did not boot: exit %d\n%s' % (
                'upstream' if upstream else 'our', result.returncode,
                result.stderr[-3000:]))
        return [json.loads(line[len('ANSWER '):])
                for line in result.stdout.splitlines()
                if line.startswith('ANSWER ')]

    def create_and_list(self, upstream):
        """Boot, create a provider, list them all: the new one's name and
        every name listed."""
        name = 'rp-%s' % uuid.uuid4().hex[:8]
        created, listed = self.serve(
            upstream, ('POST', '/resource_providers', {'name': name}),
            ('GET', '/resource_providers', None))
        assert created['status'] == 200, created
        return name, self._names(listed)

    def provider_names(self, upstream):
        (listed,) = self.serve(upstream, ('GET', '/resource_providers',
                                          None))
        return self._names(listed)

    @staticmethod
    def _names(answer):
        assert answer['status'] == 200, answer
        return {rp['name'] for rp in answer['body']['resource_providers']}

    def tables(self):
        return set(sa.inspect(self.db.engine).get_table_names())

    def upstream_version(self):
        with self.db.engine.connect() as conn:
            return [r[0] for r in conn.execute(
                sa.text('SELECT version_num FROM alembic_version'))]


@pytest.fixture
def hosts(tmp_path, upstream_bin):
    db = test_db.TestDatabase(schema=False)
    yield _Hosts(db, tmp_path / 'etc', upstream_bin)
    db.drop()


def _assert_ours_at_head(hosts):
    """Upstream's table says upstream's head, ours our track's head."""
    assert hosts.upstream_version() == [UPSTREAM_HEAD]
    assert migration.version(hosts.db.engine, migration.EXTRA) == (
        migration.head(migration.EXTRA))
    assert CHANGE_TABLES | {EXTRA_VERSION_TABLE} <= hosts.tables()


def test_ours_then_upstream_db_sync_and_upstream_boots(hosts):
    """A host replaced by ours syncs first; the upstream hosts left keep
    running db sync on their deploys and booting with sync_on_startup."""
    hosts.manage(False, 'db', 'sync')
    hosts.manage(True, 'db', 'sync')
    name, names = hosts.create_and_list(upstream=True)
    assert names == {name}
    assert hosts.provider_names(upstream=False) == {name}
    _assert_ours_at_head(hosts)


def test_upstream_ours_upstream_db_sync_then_both_serve(hosts):
    """An upstream deployment, one host replaced by ours, then an upstream
    host deployed again."""
    hosts.manage(True, 'db', 'sync')
    hosts.manage(False, 'db', 'sync')
    _assert_ours_at_head(hosts)
    hosts.manage(True, 'db', 'sync')
    name, names = hosts.create_and_list(upstream=True)
    assert names == {name}
    assert hosts.provider_names(upstream=False) == {name}
    _assert_ours_at_head(hosts)


def _as_an_earlier_release_left_it(hosts):
    """Upstream's schema, our change tables, and our revision in upstream's
    alembic_version, as releases of ours before the separate track left a
    database; plus one logged change, which must survive. The epoch."""
    engine = hosts.db.engine
    migration.upgrade(UPSTREAM_HEAD, engine=engine)
    with engine.begin() as conn:
        test_db.first_change_tables(conn)
        conn.execute(sa.text('UPDATE alembic_version SET version_num = :v'),
                     {'v': CHANGE_LOG})
        conn.execute(models.CHANGE.insert().values(
            slot=3, seq=1, resource_provider_id=3))
        return conn.execute(sa.select(models.CHANGE_SLOT.c.seq).where(
            models.CHANGE_SLOT.c.slot == -1)).scalar()


def _change_tables_kept(hosts, epoch):
    """The rows are the old ones; the epoch moved once by each revision
    that installs the triggers, d7e2b9c41f05, e4b8d2a6c913 and
    f2c6a8e1d9b4 (what was written before or while they went in may not
    all be in the log, so every process reloads)."""
    with hosts.db.engine.connect() as conn:
        assert conn.execute(sa.select(models.CHANGE_SLOT.c.seq).where(
            models.CHANGE_SLOT.c.slot == -1)).scalar() == epoch + 3
        assert (3, 1, 3) in conn.execute(sa.select(
            models.CHANGE.c.slot, models.CHANGE.c.seq,
            models.CHANGE.c.resource_provider_id)).all()


def test_db_sync_converts_a_database_an_earlier_release_migrated(hosts):
    epoch = _as_an_earlier_release_left_it(hosts)
    hosts.manage(False, 'db', 'sync')
    _assert_ours_at_head(hosts)
    _change_tables_kept(hosts, epoch)
    hosts.manage(True, 'db', 'sync')
    name, names = hosts.create_and_list(upstream=True)
    assert names == {name}


def test_sync_on_startup_converts_a_database_an_earlier_release_migrated(
        hosts):
    epoch = _as_an_earlier_release_left_it(hosts)
    name, names = hosts.create_and_list(upstream=False)
    assert names == {name}
    _assert_ours_at_head(hosts)
    _change_tables_kept(hosts, epoch)
    assert hosts.provider_names(upstream=True) == {name}


def test_going_back_to_upstream_leaves_our_tables_then_drops_them(hosts):
    """Every host back on upstream's package: upstream's db sync and
    application work with our tables in place; ``db drop_extra`` of ours
    removes them, and a later db sync of ours brings them back."""
    ours, _ = hosts.create_and_list(upstream=False)
    hosts.manage(True, 'db', 'sync')
    theirs, names = hosts.create_and_list(upstream=True)
    assert names == {ours, theirs}
    _assert_ours_at_head(hosts)

    hosts.manage(False, 'db', 'drop_extra')
    assert not (CHANGE_TABLES | {EXTRA_VERSION_TABLE}) & hosts.tables()
    assert hosts.upstream_version() == [UPSTREAM_HEAD]
    hosts.manage(True, 'db', 'sync')
    assert hosts.upstream_version() == [UPSTREAM_HEAD]
    # Upstream writes with nothing of ours left to write into.
    again, names = hosts.create_and_list(upstream=True)
    assert names == {ours, theirs, again}

    migration.upgrade('head', engine=hosts.db.engine)
    _assert_ours_at_head(hosts)
