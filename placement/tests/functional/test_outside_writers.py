"""Writers outside the service, at stricter isolation levels than ours.

The change triggers update a counter row per slot of providers
(placement/db/change_triggers.py). A tool or script writing at
REPEATABLE READ or SERIALIZABLE meets that row: on PostgreSQL, when
another write to a provider of the same slot committed after its
snapshot, its COMMIT fails with a serialization failure (SQLSTATE 40001),
which such a writer must retry, as PostgreSQL asks of any transaction at
those levels; the retry commits and is counted. Writes to other slots
commit. MySQL and MariaDB update the counter with a locking read, and
commit at any level. (doc/source/backups-and-failovers.rst says so to
operators.)
"""
import pytest
import sqlalchemy as sa

from placement.db import change_triggers
from placement.objects import changes
from placement.tests import db as test_db

DIALECT = test_db.backend()
pytestmark = pytest.mark.skipif(
    DIALECT == 'sqlite', reason='SQLite has one writer at a time')

A, SAME_SLOT, OTHER_SLOT = 1, 1 + change_triggers.SLOTS, 2


@pytest.fixture(scope='module')
def engine():
    db = test_db.TestDatabase()
    with db.engine.begin() as conn:
        for rp in (A, SAME_SLOT, OTHER_SLOT):
            conn.execute(sa.text(
                "INSERT INTO resource_providers (id, uuid, name, generation, "
                "root_provider_id) VALUES (:id, :u, :u, 0, :id)"),
                {'id': rp, 'u': 'rp-%d' % rp})
            conn.execute(sa.text(
                'INSERT INTO inventories (resource_provider_id, '
                'resource_class_id, total, reserved, min_unit, max_unit, '
                'step_size, allocation_ratio) VALUES (:id, 0, 8, 0, 1, 8, '
                '1, 1.0)'), {'id': rp})
    yield db.engine
    db.drop()


def _set_total(conn, rp, total):
    conn.execute(sa.text('UPDATE inventories SET total = :t '
                         'WHERE resource_provider_id = :rp'),
                 {'t': total, 'rp': rp})


def _strict_writer(engine, level, rp, meanwhile):
    """A transaction at ``level`` that reads (its snapshot), lets
    ``meanwhile`` commit on another connection, then changes ``rp``'s
    inventory and commits."""
    with engine.connect().execution_options(isolation_level=level) as conn:
        with conn.begin():
            conn.execute(sa.text('SELECT count(*) FROM inventories'))
            with engine.begin() as other:
                _set_total(other, meanwhile, 7)
            _set_total(conn, rp, 6)


def _counted_since(engine, seen):
    with engine.connect() as conn:
        return changes.logged(conn, seen, changes.counters(conn)[1])


def _counters(engine):
    with engine.connect() as conn:
        return changes.counters(conn)[1]


@pytest.mark.parametrize('level', ['REPEATABLE READ', 'SERIALIZABLE'])
def test_strict_writer_commits_beside_a_write_to_another_slot(engine, level):
    seen = _counters(engine)
    _strict_writer(engine, level, A, meanwhile=OTHER_SLOT)
    assert _counted_since(engine, seen) == {A, OTHER_SLOT}


@pytest.mark.parametrize('level', ['REPEATABLE READ', 'SERIALIZABLE'])
def test_strict_writer_beside_a_write_to_its_slot(engine, level):
    seen = _counters(engine)
    if DIALECT == 'postgresql':
        with pytest.raises(sa.exc.OperationalError) as failed:
            _strict_writer(engine, level, A, meanwhile=SAME_SLOT)
        assert failed.value.orig.pgcode == '40001'
        # Nothing of it was written; the other write was counted.
        assert _counted_since(engine, seen) == {SAME_SLOT}
        # Asked again, it commits, and is counted.
        with engine.connect().execution_options(
                isolation_level=level) as conn:
            with conn.begin():
                _set_total(conn, A, 6)
        assert _counted_since(engine, seen) == {A, SAME_SLOT}
    else:
        _strict_writer(engine, level, A, meanwhile=SAME_SLOT)
        assert _counted_since(engine, seen) == {A, SAME_SLOT}
