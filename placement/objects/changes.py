"""Count every committed change to what allocation candidates read.

Each API process keeps the providers, inventories, usage, traits and
aggregates in memory (``candidates/world.py``) and must see any write
committed before a request began, through whichever process made it. The
writers say so here: a write transaction that changes a provider's
inventories, allocations, traits, aggregates or place in a tree calls
``touched(ctx, ids)``; just before its COMMIT this module bumps, per slot
of providers (id mod ``models.CHANGE_SLOTS``), the slot's counter in
``placement_change_slots`` and logs ``(slot, new counter, provider id)``
in ``placement_changes``.

Why that is exact: the counter's row lock is held from the bump to the
COMMIT, so on each slot the counters are handed out, and become visible,
in commit order, with no gap. A reader that sees counter ``n`` on a slot
can read every change up to ``n`` from the log; a transaction that took
its counter earlier but commits later cannot exist. (An id from a
sequence or auto-increment, by contrast, is taken before the commit, and a
reader checking "max(id) > last" misses late committers.)

Why it is not a hotspot: writes to different providers rarely share a
slot (one in ``CHANGE_SLOTS``), and writes to one provider already
contend on its generation. Slots are bumped at the very end of the
transaction, in slot order, so the lock is held for one round trip and
two writers never wait on each other in a cycle. On Galera the rare
certification conflict is a deadlock error, retried like any other.

The log is pruned by the writers themselves: every ``PRUNE_EVERY``-th
change of a slot deletes the slot's rows older than ``KEEP`` changes. A
reader further behind than that reloads everything.

A database without these tables (one upstream's placement-manage made and
ours has not upgraded) is not counted; the readers then read SQL too.
"""
import threading
import weakref

import sqlalchemy as sa
from sqlalchemy import orm

from placement.db import api as db_api
from placement.db import models

_SLOT = models.CHANGE_SLOT
_CHANGE = models.CHANGE
SLOTS = models.CHANGE_SLOTS
# The epoch's row in placement_change_slots.
EPOCH_SLOT = -1
# Log rows kept per slot, and how often a slot's writer prunes.
KEEP = 1000
PRUNE_EVERY = 100

_KEY = 'placement.candidates.touched'


def touched(ctx, rp_ids):
    """Count a change to the providers ``rp_ids`` when ``ctx``'s writer
    transaction commits (nothing if it rolls back)."""
    info = ctx.session.info
    ids = info.get(_KEY)
    if ids is None:
        ids = info[_KEY] = set()
    ids.update(rp_ids)


def slot_of(rp_id):
    return rp_id % SLOTS


# engine -> whether its database has the change tables; asked once per
# engine (an upgrade of the schema needs the services restarted).
_COUNTED = weakref.WeakKeyDictionary()
_COUNTED_LOCK = threading.Lock()


def counted(conn):
    """Whether the database of ``conn`` (a Connection) counts changes
    (has our tables); asked on ``conn`` itself (on SQLite another
    connection would wait for this one's write lock)."""
    engine = conn.engine
    try:
        return _COUNTED[engine]
    except KeyError:
        pass
    with _COUNTED_LOCK:
        if engine not in _COUNTED:
            inspector = sa.inspect(conn)
            _COUNTED[engine] = (inspector.has_table(_SLOT.name) and
                                inspector.has_table(_CHANGE.name))
        return _COUNTED[engine]


def _bump(conn, slot):
    """The slot's counter, bumped in this transaction (row locked)."""
    update = _SLOT.update().where(_SLOT.c.slot == slot).values(
        seq=_SLOT.c.seq + 1)
    if conn.dialect.update_returning:
        seq = conn.execute(update.returning(_SLOT.c.seq)).scalar()
    else:
        conn.execute(update)
        seq = conn.execute(sa.select(_SLOT.c.seq).where(
            _SLOT.c.slot == slot)).scalar()
    if seq is None:
        # A slot this database was not created with (SLOTS grew).
        conn.execute(_SLOT.insert().values(slot=slot, seq=1))
        seq = 1
    return seq


# PostgreSQL: bump and log in one round trip (a data-modifying CTE); no
# row back means the slot's row is missing (the general path makes it).
_PG_BUMP_AND_LOG = sa.text(
    'WITH bump AS ('
    ' UPDATE placement_change_slots SET seq = seq + 1, updated_at = :now'
    ' WHERE slot = :slot RETURNING seq) '
    'INSERT INTO placement_changes'
    ' (slot, seq, resource_provider_id, created_at) '
    'SELECT :slot, bump.seq, ids.id, :now'
    ' FROM bump, unnest(CAST(:ids AS INTEGER[])) AS ids(id) '
    'RETURNING seq')

# MySQL/MariaDB have no UPDATE ... RETURNING; LAST_INSERT_ID(expr) hands
# the new counter back in the UPDATE's own reply (the cursor's
# lastrowid), instead of a SELECT after it.
_MYSQL_BUMP = _SLOT.update().where(
    _SLOT.c.slot == sa.bindparam('b_slot')).values(
    seq=sa.func.last_insert_id(_SLOT.c.seq + 1))


def _bump_and_log(conn, slot, rp_ids):
    """Bump the slot's counter and log ``rp_ids`` (sorted) under it; the
    new counter."""
    name = conn.dialect.name
    if name == 'postgresql':
        seq = conn.execute(_PG_BUMP_AND_LOG, {
            'slot': slot, 'ids': rp_ids, 'now': models._now()}).scalar()
        if seq is not None:
            return seq
        seq = _bump(conn, slot)
    elif name == 'mysql':
        result = conn.execute(_MYSQL_BUMP, {'b_slot': slot})
        seq = result.lastrowid if result.rowcount == 1 else None
        if not seq:
            seq = _bump(conn, slot)
    else:
        seq = _bump(conn, slot)
    conn.execute(_CHANGE.insert(), [
        {'slot': slot, 'seq': seq, 'resource_provider_id': rp_id}
        for rp_id in rp_ids])
    return seq


def record(conn, rp_ids):
    """Bump the slots of ``rp_ids`` and log them, on ``conn`` inside its
    transaction: one round trip per slot on PostgreSQL and MySQL (two
    elsewhere), slots in order."""
    if not counted(conn):
        return
    by_slot = {}
    for rp_id in rp_ids:
        by_slot.setdefault(slot_of(rp_id), []).append(rp_id)
    for slot in sorted(by_slot):
        seq = _bump_and_log(conn, slot, sorted(by_slot[slot]))
        if seq % PRUNE_EVERY == 0:
            conn.execute(_CHANGE.delete().where(
                _CHANGE.c.slot == slot, _CHANGE.c.seq <= seq - KEEP))


def new_epoch(conn):
    """Say "everything may have changed": every reader reloads. For
    writes made behind the API's back (bulk loads, repairs)."""
    if counted(conn):
        conn.execute(_SLOT.update().where(_SLOT.c.slot == EPOCH_SLOT)
                     .values(seq=models.change_slot_rows()[0]['seq']))


@db_api.writer
def reload_everywhere(ctx):
    """``placement-manage reload``: a new epoch, so that every API process
    reloads the whole world on its next request. Returns False when the
    database does not count its changes (nothing keeps a copy then)."""
    conn = ctx.session.connection()
    if not counted(conn):
        return False
    new_epoch(conn)
    return True


@sa.event.listens_for(orm.Session, 'before_commit')
def _before_commit(session):
    ids = session.info.pop(_KEY, None)
    if ids:
        record(session.connection(), ids)


@sa.event.listens_for(orm.Session, 'after_rollback')
def _after_rollback(session):
    session.info.pop(_KEY, None)
