"""Every change trigger is needed: drop any one and a world goes stale.

The in-memory worlds of GET /allocation_candidates follow the database
through the triggers of ``placement/db/change_triggers.py`` (issue 28).
The model-based check (test_world_freshness.py) shows that the worlds
agree with the SQL engine with every trigger in place; this module shows,
cheaply enough for every run of the suite, that none of them is dead
weight -- and so that the model check, and the triggers, would notice
one gone. For each trigger ``install`` makes on the database under test
(``change_triggers.made``: on PostgreSQL also each one's ``_log`` partner
and the TRUNCATE ones), over a small world (two trees with a child to
re-parent and one with no inventory, usage, traits, aggregates, a custom
class):

* with every trigger in place, one focused write by SQL -- the table and
  event that trigger watches, and no other -- changes the answer to a
  focused query, and a world loaded before it answers exactly as the SQL
  engine after it;
* with that trigger dropped, a world loaded before the same write answers
  otherwise than the SQL engine after it (for the tables naming providers,
  exactly as before the write).

One database for the module, its world written afresh for each step: a
few seconds per database in all.

A process finding a trigger missing answers with SQL (``changes.counted``,
which must report each dropped trigger missing -- checked too); here it
is made to trust the triggers it lacks, and every world answer is checked
to have come from the world engine, every reference answer from the SQL
engine.

A trait deleted and made again under its id with another name (what its
delete trigger is for) keeps its providers' links only if SQL by hand
lets the links' foreign key be: one statement on PostgreSQL (the key is
checked at its end), ``foreign_key_checks = 0`` on MySQL; SQLite does not
enforce it.

Not every trigger is alone in seeing its write: ``CAPTURED_BY_OTHERS``
names those whose write another trigger also counts (PostgreSQL's TRUNCATE
of resource_providers must CASCADE to resource_provider_traits, whose own
TRUNCATE trigger starts a new epoch). For them, the test shows that the
world stays right without the trigger alone, and goes stale without the
trigger and those others.

Last, triggers that stop firing (disabled on PostgreSQL, or dropped) and
come back: the database answers meanwhile, and a write made meanwhile,
never logged, is seen once they are back (a new epoch).
"""
import contextlib
import time
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from placement.db import change_triggers
from placement.db import models
from placement.objects.candidates import engine as engine_mod
from placement.objects.candidates import search
from placement.objects.candidates import sql as sql_engine
from placement.objects.candidates import world as world_mod
from placement.objects import changes
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidate_gather as twr
from placement.tests import db as test_db

VERSION = '1.39'
AGG1 = str(uuidlib.UUID(int=1))
AGG2 = str(uuidlib.UUID(int=2))
# Provider ids, as the WorldBuilder hands them out (in _world's order).
CN1, CN1_DEV, CN1_NIC, CN2, CN2_DISK = 1, 2, 3, 4, 5
NEW = 6
CUSTOM_DEV = 10000          # the WorldBuilder's first custom class id


def _world():
    w = cw.WorldBuilder()
    for name, parent in (('cn1', None), ('cn1_dev', 'cn1'),
                         ('cn1_nic', 'cn1'),    # no inventory: a leaf
                         ('cn2', None),
                         ('cn2_disk', 'cn2')):  # re-parented to cn1
        # The same uuids every time: answers compared across resets.
        w.provider(name, parent, str(uuidlib.UUID(int=100 + len(w.rps))))
    for cn in ('cn1', 'cn2'):
        w.inventory(cn, 'VCPU', 4)
        w.inventory(cn, 'MEMORY_MB', 2048)
    w.inventory('cn1_dev', 'CUSTOM_DEV', 2)
    w.inventory('cn2_disk', 'DISK_GB', 100)
    w.usage('cn1', 'VCPU', 1)
    w.usage('cn2', 'VCPU', 2)
    w.trait('cn1', 'CUSTOM_T1')
    w.trait('cn2_disk', 'CUSTOM_T2')
    return w


# Aggregates keep their ids (processes keep uuid -> id), so they are made
# once and linked by _reset.
_AGGS = {CN1: AGG1, CN2: AGG2}


# -- the focused writes ------------------------------------------------------
# (table, event) -> (SQL statements, the query whose answer they change).
# Each touches only the table named, with that event: only the triggers
# on it (and its _log partner on PostgreSQL) count it.

_RC = '(SELECT id FROM resource_classes WHERE name = \'%s\')'
_TRAIT = '(SELECT id FROM traits WHERE name = \'%s\')'
_AGG = '(SELECT id FROM placement_aggregates WHERE uuid = \'%s\')'


