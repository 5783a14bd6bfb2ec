"""The migrations build exactly the schema ``placement.db.models``
describes, on the backend under test (``PLACEMENT_TEST_DB_URL``, else
SQLite), keep upstream's revision chain and its upgrade blockers, and
record ours on a track of their own (``placement_extra_version``)."""
import os
import subprocess
import sys
import uuid

from alembic import autogenerate
from alembic import migration as alembic_migration
from alembic import script as alembic_script
import pytest
import sqlalchemy as sa

from placement.db import migration
from placement.db import models
from placement.objects import changes
from placement.tests import db as test_db

# Upstream's revisions, oldest first: a database upstream's
# "placement-manage db sync" made must be at one of these.
UPSTREAM_CHAIN = ['b4ed3a175331', '611cd6dffd7b', 'b5c396305c25',
                  '422ece571366', 'a082b8bb98d0']
# Ours, on their own track, applied after upstream's head: the
# candidates' change counters first.
EXTRA_CHAIN = ['c3a1f0e2d4b7', 'd7e2b9c41f05', 'e4b8d2a6c913',
               'f2c6a8e1d9b4']
VERSION_TABLES = {'alembic_version', migration.EXTRA_VERSION_TABLE}


@pytest.fixture
def empty_db():
    # Never created, rather than created and dropped: drop_all leaves
    # what is not a table (MySQL's trigger procedure) behind.
    db = test_db.TestDatabase(schema=False)
    yield db
    db.drop()


def _not_a_version_table(name, type_, parent_names):
    return not (type_ == 'table' and name in VERSION_TABLES)


def _diff(engine):
    with engine.connect() as conn:
        ctx = alembic_migration.MigrationContext.configure(
            conn, opts={'compare_type': True,
                        'include_name': _not_a_version_table})
        return autogenerate.compare_metadata(ctx, models.BASE.metadata)


def _at_heads(engine):
    """Upstream's track at upstream's head, ours at its own."""
    return (migration.version(engine=engine) == UPSTREAM_CHAIN[-1] and
            migration.version(engine, migration.EXTRA) == EXTRA_CHAIN[-1])


def _chain(track):
    scripts = alembic_script.ScriptDirectory(
        migration._alembic_config(engine=object(), track=track)
        .get_main_option('script_location'))
    assert len(scripts.get_heads()) == 1
    return [rev.revision for rev in reversed(list(scripts.walk_revisions()))]


def test_revision_chain_is_upstreams_and_ours_is_apart():
    assert _chain(migration.UPSTREAM) == UPSTREAM_CHAIN
    assert _chain(migration.EXTRA) == EXTRA_CHAIN
    assert migration.head(migration.UPSTREAM) == UPSTREAM_CHAIN[-1]
    assert migration.head(migration.EXTRA) == EXTRA_CHAIN[-1]


def test_upgrade_head_on_empty_database_matches_the_models(empty_db):
    migration.upgrade('head', engine=empty_db.engine)
    assert _at_heads(empty_db.engine)
    assert _diff(empty_db.engine) == []
    with empty_db.engine.connect() as conn:
        slots = dict(conn.execute(sa.select(
            models.CHANGE_SLOT.c.slot, models.CHANGE_SLOT.c.seq)).all())
    # Every counter at 0, and an epoch of this database's own.
    assert sorted(slots) == list(range(-1, models.CHANGE_SLOTS))
    assert slots.pop(-1) > 0 and set(slots.values()) == {0}


def test_upgraded_schema_has_every_model_column_and_index(empty_db):
    """The same check spelled out, so a failure names what is missing."""
    migration.upgrade('head', engine=empty_db.engine)
    inspector = sa.inspect(empty_db.engine)
    assert set(inspector.get_table_names()) == (
        set(models.BASE.metadata.tables) | VERSION_TABLES)
    for name, table in models.BASE.metadata.tables.items():
        columns = {c['name']: c for c in inspector.get_columns(name)}
        assert set(columns) == set(table.columns.keys()), name
        for column in table.columns:
            if not column.primary_key:
                assert columns[column.name]['nullable'] == column.nullable, (
                    name, column.name)
        pk = inspector.get_pk_constraint(name)['constrained_columns']
        assert set(pk) == {c.name for c in table.primary_key.columns}, name
        uniques = {tuple(u['column_names'])
                   for u in inspector.get_unique_constraints(name)}
        indexes = {i['name']: tuple(i['column_names'])
                   for i in inspector.get_indexes(name)}
        # MySQL reports unique constraints as unique indexes too.
        uniques |= {tuple(i['column_names'])
                    for i in inspector.get_indexes(name) if i['unique']}
        for constraint in table.constraints:
            if isinstance(constraint, sa.UniqueConstraint):
                assert tuple(c.name for c in constraint.columns) in uniques, (
                    name, constraint.name)
        for index in table.indexes:
            assert indexes.get(index.name) == tuple(
                c.name for c in index.columns), (name, index.name)


