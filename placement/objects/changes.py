"""Count every committed change to what allocation candidates read.

Each API process keeps the providers, inventories, usage, traits and
aggregates in memory (``candidates/world/``) and must see any write
committed before a request began, whoever made it: this process, another
API node, upstream's API on the same database during a rolling upgrade,
or an operator's SQL. Database triggers (``placement/db/
change_triggers.py``) count every such write, per slot of providers (id
mod ``SLOTS``): they bump the slot's counter in
``placement_change_slots`` and log ``(slot, new counter, provider id)``
in ``placement_changes``. No writer has anything to remember.

Why that is exact: the counter's row lock is held from the bump to the
COMMIT, so on each slot the counters are handed out, and become visible,
in commit order, with no gap. A reader that sees counter ``n`` on a slot
can read every change up to ``n`` from the log; a transaction that took
its counter earlier but commits later cannot exist. (An id from a
sequence or auto-increment, by contrast, is taken before the commit, and a
reader checking "max(id) > last" misses late committers.) Every bump logs
at least one row, so a reader that finds a gap in the sequence numbers
knows the log was pruned under it, and reloads.

History may also go back: a restore from a backup, a point-in-time
recovery, a failover to a standby that lagged. The counters then stand
where the copy left them, and new writes count them up again, past
values a reader has seen, with other changes behind them. So every bump
also leaves a random ``mark``, on the counter and on its log rows, and a
reader holds (counter, mark) per slot: the same counter with another
mark, a counter lower than seen, or a log whose row at the counter the
reader saw bears another mark, all say "not the history I followed",
and the reader loads everything again. A copy cannot show a bump's mark
without holding that bump and every earlier one of its slot (it is
random, 53 bits), so a slot whose (counter, mark) is the one seen, or
whose log continues from it, changed only as its log says.

A database without the change tables or the triggers (one upstream's
placement-manage made and ours has not upgraded), or whose triggers are
disabled (PostgreSQL's ``ALTER TABLE ... DISABLE TRIGGER``), is not
counted; the readers then read SQL, and look again every
``RECHECK_SECONDS``; when the triggers fire again, a new epoch (see
``counted``).
"""
import threading
import time
import weakref

from oslo_log import log as logging
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import change_triggers
from placement.db import models

LOG = logging.getLogger(__name__)

_SLOT = models.CHANGE_SLOT
_CHANGE = models.CHANGE
SLOTS = change_triggers.SLOTS
EPOCH_SLOT = change_triggers.EPOCH_SLOT
# Log rows kept per slot (the triggers prune older ones).
KEEP = change_triggers.KEEP
# How often a process asks again whether its database counts changes.
RECHECK_SECONDS = 10.0


def slot_of(rp_id):
    return rp_id % SLOTS


# engine -> (whether its database counts changes, when that was asked).
_COUNTED = weakref.WeakKeyDictionary()
_COUNTED_LOCK = threading.Lock()
# Engines whose new epoch _new_epoch_apart is committing: not counted yet.
_RENEWING = weakref.WeakSet()


def _ask(conn):
    inspector = sa.inspect(conn)
    if not (inspector.has_table(_SLOT.name) and
            inspector.has_table(_CHANGE.name)):
        return False, 'the change tables are missing'
    if 'mark' not in {c['name'] for c in inspector.get_columns(_SLOT.name)}:
        # A release before revision f2c6a8e1d9b4 left them (a node of
        # this one started before db sync): its counters cannot be read.
        return False, 'the change tables have no marks yet'
    if change_triggers.missing(conn):
        return False, 'triggers not firing on %s' % change_triggers.describe(
            change_triggers.not_firing(conn))
    return True, None


def not_counted_why(conn):
    """Why the database of ``conn`` does not count its changes (the
    tables lacking, or which triggers on which tables are missing or
    disabled), asked now; None when it does."""
    return _ask(conn)[1]


def counted(conn):
    """Whether the database of ``conn`` (a Connection) counts changes:
    has our change tables and triggers, firing. Asked on ``conn`` itself
    (on SQLite another connection would wait for this one's write lock),
    again every RECHECK_SECONDS, so a process notices a database upgraded
    (or taken back to upstream's schema), or triggers dropped or disabled
    and back, under it.

    When they come back, the writes made meanwhile were never logged: the
    counters, not moved, would tell every world "nothing changed". So the
    process that sees it starts a new epoch first (``_new_epoch_apart``) and
    answers from SQL until that is committed; every process, and the
    node's shared file, then reload. Triggers disabled and enabled again
    between two rechecks of every process go unseen (see
    doc/source/candidates-engine.rst)."""
    engine = conn.engine
    now = time.monotonic()
    known = _COUNTED.get(engine)
    if known is not None and now - known[1] < RECHECK_SECONDS:
        return known[0]
    with _COUNTED_LOCK:
        known = _COUNTED.get(engine)
        if known is not None and now - known[1] < RECHECK_SECONDS:
            return known[0]
        if engine in _RENEWING:
            return False
        answer, why = _ask(conn)
        if known is not None and answer and not known[0]:
            # Back: counted once the new epoch is in.
            _COUNTED[engine] = (False, now)
            _RENEWING.add(engine)
            _new_epoch_apart(engine)
            return False
        if known is None or known[0] != answer:
            if answer:
                LOG.info('Database counts its changes: allocation '
                         'candidates are answered from memory.')
            else:
                LOG.warning('Database does not count its changes (%s): '
                            'allocation candidates are answered from SQL; '
                            'run "placement-manage db sync".', why)
        _COUNTED[engine] = (answer, now)
        return answer