def _trait_deleted_and_made_again(dialect):
    """CUSTOM_T1 deleted and made again under its id with another name,
    links left alone (what the delete trigger is for): the links' foreign
    key must be let be, as SQL by hand may."""
    if dialect == 'postgresql':
        # One statement: the NO ACTION key is checked at its end, when
        # the id exists again.
        return ["WITH gone AS (DELETE FROM traits WHERE name = 'CUSTOM_T1' "
                "RETURNING id) INSERT INTO traits (id, name) "
                "SELECT id, 'CUSTOM_T1C' FROM gone"]
    keep = "SELECT id FROM traits WHERE name = 'CUSTOM_T1'"
    statements = [
        "DELETE FROM traits WHERE name = 'CUSTOM_T1'",
        "INSERT INTO traits (id, name) VALUES (:id, 'CUSTOM_T1C')"]
    if dialect == 'mysql':
        statements = (['SET SESSION foreign_key_checks = 0'] + statements
                      + ['SET SESSION foreign_key_checks = 1'])
    return [('id', keep)] + statements


def writes(dialect):
    return {
        ('resource_providers', 'INSERT'): (
            ["INSERT INTO resource_providers (id, uuid, name, generation, "
             "parent_provider_id, root_provider_id) VALUES "
             "(%d, '%s', 'cn2_new', 0, %d, %d)"
             % (NEW, uuidlib.UUID(int=NEW), CN2, CN2)],
            'resources=VCPU:1'),            # in cn2's tree's summaries
        ('resource_providers', 'UPDATE'): (
            ['UPDATE resource_providers SET parent_provider_id = %d, '
             'root_provider_id = %d WHERE id = %d' % (CN1, CN1, CN2_DISK)],
            'resources=VCPU:1,DISK_GB:10'),
        ('resource_providers', 'DELETE'): (
            ['DELETE FROM resource_providers WHERE id = %d' % CN1_NIC],
            'resources=VCPU:1'),
        ('inventories', 'INSERT'): (
            ['INSERT INTO inventories (resource_provider_id, '
             'resource_class_id, total, reserved, min_unit, max_unit, '
             'step_size, allocation_ratio) VALUES (%d, %s, 50, 0, 1, 50, 1, '
             '1.0)' % (CN1, _RC % 'DISK_GB')],
            'resources=DISK_GB:10'),
        ('inventories', 'UPDATE'): (
            ['UPDATE inventories SET total = 1 WHERE resource_provider_id '
             '= %d AND resource_class_id = %s' % (CN1, _RC % 'VCPU')],
            'resources=VCPU:1'),
        ('inventories', 'DELETE'): (
            ['DELETE FROM inventories WHERE resource_provider_id = %d AND '
             'resource_class_id = %s' % (CN1, _RC % 'MEMORY_MB')],
            'resources=MEMORY_MB:1'),
        ('allocations', 'INSERT'): (
            ["INSERT INTO allocations (resource_provider_id, consumer_id, "
             "resource_class_id, used) VALUES (%d, '%s', %s, 3)"
             % (CN1, uuidlib.UUID(int=7), _RC % 'VCPU')],
            'resources=VCPU:1'),
        # A consumer moved to another provider: both must be seen.
        ('allocations', 'UPDATE'): (
            ['UPDATE allocations SET resource_provider_id = %d WHERE '
             'resource_provider_id = %d' % (CN1, CN2)],
            'resources=VCPU:2'),
        ('allocations', 'DELETE'): (
            ['DELETE FROM allocations WHERE resource_provider_id = %d'
             % CN1],
            'resources=VCPU:4'),
        ('resource_provider_traits', 'INSERT'): (
            ['INSERT INTO resource_provider_traits (resource_provider_id, '
             'trait_id) VALUES (%d, %s)' % (CN2, _TRAIT % 'CUSTOM_T2')],
            'resources=VCPU:1&required=CUSTOM_T2'),
        ('resource_provider_traits', 'UPDATE'): (
            ['UPDATE resource_provider_traits SET resource_provider_id = %d '
             'WHERE resource_provider_id = %d' % (CN2, CN1)],
            'resources=VCPU:1&required=CUSTOM_T1'),
        ('resource_provider_traits', 'DELETE'): (
            ['DELETE FROM resource_provider_traits WHERE '
             'resource_provider_id = %d' % CN1],
            'resources=VCPU:1&required=CUSTOM_T1'),
        ('resource_provider_aggregates', 'INSERT'): (
            ['INSERT INTO resource_provider_aggregates (resource_provider_id,'
             ' aggregate_id) VALUES (%d, %s)' % (CN1, _AGG % AGG2)],
            'resources=VCPU:1&member_of=' + AGG2),
        ('resource_provider_aggregates', 'UPDATE'): (
            ['UPDATE resource_provider_aggregates SET resource_provider_id = '
             '%d WHERE resource_provider_id = %d' % (CN2, CN1)],
            'resources=VCPU:1&member_of=' + AGG1),
        ('resource_provider_aggregates', 'DELETE'): (
            ['DELETE FROM resource_provider_aggregates WHERE '
             'resource_provider_id = %d' % CN1],
            'resources=VCPU:1&member_of=' + AGG1),
        ('resource_classes', 'UPDATE'): (
            ["UPDATE resource_classes SET name = 'CUSTOM_RENAMED' "
             "WHERE id = %d" % CUSTOM_DEV],
            'resources=CUSTOM_RENAMED:1'),
        # Deleted and made again under its id (by hand) with another name.
        ('resource_classes', 'DELETE'): (
            ['DELETE FROM resource_classes WHERE id = %d' % CUSTOM_DEV,
             "INSERT INTO resource_classes (id, name) VALUES "
             "(%d, 'CUSTOM_REBORN')" % CUSTOM_DEV],
            'resources=CUSTOM_REBORN:1'),
        # Summaries show the providers' trait names.
        ('traits', 'UPDATE'): (
            ["UPDATE traits SET name = 'CUSTOM_T1B' "
             "WHERE name = 'CUSTOM_T1'"],
            'resources=VCPU:1&required=CUSTOM_T1B'),
        ('traits', 'DELETE'): (
            _trait_deleted_and_made_again(dialect),
            'resources=VCPU:1&required=CUSTOM_T1C'),
        # PostgreSQL's TRUNCATE triggers.
        ('inventories', 'TRUNCATE'): (
            ['TRUNCATE inventories'], 'resources=VCPU:1'),
        ('allocations', 'TRUNCATE'): (
            ['TRUNCATE allocations'], 'resources=VCPU:4'),
        ('resource_provider_traits', 'TRUNCATE'): (
            ['TRUNCATE resource_provider_traits'],
            'resources=VCPU:1&required=CUSTOM_T1'),
        ('resource_provider_aggregates', 'TRUNCATE'): (
            ['TRUNCATE resource_provider_aggregates'],
            'resources=VCPU:1&member_of=' + AGG1),
        # resource_provider_traits refers to it: CASCADE truncates both.
        ('resource_providers', 'TRUNCATE'): (
            ['TRUNCATE resource_providers CASCADE'], 'resources=VCPU:1'),
    }


