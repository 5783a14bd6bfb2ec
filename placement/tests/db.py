"""Throw-away databases for tests, on SQLite or on a real server.

``PLACEMENT_TEST_DB_URL`` picks the server: unset means SQLite files in a
temporary directory; a ``postgresql+psycopg2://`` or ``mysql+pymysql://``
URL names a server account allowed to CREATE and DROP DATABASE, and each
test database is a fresh ``ptest_<random>`` database on it. On PostgreSQL
a database with the schema is a copy of a template made once per schema
(``CREATE DATABASE ... TEMPLATE``: a file copy, where the DDL took three
times as long); its epoch is then made new, as a new database's is.
"""
import functools
import glob
import hashlib
import os
import tempfile
import uuid

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from placement.db import api as db_api
from placement.db import models

ENV_VAR = 'PLACEMENT_TEST_DB_URL'


def backend():
    url = os.environ.get(ENV_VAR)
    return make_url(url).get_backend_name() if url else 'sqlite'


class TestDatabase:
    """A new empty database with the schema in place (none with
    ``schema=False``); ``drop()`` ends it."""

    def __init__(self, migrate=False, schema=True):
        server_url = os.environ.get(ENV_VAR)
        self._tmpdir = None
        self._admin_url = None
        template = None
        if not server_url:
            self._tmpdir = tempfile.mkdtemp(prefix='placement-test-')
            self.url = 'sqlite:///' + os.path.join(self._tmpdir, 'db.sqlite')
        else:
            admin = make_url(server_url)
            self.name = 'ptest_' + uuid.uuid4().hex[:12]
            self._admin_url = admin
            if schema and admin.get_backend_name() == 'postgresql':
                template = _pg_template(admin, migrate)
            try:
                _create_database(admin, self.name, template)
            except sa.exc.ProgrammingError:
                if not template:
                    raise
                # A server made again at the same address (a cluster
                # test's): its templates went with the old one.
                _TEMPLATES.clear()
                template = _pg_template(admin, migrate)
                _create_database(admin, self.name, template)
            self.url = admin.set(database=self.name).render_as_string(
                hide_password=False)
        self.engine = sa.create_engine(self.url)
        # As on the service's engines: set before its first connection,
        # since tests write worlds through it before patching it in.
        db_api.install_listeners(self.engine)
        if template:
            _new_epoch(self.engine)
        else:
            self._make_schema(migrate, schema)

    def _make_schema(self, migrate, schema):
        if migrate:
            from placement.db import migration
            migration.upgrade('head', engine=self.engine)
        elif schema:
            models.BASE.metadata.create_all(self.engine)

    def drop(self):
        self.engine.dispose()
        if self._admin_url is not None:
            engine = sa.create_engine(self._admin_url,
                                      isolation_level='AUTOCOMMIT')
            with engine.connect() as conn:
                if self._admin_url.get_backend_name() == 'postgresql':
                    # Only our own leftover sessions: autovacuum workers
                    # belong to the superuser (we may not signal them) and
                    # DROP DATABASE stops those itself.
                    conn.execute(sa.text(
                        'SELECT pg_terminate_backend(pid) FROM '
                        'pg_stat_activity WHERE datname = :n '
                        'AND usename = current_user'), {'n': self.name})
                conn.execute(sa.text('DROP DATABASE IF EXISTS %s' % self.name))
            engine.dispose()
        if self._tmpdir:
            import shutil
            shutil.rmtree(self._tmpdir, ignore_errors=True)


def _create_database(admin, name, template=None):
    engine = sa.create_engine(admin, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            conn.execute(sa.text('CREATE DATABASE %s%s' % (
                name, ' TEMPLATE %s' % template if template else '')))
    finally:
        engine.dispose()


@functools.lru_cache(maxsize=None)
def _schema_key(migrate):
    """A digest of what makes the schema: the models, the triggers and the
    migrations; a change to any of them makes a new template. Read once
    per process: the files do not change under a run."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(here, 'db', '*.py')) +
                   glob.glob(os.path.join(here, 'db', '*migrations',
                                          'versions', '*.py')))
    digest = hashlib.sha256(b'migrate' if migrate else b'create_all')
    for path in paths:
        with open(path, 'rb') as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


# (server, template) pairs known to exist: tests may point
# PLACEMENT_TEST_DB_URL at a server of their own (pg_server.TempPostgres).
_TEMPLATES = set()


def _pg_template(admin, migrate):
    """The name of the template database holding the empty schema (made
    by the migrations with ``migrate``), made when missing. It is built
    under another name and renamed when complete, so that a process racing
    this one (pytest-xdist's workers, another run) never copies a half
    one; the loser drops its own."""
    name = 'ptest_tmpl_%s_%s' % ('m' if migrate else 'c',
                                 _schema_key(migrate))
    known = (admin.render_as_string(hide_password=True), name)
    if known in _TEMPLATES:
        return name
    engine = sa.create_engine(admin, isolation_level='AUTOCOMMIT')
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text(
                'SELECT 1 FROM pg_database WHERE datname = :n'),
                {'n': name}).first()
        if not found:
            building = TestDatabase(migrate=migrate, schema=False)
            building._make_schema(migrate, True)
            building.engine.dispose()
            try:
                with engine.connect() as conn:
                    conn.execute(sa.text('ALTER DATABASE %s RENAME TO %s' % (
                        building.name, name)))
            except sa.exc.DBAPIError:
                building.drop()     # another process made it first
    finally:
        engine.dispose()
    _TEMPLATES.add(known)
    return name


def _new_epoch(engine):
    """A copied database is a new database: its epoch (models.CHANGE_SLOT)
    must not be the template's."""
    epoch = models.change_slot_rows()[0]
    with engine.begin() as conn:
        conn.execute(models.CHANGE_SLOT.update().where(
            models.CHANGE_SLOT.c.slot == epoch['slot']).values(
                seq=epoch['seq'], mark=epoch['mark']))


def first_change_tables(conn):
    """The change tables as our first revision (c3a1f0e2d4b7) made them,
    with their rows: no ``mark`` columns (f2c6a8e1d9b4 adds them), no
    triggers. (The models' tables have the later columns.)"""
    meta = sa.MetaData()
    for table in (models.CHANGE_SLOT, models.CHANGE):
        sa.Table(table.name, meta, *[
            sa.Column(c.name, c.type, primary_key=c.primary_key,
                      autoincrement=False, nullable=c.nullable)
            for c in table.columns if c.name != 'mark']).create(conn)
    conn.execute(meta.tables[models.CHANGE_SLOT.name].insert(), [
        {'slot': r['slot'], 'seq': r['seq']}
        for r in models.change_slot_rows()])
