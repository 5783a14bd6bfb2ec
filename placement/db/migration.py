"""Schema migrations with Alembic: upgrade, stamp and version."""
import contextlib
import fcntl
import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
import sqlalchemy as sa

from placement.db import api as db_api

_HERE = os.path.dirname(__file__)


def _alembic_config(engine=None):
    cfg = alembic_config.Config(os.path.join(_HERE, 'migrations',
                                             'alembic.ini'))
    cfg.set_main_option('script_location',
                        os.path.join(_HERE, 'migrations'))
    cfg.attributes['engine'] = engine or db_api.get_engine()
    return cfg


def upgrade(version='head', engine=None):
    alembic_command.upgrade(_alembic_config(engine), version)


def stamp(version, engine=None):
    alembic_command.stamp(_alembic_config(engine), version)


def version(engine=None):
    engine = engine or db_api.get_engine()
    with engine.connect() as conn:
        return alembic_migration.MigrationContext.configure(
            conn).get_current_revision()


# Any fixed number: the PostgreSQL advisory lock key placement's start-up
# sync takes (MySQL/MariaDB use the name below).
_PG_LOCK_KEY = 0x706c6163
_MYSQL_LOCK_NAME = 'placement_startup_sync'


@contextlib.contextmanager
def startup_lock(engine=None, timeout=300):
    """One process at a time: several WSGI workers starting together must
    not run the migrations and the standard trait sync side by side (on
    SQLite that ends in 'database is locked'; elsewhere in duplicate DDL).

    SQLite: an flock on a file beside the database. PostgreSQL / MySQL:
    a session-level advisory lock, so processes on other hosts wait too.
    """
    engine = engine or db_api.get_engine()
    backend = engine.dialect.name
    if backend == 'sqlite':
        path = engine.url.database
        if not path or path == ':memory:' or path.startswith('file:'):
            yield
            return
        with open(path + '.lock', 'a') as lockfile:
            fcntl.flock(lockfile, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lockfile, fcntl.LOCK_UN)
        return
    if backend == 'postgresql':
        take = sa.text('SELECT pg_advisory_lock(:key)')
        give = sa.text('SELECT pg_advisory_unlock(:key)')
        params = {'key': _PG_LOCK_KEY}
    elif backend == 'mysql':
        take = sa.text('SELECT GET_LOCK(:name, :timeout)')
        give = sa.text('SELECT RELEASE_LOCK(:name)')
        params = {'name': _MYSQL_LOCK_NAME, 'timeout': timeout}
    else:
        yield
        return
    with engine.connect() as conn:
        conn.execute(take, params)
        # The lock belongs to the session: end the transaction so this
        # connection holds nothing else while the work runs.
        conn.commit()
        try:
            yield
        finally:
            conn.execute(give, params)
            conn.commit()