def test_upgrade_one_revision_at_a_time(empty_db):
    """Each revision is found on its track; ours leave upstream's table
    alone."""
    for revision in UPSTREAM_CHAIN:
        migration.upgrade(revision, engine=empty_db.engine)
        assert migration.version(engine=empty_db.engine) == revision
        assert migration.version(empty_db.engine, migration.EXTRA) is None
    for revision in EXTRA_CHAIN:
        migration.upgrade(revision, engine=empty_db.engine)
        assert migration.version(empty_db.engine,
                                 migration.EXTRA) == revision
        assert migration.version(engine=empty_db.engine) == (
            UPSTREAM_CHAIN[-1])
    assert _diff(empty_db.engine) == []


def test_one_of_our_revisions_brings_upstreams_track_to_its_head(empty_db):
    migration.upgrade(EXTRA_CHAIN[0], engine=empty_db.engine)
    assert migration.version(engine=empty_db.engine) == UPSTREAM_CHAIN[-1]
    assert migration.version(empty_db.engine,
                             migration.EXTRA) == EXTRA_CHAIN[0]


def test_upgrade_is_a_no_op_at_head(empty_db):
    migration.upgrade('head', engine=empty_db.engine)
    migration.upgrade('head', engine=empty_db.engine)
    assert _at_heads(empty_db.engine)


def test_a_database_before_the_marks_is_answered_from_sql(empty_db):
    """A node of this release started before db sync, over the change
    tables a release before f2c6a8e1d9b4 made: not counted (candidates
    from SQL) rather than a 500 reading counters without marks; counted
    once the revision is in."""
    migration.upgrade('e4b8d2a6c913', engine=empty_db.engine)
    changes.forget_counted()
    with empty_db.engine.connect() as conn:
        assert not changes.counted(conn)
        assert changes.not_counted_why(conn) == (
            'the change tables have no marks yet')
    migration.upgrade('head', engine=empty_db.engine)
    changes.forget_counted()
    with empty_db.engine.connect() as conn:
        assert changes.counted(conn)
        epoch, current = changes.counters(conn)
        assert epoch[1] and all(mark for _, mark in current.values())


def test_stamp_then_version(empty_db):
    migration.stamp(UPSTREAM_CHAIN[2], engine=empty_db.engine)
    assert migration.version(engine=empty_db.engine) == UPSTREAM_CHAIN[2]
    assert migration.version(empty_db.engine, migration.EXTRA) is None


def test_our_revisions_are_not_upstreams_to_stamp(empty_db):
    """db stamp is upstream's track: one of ours is unknown there."""
    with pytest.raises(Exception, match="Can't locate revision"):
        migration.stamp(EXTRA_CHAIN[0], engine=empty_db.engine)


def _stacked(engine):
    """What releases of ours before the separate track left: our first
    revision in alembic_version after upstream's a082b8bb98d0."""
    migration.upgrade('a082b8bb98d0', engine=engine)
    with engine.begin() as conn:
        # Not create_all: that would add later revisions' triggers too.
        test_db.first_change_tables(conn)
        conn.execute(sa.text('UPDATE alembic_version SET version_num = :v'),
                     {'v': EXTRA_CHAIN[0]})


def test_a_conversion_stopped_half_way_is_finished(empty_db):
    """Our track stamped, alembic_version not yet given back: the next
    sync completes it. (The whole conversion, with upstream's db sync
    after it: test_rolling_upgrade.)"""
    _stacked(empty_db.engine)
    migration.alembic_command.stamp(
        migration._alembic_config(empty_db.engine, migration.EXTRA),
        EXTRA_CHAIN[0])
    migration.upgrade('head', engine=empty_db.engine)
    assert _at_heads(empty_db.engine)


