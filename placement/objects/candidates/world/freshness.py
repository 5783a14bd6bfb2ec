"""How a world stays the database's: the change check at the start of
every request (``refresh``), exact (see ``placement/objects/changes.py``):
one query reads the change counters of ``SLOTS`` slots; for the slots
that moved, one more reads which providers changed since, and only those
are read again (``_catch_up``). The counters are moved by database
triggers, so a request sees every write committed before it began,
whoever made it (our API on any node, upstream's API on the same
database, SQL by hand).

A full load (a new snapshot read from the database; or the node's file,
when it is recent enough to catch up from) happens on first use, when the
database's epoch changes (a new database, a renamed resource class or
trait, ``placement-manage reload``), when this process is further behind
than the change log keeps, when more changed than half its providers, when
what changed since the snapshot grows past a tenth of it
(``settings.OVERLAY``; where the snapshot is the node's file, a thread
renews the file instead and requests go on meanwhile: ``_renew_apart``),
and when the log was pruned between its two reads. Each is logged at INFO
and counted in /metrics.

Who answers while a world is first loaded is decided here too
(``ready_to_answer``): a long first load runs in a thread, the SQL engine
answering meanwhile, so that a world's states -- unloaded, loading apart,
loaded -- are one object's.
"""
import contextlib
import threading
import time

from oslo_log import log as logging
import prometheus_client
import sqlalchemy as sa

from placement import context as placement_context
from placement.db import models
from placement.objects.candidates import node_file
from placement.objects.candidates import snapshot
from placement.objects.candidates.world import apart
from placement.objects.candidates.world import settings
from placement.objects.candidates.world import store
from placement.objects import changes

LOG = logging.getLogger(__name__)

# The world's health, for /metrics (per process, or summed over workers
# in prometheus_client's multiprocess mode).
FULL_LOADS = prometheus_client.Counter(
    'placement_candidates_world_full_loads',
    'Full loads of the in-memory candidates world, by reason.', ['reason'])
PARTIAL_LOADS = prometheus_client.Counter(
    'placement_candidates_world_partial_loads',
    'Refreshes that read again only the providers changed since.')
PROVIDERS_READ = prometheus_client.Counter(
    'placement_candidates_world_providers_read',
    'Providers read into the in-memory world, by full and partial loads.')
REFRESH_SECONDS = prometheus_client.Counter(
    'placement_candidates_world_refresh_seconds',
    'Time spent bringing the in-memory world up to date.')
# Snapshot files this process could not write (warned once each).
_UNSHARED = set()
# Held while a request decides whether a first load runs apart.
_LOADING_LOCK = threading.Lock()
# A request that started a first load apart: the Event its answer from
# the database sets, which the load waits for (settings.LOAD_WAITS).
_STARTED = threading.local()


def answered_from_database():
    """This thread's request was answered by the SQL engine: a first load
    it started (Freshness.ready_to_answer) may begin."""
    answered = getattr(_STARTED, 'answered', None)
    if answered is not None:
        _STARTED.answered = None
        answered.set()


def catches_up(snap, epoch, current):
    """Whether a process may start from snapshot ``snap`` when the
    database is at ``epoch`` and counters ``current``: of that epoch, and
    as recent or behind by no more than the change log holds and a
    catch-up is worth (the log's rows are read after, and may still tell
    it was pruned meanwhile, or of another history)."""
    if snap.epoch != epoch:
        return False
    if snap.slots == current:
        return True
    behind = changes.behind(snap.slots, current)
    return behind is not None and behind <= settings.overlay_limit(snap.n)


