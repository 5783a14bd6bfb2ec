"""Schema migrations with Alembic, on two tracks.

Upstream's track (``migrations/``) is recorded in ``alembic_version``, the
table upstream's ``placement-manage db sync`` reads: it holds upstream's
revisions only, so upstream's nodes keep syncing and booting over a
database ours migrated. Our additions (``extra_migrations/``, see its
docstring for adding one) are recorded in ``placement_extra_version`` and
applied after upstream's. ``upgrade('head')`` is what ``db sync`` and
``sync_on_startup`` do: both tracks to their heads.
"""
import contextlib
import fcntl
import logging
import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script
import sqlalchemy as sa

from placement.db import api as db_api

LOG = logging.getLogger(__name__)

_HERE = os.path.dirname(__file__)

UPSTREAM = 'upstream'
EXTRA = 'extra'
EXTRA_VERSION_TABLE = 'placement_extra_version'
_SCRIPTS = {UPSTREAM: 'migrations', EXTRA: 'extra_migrations'}
_VERSION_TABLES = {UPSTREAM: 'alembic_version', EXTRA: EXTRA_VERSION_TABLE}

# Releases of ours before the extra track recorded its first revision in
# alembic_version, after upstream's head of the time: our revision -> the
# upstream revision it stood on.
_STACKED_ON_UPSTREAM = {'c3a1f0e2d4b7': 'a082b8bb98d0'}


def _alembic_config(engine=None, track=UPSTREAM):
    location = os.path.join(_HERE, _SCRIPTS[track])
    cfg = alembic_config.Config(os.path.join(location, 'alembic.ini'))
    cfg.set_main_option('script_location', location)
    cfg.attributes['engine'] = engine or db_api.get_engine()
    return cfg


def _scripts(track):
    return alembic_script.ScriptDirectory(
        os.path.join(_HERE, _SCRIPTS[track]))


def head(track=UPSTREAM):
    """The newest revision of ``track``."""
    return _scripts(track).get_current_head()


def _track_of(revision):
    extra = {script.revision for script in _scripts(EXTRA).walk_revisions()}
    return EXTRA if revision in extra else UPSTREAM


def upgrade(version='head', engine=None):
    """``'head'``: upstream's track to its head, then ours to its head.
    Another revision moves the track that has it; one of ours comes after
    upstream's head. A database an earlier release of ours stamped is
    converted first (``_unstack``)."""
    engine = engine or db_api.get_engine()
    _unstack(engine)
    track = EXTRA if version == 'head' else _track_of(version)
    alembic_command.upgrade(_alembic_config(engine),
                            'head' if track == EXTRA else version)
    if track == EXTRA:
        alembic_command.upgrade(_alembic_config(engine, EXTRA), version)


def _unstack(engine):
    """Give upstream's alembic_version back the upstream revision an
    earlier release of ours replaced with its own, and record ours on our
    track. Nothing is recreated: the tables are there. Ours is stamped
    first, so that a stop in between leaves a database this converts
    again."""
    stacked = version(engine)
    base = _STACKED_ON_UPSTREAM.get(stacked)
    if base is None:
        _adopt_change_tables(engine)
        return
    LOG.info('Moving revision %s from alembic_version to %s; upstream\'s '
             'revision is %s again', stacked, EXTRA_VERSION_TABLE, base)
    if version(engine, EXTRA) is None:
        alembic_command.stamp(_alembic_config(engine, EXTRA), stacked)
    alembic_command.stamp(_alembic_config(engine), base, purge=True)


def _adopt_change_tables(engine):
    """A database whose change tables exist but are recorded on no track
    (an operator worked around the stacked revision with ``db stamp
    a082b8bb98d0``): record our first revision, which made them, rather
    than fail creating them again."""
    if version(engine, EXTRA) is not None:
        return
    with engine.connect() as conn:
        have = sa.inspect(conn).has_table('placement_change_slots')
    if have:
        first = 'c3a1f0e2d4b7'
        LOG.info('Change tables found with no revision of ours recorded: '
                 'stamping %s on %s', first, EXTRA_VERSION_TABLE)
        alembic_command.stamp(_alembic_config(engine, EXTRA), first)


def stamp(version, engine=None):
    """Record ``version`` on upstream's track, as upstream's db stamp."""
    alembic_command.stamp(_alembic_config(engine), version)


def version(engine=None, track=UPSTREAM):
    """The revision ``track`` is at (None before its first)."""
    engine = engine or db_api.get_engine()
    with engine.connect() as conn:
        return alembic_migration.MigrationContext.configure(
            conn, opts={'version_table': _VERSION_TABLES[track]}
        ).get_current_revision()


def drop_extra(engine=None):
    """Our track back to nothing (each revision's downgrade) and its
    version table dropped: upstream's schema alone, as upstream's
    placement-manage leaves it."""
    engine = engine or db_api.get_engine()
    _unstack(engine)
    alembic_command.downgrade(_alembic_config(engine, EXTRA), 'base')
    with engine.begin() as conn:
        conn.execute(sa.text('DROP TABLE IF EXISTS %s'
                             % EXTRA_VERSION_TABLE))


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