# Triggers whose focused write other triggers count too: {name: others}.
CAPTURED_BY_OTHERS = {
    'placement_chg_resource_providers_truncate': [
        'placement_chg_resource_provider_traits_truncate'],
}

DIALECT = test_db.backend()
TRIGGERS = change_triggers.made(DIALECT)


# -- the database, the world, the answers -----------------------------------

@pytest.fixture(scope='module')
def db():
    """One database and app for the module (a database each would cost
    seconds on the servers); every test writes its world afresh."""
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as both:
        yield both


def _reset(engine):
    """The world of ``_world`` and nothing else, every trigger counting
    it; then a new World, loaded at its first request as a process's."""
    with engine.begin() as conn:
        for table in ('allocations', 'inventories',
                      'resource_provider_traits',
                      'resource_provider_aggregates'):
            conn.exec_driver_sql('DELETE FROM %s' % table)
        conn.exec_driver_sql('UPDATE resource_providers SET '
                             'parent_provider_id = NULL, '
                             'root_provider_id = NULL')
        conn.exec_driver_sql('DELETE FROM resource_providers')
        conn.execute(sa.text("DELETE FROM traits WHERE name LIKE 'CUSTOM%'"))
        conn.exec_driver_sql('DELETE FROM resource_classes WHERE id >= %d'
                             % CUSTOM_DEV)
    _world().write(engine)
    with engine.begin() as conn:
        have = {u for u, in conn.execute(sa.select(models.AGG.c.uuid))}
        for agg in sorted(set(_AGGS.values()) - have):
            conn.execute(models.AGG.insert().values(uuid=agg))
        for rp, agg in _AGGS.items():
            conn.execute(sa.text(
                'INSERT INTO resource_provider_aggregates '
                '(resource_provider_id, aggregate_id) VALUES (%d, %s)'
                % (rp, _AGG % agg)))
    world_mod._WORLDS.clear()


