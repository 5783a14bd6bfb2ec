"""Schema migrations with Alembic, on two tracks.

Upstream's track (``migrations/``) is recorded in ``alembic_version``, the
table upstream's ``placement-manage db sync`` reads: it holds upstream's
revisions only, so upstream's nodes keep syncing and booting over a
database ours migrated. Our additions (``extra_migrations/``, see its
docstring for adding one) are recorded in ``placement_extra_version`` and
applied after upstream's. ``upgrade('head')`` is what ``db sync`` and
``sync_on_startup`` do: both tracks to their heads.
"""
import logging
import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import change_triggers
from placement.db import trigger_preflight

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
    converted first (``_unstack``). When ours is to move, nothing is
    done unless the database can take its triggers (``trigger_preflight``
    raises NotReady): a refusal met half-way left both tracks between
    revisions. At the head, change triggers since dropped or disabled
    are installed again (no revision would): returns which were, or
    None."""
    engine = engine or db_api.get_engine()
    track = EXTRA if version == 'head' else _track_of(version)
    if track == EXTRA and _extra_behind(engine):
        trigger_preflight.check(engine)
    _unstack(engine)
    alembic_command.upgrade(_alembic_config(engine),
                            'head' if track == EXTRA else version)
    if track == EXTRA:
        alembic_command.upgrade(_alembic_config(engine, EXTRA), version)
    if version != 'head':
        return None
    mended = change_triggers.mend(engine)
    if mended:
        LOG.warning('Change triggers were not firing on %s: installed '
                    'again.', mended)
    return mended


def _extra_behind(engine):
    """Whether our track is short of its head (None before its first
    revision, or while an earlier release's stamp sits in
    alembic_version)."""
    return version(engine, EXTRA) != head(EXTRA)


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
