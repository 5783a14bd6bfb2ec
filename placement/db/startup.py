"""One process at a time through the start-up work on the database.

Apart from the migrations (placement.db.migration) because every API
worker takes it at start, to sync the standard traits and classes, and
few of them migrate: importing alembic would add 0.3 s to each start.
"""
import contextlib
import fcntl

import sqlalchemy as sa

from placement.db import api as db_api

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