def _new_epoch_apart(engine):
    """A new epoch, committed on a connection of its own (the request's
    may read a replica, or on SQLite hold the write lock, which this
    waits for); the engine is then counted. On failure it is asked again
    at the next recheck."""
    target = db_api.get_engine() if db_api.replica_configured() else engine

    def renew():
        try:
            with target.begin() as conn:
                conn.execute(_epoch_moved())
        except Exception as exc:  # noqa: BLE001 - asked again later
            LOG.warning('Database counts its changes again, but a new '
                        'epoch could not be started (%s): allocation '
                        'candidates stay answered from SQL.', exc)
            with _COUNTED_LOCK:
                _RENEWING.discard(engine)
            return
        with _COUNTED_LOCK:
            _COUNTED[engine] = (True, time.monotonic())
            _RENEWING.discard(engine)
        LOG.warning('Database counts its changes again: a new epoch was '
                    'started (writes made meanwhile were not logged), so '
                    'every process reloads its allocation candidates '
                    'world.')

    threading.Thread(target=renew, name='placement-new-epoch',
                     daemon=True).start()


def forget_counted():
    """Ask again at the next request (tests, after changing the schema)."""
    with _COUNTED_LOCK:
        _COUNTED.clear()
        _RENEWING.clear()


def new_epoch(conn):
    """Say "everything may have changed": every reader reloads. For
    writes made with the triggers off (bulk loads straight into the
    tables)."""
    if counted(conn):
        conn.execute(_epoch_moved())


def _epoch_moved():
    """The statement starting a new epoch: a random one, with its mark."""
    return _SLOT.update().where(_SLOT.c.slot == EPOCH_SLOT).values(
        seq=change_triggers.random_mark(), mark=change_triggers.random_mark())


def counters(conn):
    """(epoch, {slot: (seq, mark)}): where the change counters stand now;
    the epoch as (seq, mark) too."""
    # .all(): the rows fetched at once, not one by one (every request
    # reads these).
    current = {s: (n, m) for s, n, m in conn.execute(
        sa.select(_SLOT.c.slot, _SLOT.c.seq, _SLOT.c.mark)).all()}
    return current.pop(EPOCH_SLOT, None), current


_NEVER = (0, None)


def behind(seen, current):
    """How many changes the counters ``current`` are past ``seen`` (both
    {slot: (seq, mark)} of one epoch); None when the log cannot say which:
    it no longer holds them all (a slot moved on by ``KEEP`` or more), or
    ``seen`` is not in ``current``'s history (a slot back, or at the
    same count with another mark)."""
    if seen == current:
        return 0
    count = 0
    for s, (n, mark) in current.items():
        was, was_mark = seen.get(s, _NEVER)
        if n < was or n - was >= KEEP or (n == was and mark != was_mark):
            return None
        count += n - was
    return count


def ahead(seen, current):
    """Whether ``seen`` is past ``current`` on some slot (a snapshot
    written after ``current`` was read, or one of another history)."""
    return any(n > current.get(s, _NEVER)[0]
               for s, (n, _) in seen.items())


def logged(conn, seen, current):
    """Ids of the providers logged between ``seen`` and ``current`` (as
    ``behind`` takes them); None when the log cannot say: a sequence
    number is missing (the log was pruned between the caller's read of
    the counters and this read; every bump logs a row), or the rows at
    either end bear other marks than the counters (another history)."""
    count = behind(seen, current)
    if count is None:
        return None
    moved = sorted((s, seen.get(s, _NEVER), now)
                   for s, now in current.items() if seen.get(s) != now)
    rows = []
    # A few slots per statement: 64 ORed ranges make a long plan. Each
    # range starts at the row of the counter seen, to check its mark.
    for i in range(0, len(moved), 16):
        conds = [sa.and_(_CHANGE.c.slot == s, _CHANGE.c.seq >= was[0],
                         _CHANGE.c.seq <= now[0])
                 for s, was, now in moved[i:i + 16]]
        rows += conn.execute(sa.select(
            _CHANGE.c.slot, _CHANGE.c.seq, _CHANGE.c.mark,
            _CHANGE.c.resource_provider_id).where(sa.or_(*conds))).all()
    marks = {(s, n): m for s, n, m, _ in rows}
    for s, was, now in moved:
        if marks.get((s, now[0])) != now[1]:
            return None
        # Counter 0 has no row: every history of the slot starts there.
        if was[0] and marks.get((s, was[0])) != was[1]:
            return None
    ends = {(s, was[0]) for s, was, _ in moved}
    if len(marks.keys() - ends) != count:
        return None
    return {rp for s, n, _, rp in rows if (s, n) not in ends}


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