class Freshness:
    """World's part that brings it up to date, loading it whole when
    catching up would cost more or cannot be exact."""

    def refresh(self, ctx, conn):
        """Bring the world up to every change committed so far."""
        start = time.perf_counter()
        self._mysql = conn.dialect.name == 'mysql'
        epoch, current = changes.counters(conn)
        why = None
        if not self.loads:
            why = 'first use'
        elif self.base.path and not self.base.intact():
            # Before anything reads the mapping (see Snapshot.intact).
            why = 'node file changed in place'
            LOG.warning('Allocation candidates: the node file %s changed '
                        'in place under this process (damaged by another '
                        'hand); not read again, the world is loaded anew.',
                        self.base.path)
        elif epoch != self.epoch:
            why = 'new epoch'
        elif self.base.path and self.changed and \
                node_file.inode(self.base.path) != self.base.ino:
            why = 'newer snapshot'
        else:
            why = self._catch_up(ctx, conn, current)
        if why is not None:
            how = self._load_all(ctx, conn, epoch, current)
            LOG.info('Allocation candidates: loaded %d providers (%s, %s) '
                     'in %.3f s.', self.count, why, how,
                     time.perf_counter() - start)
            FULL_LOADS.labels(why).inc()
        else:
            self.slots = current
        self.epoch = epoch
        if len(self._cache) > settings.CACHE:
            self._cache = {}
        if len(self.models) > settings.CACHE:
            self.models = store.ProviderModels(self)
        if len(self._edited_roots) > settings.CACHE:
            # roots_with_each's lists are made again when next asked.
            self._each = {}
            self._edited_roots = []
        if self._made_trees_size > settings.CACHE:
            self._made_trees = {}
            self._made_trees_size = 0
        if self._searched_size > settings.SEARCHED:
            self._searched = {}
            self._searched_size = 0
        REFRESH_SECONDS.inc(time.perf_counter() - start)

    def ready_to_answer(self, ctx, conn):
        """Whether this world answers: 'now' once loaded, or when loading
        it is quick; 'after' this process's read of it; None: the SQL
        engine answers. A first load that reads a large world from the
        database (a node starting with no snapshot file: 7 s at a million
        providers) runs in a thread of its own, and the request that
        started it, and those of processes waiting for another's file,
        are answered by the SQL engine -- from the database, so as fresh.
        The later requests of the process reading the world wait for it
        ('after', see ``answering``) a little, then the database answers
        them too: a read of a million providers under traffic took 27 s,
        and a request waiting for it all of that. So does a long
        catch-up from the node's file, unless candidates are randomized.
        A world half read never answers."""
        if self.loads:
            return 'now'
        with _LOADING_LOCK:
            if self.loading_apart:
                return 'after' if self.reading else None
            # A long catch-up runs apart where the SQL engine answers a
            # limit from the first trees; its random sample reads them
            # all (1.2-1.5 s at a million providers, longer than the
            # catch-up).
            randomize = ctx.config.placement.randomize_allocation_candidates
            if not self.first_load_is_long(conn,
                                           catch_up_apart=not randomize):
                return 'now'
            self.loading_apart = True
        _STARTED.answered = threading.Event()
        threading.Thread(target=self._load_apart,
                         name='placement-world-load',
                         args=(conn.engine, ctx.config, _STARTED.answered),
                         daemon=True).start()
        return None

    @contextlib.contextmanager
    def answering(self, how):
        """The world's lock, held while it answers; yields whether it
        does. ``how`` is ready_to_answer's: 'now' waits for the lock;
        'after' waits READ_WAITS seconds at most for this process's read,
        and the database answers if it is not done by then (or failed)."""
        got = self.lock.acquire(
            timeout=-1 if how == 'now' else settings.READ_WAITS)
        try:
            yield got and (how == 'now' or self.loads)
        finally:
            if got:
                self.lock.release()

    @contextlib.contextmanager
    def database_turn(self):
        """While this world is first loaded apart, the requests the SQL
        engine answers in the node's processes take turns,
        DATABASE_LANES at a time (its answer over a large world costs a
        CPU for most of a second, and a cold node under many boots
        answering them all at once left the read too little CPU to end;
        one at a time was fewer than came at one boot a second): yields
        True when it is this request's turn, held until the block ends;
        False when the load ended first (the world answers it). True at
        once for a world not loading, or with no node directory to take
        turns in."""
        if self._turns is None or not self.loading_apart:
            yield True
            return
        with node_file.turn(self._turns, lambda: self.loading_apart,
                            settings.DATABASE_LANES) as mine:
            yield mine

    def _load_apart(self, engine, config, answered):
        """The first load of this world, on a connection of its own, once
        the request that started it is ``answered`` from the database (at
        most LOAD_WAITS seconds later): that answer takes a second alone,
        three when it shares the interpreter with the read."""
        answered.wait(settings.LOAD_WAITS)
        ctx = placement_context.admin_context(config)
        if self._file_to_write is not None:
            # A whole read: by a process of its own, into the node's file
            # this process then takes up; here if none can.
            path, ino, providers = self._file_to_write
            apart.write_in_a_process(path, ino, engine, config, providers)
        with self.lock:
            try:
                with engine.connect() as conn:
                    self.refresh(ctx, conn)
            except Exception:
                LOG.exception('Allocation candidates: reading the world '
                              'failed; the database answers until a '
                              'request tries again.')
            finally:
                self.loading_apart = False

    def _catch_up(self, ctx, conn, current):
        """Read again the providers logged since the counters this world
        reflects; the reason to load everything instead, or None."""
        behind = changes.behind(self.slots, current)
        if behind == 0:
            return None
        if behind is None:
            # Or back: a restore, a failover (changes.behind).
            return 'behind the change log, or off it'
        if behind > max(settings.CHUNK, self.count // 2):
            # Reading the log and then most providers by id costs more
            # than reading every provider at once.
            return 'more changes than half the providers'
        # Past a tenth of the snapshot, in providers read again or in
        # kinds made since (each new usage of a provider may make one),
        # a new snapshot keeps this process's share small: renewed by a
        # thread, or here past twice the limit or when it cannot be.
        since = max(len(self.changed), len(self.kinds) - len(self.base.kinds))
        limit = settings.overlay_limit(self.base.n)
        if since + behind > limit and (
                since + behind > 2 * limit
                or not self._renew_apart(conn, ctx.config)):
            return 'many changes since the snapshot'
        ids = changes.logged(conn, self.slots, current)
        if ids is None:
            return 'change log pruned while read, or not the one seen'
        self._read_again(ctx, conn, ids)
        PARTIAL_LOADS.inc()
        PROVIDERS_READ.inc(len(ids))
        return None

    def _renew_apart(self, conn, config):
        """Have the node's file made again from the database by a thread
        of this process, the requests answered meanwhile from this
        snapshot and what changed since (reading and rendering a million
        providers takes about 10 s: every request would wait).
        Each process moves to the new file at its next change check
        ('newer snapshot'). False when the file cannot be renewed so: this
        world has none, its database is SQLite (whose writers would wait
        for the read), or the renewal begun from this snapshot ended
        without a new file; the caller loads in the request then, as
        past twice the threshold (the renewal too slow for the writes)."""
        path, ino = self.base.path, self.base.ino
        if not path or conn.dialect.name == 'sqlite':
            return False
        if self._renewal is not None and self._renewal[0] == ino:
            return self._renewal[1].is_alive()
        thread = threading.Thread(
            target=apart.renew_apart, name='placement-world-renew',
            args=(type(self), path, ino, conn.engine, config, self._mysql,
                  self.base.n),
            daemon=True)
        self._renewal = (ino, thread)
        thread.start()
        return True

    def first_load_is_long(self, conn, catch_up_apart=True):
        """Whether this world was never loaded and loading it means
        reading at least READ_APART_FROM (settings) providers from a
        database server: no snapshot file of the node to start from, or
        one too old to catch up from (a node restarted after many writes,
        or after a new epoch: its first answers would wait for the whole
        read, 15 s at a million providers); or, with ``catch_up_apart``,
        catching up with at least CATCH_UP_APART_FROM providers changed
        since the node's file. (An embedded SQLite file is for small
        clouds, and a read in another thread there makes the requests'
        connections wait for its locks.)"""
        self._file_to_write = None
        if self.loads or conn.dialect.name == 'sqlite':
            return False
        write = None
        if settings.SHARED_DIR and node_file.shareable(conn.engine):
            path = node_file.path_for(settings.SHARED_DIR, conn.engine)
            self._turns = path + '.turn%d.lock'
            snap = node_file.open_file(path)
            # For the load that follows: checked once (its checksum).
            self._opened = snap
            # A file too old to catch up from is read again, whole.
            epoch, current = changes.counters(conn)
            if snap is not None and snap.epoch == epoch and \
                    changes.ahead(snap.slots, current):
                # Newer than this transaction's counters: _from_file.
                return False
            if snap is not None and catches_up(snap, epoch, current):
                if not catch_up_apart:
                    return False
                # (A count of the log's bumps, changes.behind, says little
                # of the providers: a transaction bumps a slot once.)
                ids = changes.logged(conn, snap.slots, current)
                return ids is not None and \
                    len(ids) >= settings.CATCH_UP_APART_FROM
            write = (path, node_file.inode(path))
        count = conn.execute(sa.select(sa.func.count()).select_from(
            models.RP)).scalar()
        if write is not None:
            # Read whole, if long: the node's file made anew (_load_apart).
            self._file_to_write = write + (count,)
        return count >= settings.READ_APART_FROM

    def read_all(self, ctx, conn):
        """Read every provider, with no change check: a world of its own
        for a database that does not count its changes (explain)."""
        self._mysql = conn.dialect.name == 'mysql'
        self._adopt_snapshot(ctx, snapshot.Snapshot(
            self._read_snapshot(conn, None, {})))

    # -- loading ----------------------------------------------------------

    def _load_all(self, ctx, conn, epoch, current):
        """Make this world the database's as of ``current``: from the
        node's snapshot file when there is one recent enough, else read
        whole (and written to the file for the others, when large).
        Returns how it was done, for the log."""
        path = None
        if settings.SHARED_DIR and node_file.shareable(conn.engine):
            path = node_file.path_for(settings.SHARED_DIR, conn.engine)
            if self._from_file(ctx, conn, path, epoch, current):
                return 'caught up from the shared snapshot'
            count = conn.execute(sa.select(sa.func.count()).select_from(
                models.RP)).scalar()
            if count < settings.SHARE_FROM:
                path = None
        data = snap = None
        if path is None:
            how = 'read from the database'
        else:
            how = 'read from the database, shared'
            try:
                with node_file.locked(path):
                    # Another process may have written it while this one
                    # waited.
                    if self._from_file(ctx, conn, path, epoch, current):
                        return 'caught up from the shared snapshot'
                    data = self._reading(conn, epoch, current)
                    self._write_node_file(ctx, path, data)
                    snap = node_file.open_file(path)
            except OSError as exc:
                # No room, no right: this process keeps its own copy.
                if path not in _UNSHARED:
                    _UNSHARED.add(path)
                    LOG.warning('Allocation candidates: cannot share the '
                                'world through %s (%s); this process keeps '
                                'its own copy.', path, exc)
                how = 'read from the database, not shared'
        if snap is None:
            snap = snapshot.Snapshot(
                data if data is not None else
                self._reading(conn, epoch, current))
        self._adopt_snapshot(ctx, snap)
        self.slots = current
        PROVIDERS_READ.inc(self.count)
        return how

    def _from_file(self, ctx, conn, path, epoch, current):
        """Take the node's snapshot file if it is of this epoch, newer
        than this world's base and no further behind ``current`` than a
        catch-up covers, in the database's history; then catch up. False
        if not. A file past ``current`` was written since it was read
        (by another process, while this one waited for the file's lock):
        it is checked against counters read again, on a connection of
        its own (``conn``'s transaction may see the database as it was)."""
        if self.loads and node_file.inode(path) == self.base.ino:
            return False
        snap, self._opened = self._opened, None
        if snap is None or snap.ino != node_file.inode(path) or \
                not snap.intact():
            snap = node_file.open_file(path)
        if snap is None or snap.epoch != epoch:
            return False
        if not changes.ahead(snap.slots, current):
            return self._catch_up_from(ctx, conn, snap, epoch, current)
        with conn.engine.connect() as fresh:
            with fresh.begin():
                return self._catch_up_from(ctx, fresh, snap,
                                           *changes.counters(fresh))

    def _catch_up_from(self, ctx, conn, snap, epoch, current):
        """Take ``snap`` and read what changed since, if the database at
        ``epoch`` and ``current`` can say what that is."""
        if not catches_up(snap, epoch, current):
            return False
        ids = set()
        if snap.slots != current:
            ids = changes.logged(conn, snap.slots, current)
            if ids is None:
                return False
        self._adopt_snapshot(ctx, snap)
        self.slots = snap.slots
        if ids:
            self._read_again(ctx, conn, ids)
            PROVIDERS_READ.inc(len(ids))
        self.slots = current
        return True

    def _reading(self, conn, epoch, current):
        """_read_snapshot, ``reading`` meanwhile: this process reads the world
        from the database now (not waiting for another's file)."""
        self.reading = True
        try:
            return self._read_snapshot(conn, epoch, current)
        finally:
            self.reading = False

    def _read_snapshot(self, conn, epoch, current):
        """A snapshot of every provider, read now, as bytes."""
        return snapshot.build(*self._read_rows(conn, None), epoch, current)