class Answers:
    """Asks the app with the world engine or the SQL engine, and counts
    which engine answered."""

    def __init__(self, app, monkeypatch):
        self.app = app
        self.monkeypatch = monkeypatch
        self.by = {'world': 0, 'sql': 0}
        real_world = search.find_in_world
        real_sql = sql_engine.find_in_database

        def world_find(*args, **kwargs):
            self.by['world'] += 1
            return real_world(*args, **kwargs)

        def sql_find(*args, **kwargs):
            self.by['sql'] += 1
            return real_sql(*args, **kwargs)

        monkeypatch.setattr(search, 'find_in_world', world_find)
        monkeypatch.setattr(sql_engine, 'find_in_database', sql_find)

    def _get(self, query):
        return twr.get(self.app, '/allocation_candidates?' + query, VERSION)

    def world(self, query):
        before = dict(self.by)
        answer = self._get(query)
        assert self.by == dict(before, world=before['world'] + 1), (
            'not answered by the world engine', query, answer)
        return answer

    def sql(self, query):
        before = dict(self.by)
        with self.monkeypatch.context() as m:
            m.setattr(engine_mod, 'USE_WORLD', False)
            answer = self._get(query)
        assert self.by == dict(before, sql=before['sql'] + 1), (
            'not answered by the SQL engine', query, answer)
        return answer


def _write(engine, statements):
    with engine.begin() as conn:
        params = {}
        for statement in statements:
            if isinstance(statement, tuple):
                name, query = statement
                params[name] = conn.exec_driver_sql(query).scalar()
            else:
                conn.execute(sa.text(statement), params)


def _before_and_after(engine, answers, statements, query):
    """(world's answer before ``statements``, world's after, SQL's after),
    from a world loaded before them."""
    _reset(engine)
    before = answers.world(query)
    _write(engine, statements)
    return before, answers.world(query), answers.sql(query)


class Trusting:
    """Our processes take the database as counting its changes though
    the triggers in ``dropped`` are missing: they would otherwise notice
    (``changes.counted``) and answer with SQL, which is never stale."""

    def __init__(self, monkeypatch):
        self.dropped = set()
        self.real_missing = change_triggers.missing
        monkeypatch.setattr(change_triggers, 'missing', lambda conn: [
            n for n in self.real_missing(conn) if n not in self.dropped])

    @contextlib.contextmanager
    def without(self, engine, names):
        """The triggers ``names`` dropped while the block runs; every
        process asks again at its next request whether its database
        counts changes, and must be told so."""
        with engine.begin() as conn:
            for name in names:
                change_triggers.drop_one(conn, name)
            missing = self.real_missing(conn)
        self.dropped.update(names)
        changes.forget_counted()
        try:
            # A process not told otherwise answers with SQL then.
            assert set(names) <= set(missing), missing
            yield
        finally:
            with engine.begin() as conn:
                for name in names:
                    change_triggers.install_one(conn, name)
            self.dropped.clear()
            changes.forget_counted()


@pytest.mark.parametrize('name,table,event', TRIGGERS,
                         ids=[t[0] for t in TRIGGERS])
def test_each_trigger_is_needed(name, table, event, db, monkeypatch):
    app, engine = db
    statements, query = writes(DIALECT)[(table, event)]
    answers = Answers(app, monkeypatch)
    trusting = Trusting(monkeypatch)

    # Every trigger in place: the write changes the answer, and the
    # world follows it.
    before, world, sql = _before_and_after(engine, answers, statements,
                                           query)
    assert sql != before, 'the write does not change the answer'
    assert world == sql

    others = CAPTURED_BY_OTHERS.get(name, [])
    for dropped in [[name]] + ([[name] + others] if others else []):
        with trusting.without(engine, dropped):
            stale_before, world, sql = _before_and_after(
                engine, answers, statements, query)
        assert stale_before == before
        if dropped == [name] and others:
            assert world == sql, ('%s is no longer counted by %s too'
                                  % (name, others))
        else:
            assert world != sql, 'without %s the world is still right' % (
                ', '.join(dropped))
            if table in change_triggers.WATCHED:
                # (Names are looked up per request: after a rename the
                # stale world answers neither as before nor as after.)
                assert world == before, 'the world saw part of the write'


