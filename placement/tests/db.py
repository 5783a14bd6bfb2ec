"""Throw-away databases for tests, on SQLite or on a real server.

``PLACEMENT_TEST_DB_URL`` picks the server: unset means SQLite files in a
temporary directory; a ``postgresql+psycopg2://`` or ``mysql+pymysql://``
URL names a server account allowed to CREATE and DROP DATABASE, and each
test database is a fresh ``ptest_<random>`` database on it.
"""
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
        if not server_url:
            self._tmpdir = tempfile.mkdtemp(prefix='placement-test-')
            self.url = 'sqlite:///' + os.path.join(self._tmpdir, 'db.sqlite')
        else:
            admin = make_url(server_url)
            self.name = 'ptest_' + uuid.uuid4().hex[:12]
            self._admin_url = admin
            engine = sa.create_engine(admin, isolation_level='AUTOCOMMIT')
            with engine.connect() as conn:
                conn.execute(sa.text('CREATE DATABASE %s' % self.name))
            engine.dispose()
            self.url = admin.set(database=self.name).render_as_string(
                hide_password=False)
        self.engine = sa.create_engine(self.url)
        # As on the service's engines: set before its first connection,
        # since tests write worlds through it before patching it in.
        db_api.install_listeners(self.engine)
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