def test_change_tables_stamped_away_are_adopted(empty_db):
    """An operator who worked around the stacked revision with ``db stamp
    a082b8bb98d0`` left the change tables recorded nowhere: the next sync
    records them on our track and adds the triggers, instead of failing
    to create the tables again."""
    engine = empty_db.engine
    _stacked(engine)
    with engine.begin() as conn:
        # What "db stamp a082b8bb98d0" did (purging the unknown one).
        conn.execute(sa.text('UPDATE alembic_version SET version_num = :v'),
                     {'v': UPSTREAM_CHAIN[-1]})
    migration.upgrade('head', engine=engine)
    assert _at_heads(engine)
    assert _diff(engine) == []
    from placement.db import change_triggers
    with engine.connect() as conn:
        assert change_triggers.missing(conn) == []


def test_triggers_come_and_go_with_their_revision(empty_db):
    from placement.db import change_triggers
    engine = empty_db.engine
    migration.upgrade(EXTRA_CHAIN[0], engine=engine)
    with engine.connect() as conn:
        assert change_triggers.missing(conn) != []
    migration.upgrade('head', engine=engine)
    with engine.connect() as conn:
        assert change_triggers.missing(conn) == []
    migration.alembic_command.downgrade(
        migration._alembic_config(engine, migration.EXTRA), EXTRA_CHAIN[0])
    with engine.connect() as conn:
        assert change_triggers.missing(conn) != []
        # Upstream's writes work without them.
        conn.execute(sa.text(
            "INSERT INTO resource_providers (uuid, name, generation) "
            "VALUES ('u', 'n', 0)"))
        conn.commit()


def test_drop_extra_leaves_upstreams_schema_alone(empty_db):
    engine = empty_db.engine
    migration.upgrade('head', engine=engine)
    migration.drop_extra(engine=engine)
    assert migration.version(engine=engine) == UPSTREAM_CHAIN[-1]
    assert migration.version(engine, migration.EXTRA) is None
    extra = {models.CHANGE_SLOT.name, models.CHANGE.name,
             migration.EXTRA_VERSION_TABLE}
    assert not extra & set(sa.inspect(engine).get_table_names())
    # Nothing left to drop is fine too; a sync brings it all back.
    migration.drop_extra(engine=engine)
    migration.upgrade('head', engine=engine)
    assert _at_heads(engine)
    assert _diff(engine) == []


def _manage(url, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['OS_PLACEMENT_DATABASE__CONNECTION'] = url
    return subprocess.run(
        [sys.executable, '-m', 'placement.cmd.manage'] + list(args),
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)


def test_old_data_blocks_the_upgrade_until_online_migrations_ran(empty_db):
    """As upstream: an old database with providers lacking a root and
    allocations lacking a consumer refuses to upgrade past the initial
    revision until placement-manage db online_data_migrations ran."""
    engine = empty_db.engine
    migration.upgrade(UPSTREAM_CHAIN[0], engine=engine)
    with engine.begin() as conn:
        rp_id = conn.execute(models.RP.insert().values(
            uuid=str(uuid.uuid4()), name='old-rp', generation=1)
        ).inserted_primary_key[0]
        conn.execute(models.ALLOC.insert().values(
            resource_provider_id=rp_id, consumer_id=str(uuid.uuid4()),
            resource_class_id=0, used=1))
    with pytest.raises(Exception, match='root provider id'):
        migration.upgrade('head', engine=engine)
    assert migration.version(engine=engine) == UPSTREAM_CHAIN[0]

    result = _manage(empty_db.url, 'db', 'online_data_migrations')
    assert result.returncode == 0, result.stdout + result.stderr
    assert '1 rows matched query set_root_provider_ids, 1 migrated' in (
        result.stdout)
    assert '1 rows matched query create_incomplete_consumers, 1 migrated' in (
        result.stdout)

    migration.upgrade('head', engine=engine)
    assert _at_heads(engine)


_BOOT = '''
import sys
from placement.wsgi import api
api.init_application()
print('booted')
'''


def test_workers_starting_together_on_a_fresh_database(empty_db):
    """Several WSGI workers with sync_on_startup booting at once: each
    migrates and syncs standard traits in turn, none fails."""
    import os_traits
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env.update(OS_PLACEMENT_DATABASE__CONNECTION=empty_db.url,
               OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP='true',
               OS_API__AUTH_STRATEGY='noauth2',
               OS_DEFAULT__LOG_OPTIONS='false')
    procs = [subprocess.Popen([sys.executable, '-c', _BOOT], env=env,
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        assert out.strip().splitlines()[-1] == 'booted'
    assert _at_heads(empty_db.engine)
    with empty_db.engine.connect() as conn:
        names = [r[0] for r in conn.execute(sa.select(models.TRAIT.c.name))]
    assert sorted(names) == sorted(os_traits.get_traits())