def test_every_trigger_on_the_database_is_checked(db):
    """What the parametrization covers is what the database has: a
    trigger added to change_triggers (or made by hand) is checked here
    or fails here."""
    _app, engine = db
    from placement.tests.functional import freshness
    on_db = {(n, t) for n, t, _ in freshness.triggers(engine)}
    assert on_db == {(n, t) for n, t, _ in TRIGGERS}
    assert {(t, e) for _, t, e in TRIGGERS} <= set(writes(DIALECT))


# -- triggers that stop firing, and come back -------------------------------

_INVENTORIES = [n for n, table, _ in TRIGGERS if table == 'inventories']


def _stop(conn, how):
    """The inventories' triggers made to count nothing: disabled (as
    bulk tools and some replication set-ups do; PostgreSQL only) or
    dropped."""
    if how == 'disabled':
        conn.exec_driver_sql('ALTER TABLE inventories DISABLE TRIGGER USER')
    elif how == 'without procedure':
        # A dump made without --routines, restored into a new database.
        conn.exec_driver_sql('DROP PROCEDURE placement_log_change')
    else:
        for name in _INVENTORIES:
            change_triggers.drop_one(conn, name)


def _start(conn, how):
    if how == 'disabled':
        conn.exec_driver_sql('ALTER TABLE inventories ENABLE TRIGGER USER')
    elif how == 'without procedure':
        change_triggers.reinstall(conn)
    else:
        for name in _INVENTORIES:
            change_triggers.install_one(conn, name)


def _renewed(engine):
    """Wait for the new epoch a process starts when it sees its
    triggers back (changes._new_epoch_apart)."""
    for _ in range(500):
        if engine not in changes._RENEWING:
            return
        time.sleep(0.01)
    raise AssertionError('no new epoch')


@pytest.mark.parametrize('how', [
    pytest.param('disabled', marks=pytest.mark.skipif(
        DIALECT != 'postgresql', reason='only PostgreSQL disables one')),
    'dropped'])
def test_writes_while_not_firing_are_seen_after(how, db, monkeypatch):
    """A world loaded, the inventories' triggers stopped, a total changed
    by SQL, the triggers back: the counters did not move, yet the world
    must not answer as before the write."""
    app, engine = db
    answers = Answers(app, monkeypatch)
    monkeypatch.setattr(changes, 'RECHECK_SECONDS', 0)
    statements, query = writes(DIALECT)[('inventories', 'UPDATE')]
    _reset(engine)
    changes.forget_counted()
    before = answers.world(query)
    try:
        with engine.begin() as conn:
            _stop(conn, how)
        # Seen at the next request: the database answers.
        assert answers.sql(query) == before
        assert answers._get(query) == before
        assert answers.by['world'] == 1
        _write(engine, statements)
    finally:
        with engine.begin() as conn:
            _start(conn, how)
    after = answers.sql(query)
    assert after != before
    # The triggers seen back: the database answers until a new epoch...
    assert answers._get(query) == after
    _renewed(engine)
    # ...which the world loads.
    assert answers.world(query) == after


@pytest.mark.parametrize('how', [
    pytest.param('disabled', marks=pytest.mark.skipif(
        DIALECT != 'postgresql', reason='only PostgreSQL disables one')),
    pytest.param('without procedure', marks=pytest.mark.skipif(
        DIALECT != 'mysql', reason='only MySQL triggers call one')),
    'dropped'])
def test_not_firing_says_where_and_why(how, db):
    _app, engine = db
    try:
        with engine.begin() as conn:
            _stop(conn, how)
        with engine.connect() as conn:
            stopped = change_triggers.not_firing(conn)
            why = changes.not_counted_why(conn)
    finally:
        with engine.begin() as conn:
            _start(conn, how)
    word = how.replace('dropped', 'missing')
    if how == 'without procedure':
        # Every trigger calling it, on every table but the renames'.
        assert stopped == {table: {n: word for n, t, _ in TRIGGERS
                                   if t == table}
                           for table in change_triggers.WATCHED}
        assert why.startswith('triggers not firing on allocations (3 %s)'
                              % word)
    else:
        assert stopped == {'inventories': dict.fromkeys(_INVENTORIES, word)}
        assert why == 'triggers not firing on inventories (%d %s)' % (
            len(_INVENTORIES), word)
    with engine.connect() as conn:
        assert change_triggers.not_firing(conn) == {}
        assert changes.not_counted_why(conn) is None
