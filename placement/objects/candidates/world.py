"""The world allocation candidates are searched in, kept in memory.

Each process holds, per database, every provider with its place in its
tree, inventories with usage, traits and aggregates (``World``), and
refreshes it at the start of every request by a change check that is
exact (see ``placement/objects/changes.py``): one query reads the
change counters of ``SLOTS`` slots; for the slots that moved, one more
reads which providers changed since, and only those are read again. The
counters are moved by database triggers, so a request sees every write
committed before it began, whoever made it (our API on any node, upstream's
API on the same database, SQL by hand), and costs the database two tiny
queries instead of a search.

How it is held: a ``snapshot.Snapshot`` (columns, read in place) of the
whole world at some counters -- on a large world a file every process of
the node maps, so they share one copy and a new process starts by mapping
it -- plus, per process, what changed since (``changed``: providers read
again) and the providers looked at lately (``_cache``). ``rps``,
``trees``, ``by_trait``, ``by_agg`` and ``by_uuid`` read both as one.

A full load (a new snapshot read from the database; or the node's file,
when it is recent enough to catch up from) happens on first use, when the
database's epoch changes (a new database, a renamed resource class or
trait, ``placement-manage reload``), when this process is further behind
than the change log keeps, when more changed than half its providers, when
what changed since the snapshot grows past a tenth of it (``_OVERLAY``;
where the snapshot is the node's file, a thread renews the file instead
and requests go on meanwhile: ``_renew_apart``), and when the log was
pruned between its two reads. Each is logged at INFO and counted in
/metrics.
"""
import array
import bisect
import collections
import collections.abc
import itertools
import threading
import time
import weakref

from oslo_log import log as logging
import prometheus_client
import sqlalchemy as sa

from placement import context as placement_context
from placement.db import models
from placement.objects.candidates import model
from placement.objects.candidates import per_tree
from placement.objects.candidates import rules
from placement.objects.candidates import snapshot
from placement.objects import changes
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj

_RP = models.RP
_INV = models.INV
_ALLOC = models.ALLOC
_RPT = models.RPT
_RPA = models.RPA

LOG = logging.getLogger(__name__)

# Providers read per statement on a partial reload.
_CHUNK = 500
# Providers changed since the snapshot past which a new one is made: at
# least this many, at least a tenth of the snapshot.
_OVERLAY = 5000


def _renew_file(path, ino, engine, config, mysql):
    """World._renew_apart's thread: write the node's file at ``path``
    again from the database, unless another process did since it was
    ``ino`` (its thread waited for the file's lock meanwhile)."""
    start = time.perf_counter()
    ctx = placement_context.admin_context(config)
    scratch = World()
    scratch._mysql = mysql
    try:
        with snapshot.locked(path):
            if snapshot.inode(path) != ino:
                return
            with engine.connect() as conn:
                epoch, current = changes.counters(conn)
                scratch._write_shared(ctx, path,
                                      scratch._bytes(conn, epoch, current))
    except Exception:
        LOG.exception('Allocation candidates: renewing %s failed; the '
                      'next request past the threshold reads the world '
                      'itself.', path)
        return
    LOG.info('Allocation candidates: renewed %s from the database in '
             '%.3f s.', path, time.perf_counter() - start)


def _catches_up(snap, epoch, current):
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
    return behind is not None and behind <= _overlay_limit(snap.n)


def _overlay_limit(n):
    """How much may change since a snapshot of ``n`` providers before a
    new one is better: ``_OVERLAY``, or a tenth of it."""
    return max(_OVERLAY, n // 10)


# Providers made from the snapshot kept between requests, at most.
_CACHE = 100000
# Picks of trees' searches kept between requests (World.searches), at
# most; a tree's with more picks are not kept.
_SEARCHED = 200000
_SEARCHED_PER_TREE = 1024
# Groups' amounts whose fits per kind are kept (see World.fits).
_FIT_MEMOS = 256
# Sets of classes whose marks over the snapshot are kept (World._marks).
_MARKS = 8
# roots_with_each lists fewer than this share of the trees, for at most
# _EACH_MEMOS requests' sets of traits and aggregates (an 8-byte id per
# root: 300 kB for 40,000 roots).
_MOST_TREES = 0.75
_EACH_MEMOS = 32
# Worlds of at least this many providers are shared through a file by
# the processes of a node (``SHARED_DIR``; None: never).
SHARE_FROM = 10000
# A first load reading at least this many providers from the database
# runs apart from the requests (engine._ready).
READ_APART_FROM = 10000
# So does one catching up with at least this many providers logged since
# the node's file (a restarted node's: 10,000 took a process 1-1.6 s,
# beside its siblings' imports 2-3 s, before its first answer).
CATCH_UP_APART_FROM = 2000
SHARED_DIR = snapshot.default_directory()

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

_BASE = object()
# Keys of World._alike beside inventory rows.
_TRAITS, _AGGS = 'traits', 'aggregates'
# Snapshot files this process could not write (warned once each).
_UNSHARED = set()


class Kind:
    """What providers alike share: ``inv`` ({class id: rules.Inventory},
    its limit rounded as the database rounds it), ``prov_inv`` ({class
    name: rules.Room}, model.Provider's), ``traits`` and ``aggs``
    (frozensets of ids), ``names`` (model.Traits) and ``part`` (the
    model.Part provider summaries render once for them all)."""

    __slots__ = ('inv', 'prov_inv', 'traits', 'aggs', 'names', 'part')


class Rec:
    """One provider as the search reads it: its ids, its kind's ``inv``,
    ``traits`` and ``aggs`` (and ``kind``, the kind's index). Never
    changed once made: a refresh replaces it. (Its model.Provider, what
    the combiner and the summaries read, is made when asked: World.models;
    most records are made to be judged, or dropped by a catch-up.)"""

    __slots__ = ('id', 'uuid', 'parent', 'root', 'inv', 'traits', 'aggs',
                 'kind')

    def __init__(self, id, uuid, parent, root, kind, k):
        self.id = id
        self.uuid = uuid
        self.parent = parent
        self.root = root
        self.kind = k
        self.inv = kind.inv
        self.traits = kind.traits
        self.aggs = kind.aggs


def _provider(id, uuid, parent, root, kind):
    """The model.Provider of a provider of ``kind`` (a Kind)."""
    return model.Provider(id, uuid, parent, root, traits=kind.names,
                          inventory=kind.prov_inv)


class ProviderModels(dict):
    """id -> model.Provider of ``world``'s providers, what the combiner
    reads and answers are made of: made on first use (its record's, or
    from the snapshot's columns: a random sample's are new ones each
    time) and kept until the provider changes (World._drop), request
    after request. A dict, so that the combiner's lookups of the
    providers it holds cost what a dict's do."""

    def __init__(self, world):
        super().__init__()
        self.world = world

    def __missing__(self, rid):
        prov = self[rid] = self.world._model(rid)
        return prov

    def get(self, rid, default=None):
        try:
            return self[rid]
        except KeyError:
            return default


class _Searches:
    """World.searches: get(root) -> the picks kept (a tuple), None if
    none; put(root, picks) once a search under ``root`` is done."""

    __slots__ = ('world', 'request')

    def __init__(self, world, request):
        self.world = world
        self.request = request

    def get(self, root):
        mine = self.world._searched.get(root)
        return None if mine is None else mine.get(self.request)

    def put(self, root, picks):
        if len(picks) > _SEARCHED_PER_TREE:
            return
        world = self.world
        world._searched.setdefault(root, {})[self.request] = tuple(picks)
        world._searched_size += len(picks) + 1


class Providers(collections.abc.Mapping):
    """``World.rps``: id -> Rec, what changed first, then the snapshot."""

    def __init__(self, world):
        self.world = world

    def __getitem__(self, rid):
        world = self.world
        rec = world.changed.get(rid, _BASE)
        if rec is _BASE:
            rec = world._cache.get(rid)
            if rec is None:
                pos = world.base.pos_of(rid)
                if pos is None:
                    raise KeyError(rid)
                rec = world._make(pos)
        elif rec is None:
            raise KeyError(rid)
        return rec

    def get(self, rid, default=None):
        try:
            return self[rid]
        except KeyError:
            return default

    def __contains__(self, rid):
        return self.get(rid) is not None

    def __len__(self):
        return self.world.count

    def __bool__(self):
        return self.world.count > 0

    def __iter__(self):
        world = self.world
        changed = world.changed
        for rid in world.base.byid:
            if rid not in changed:
                yield rid
        for rid, rec in list(changed.items()):
            if rec is not None:
                yield rid


class Trees:
    """``World.trees``: root id -> the ids of its tree, ascending."""

    def __init__(self, world):
        self.world = world

    def get(self, root, default=None):
        world = self.world
        ids = world._tree_ov.get(root)
        if ids is None:
            start, end = world.base.tree(root)
            return world.base.ids[start:end].tolist() if end else default
        return ids or default

    def __contains__(self, root):
        return self.get(root) is not None

    def items(self):
        for root in self.world.roots:
            yield root, self.get(root)


class Members:
    """``World.by_trait`` / ``World.by_agg``: key -> set of provider ids,
    made on first use and then kept up to date by each refresh."""

    def __init__(self, world, of):
        self.world = world
        self.of = of
        self.attr = 'traits' if of == 'trait' else 'aggs'
        self._sets = {}

    def reset(self):
        self._sets = {}

    def get(self, key, default=None):
        ids = self._sets.get(key)
        if ids is None:
            world = self.world
            changed = world.changed
            ids = {rid for rid in world.base.members(self.of, key)
                   if rid not in changed}
            attr = self.attr
            ids.update(rid for rid, rec in changed.items()
                       if rec is not None and key in getattr(rec, attr))
            self._sets[key] = ids
        return ids if ids else default

    def edit(self, keys, rid, present):
        for key in keys:
            ids = self._sets.get(key)
            if ids is not None:
                if present:
                    ids.add(rid)
                else:
                    ids.discard(rid)


class Uuids:
    """``World.by_uuid``: uuid -> provider id (exact case)."""

    def __init__(self, world):
        self.world = world

    def ids(self, uuid, any_case=False):
        """Ids of the providers with ``uuid`` (in any case if ``any_case``),
        exact matches first."""
        world = self.world
        changed = world.changed
        exact, other = [], []
        rid = world._uuid_ov.get(uuid)
        if rid is not None:
            exact.append(rid)
        for same, rid in world.base.ids_with_uuid(uuid):
            if rid not in changed and (same or any_case):
                (exact if same else other).append(rid)
        if any_case and not exact:
            wanted = uuid.lower()
            other += [i for u, i in world._uuid_ov.items()
                      if u.lower() == wanted]
        return exact + other

    def __getitem__(self, uuid):
        found = self.ids(uuid)
        if not found:
            raise KeyError(uuid)
        return found[0]

    def __contains__(self, uuid):
        return bool(self.ids(uuid))


def _ones(marks, offset):
    """The positions of the 1s in ``marks`` (bytes of 0s and 1s), plus
    ``offset``: the lengths of the parts between them are the gaps. A
    C call per 1, where compressing a range makes an int per byte (a
    run of a thousand hosts' trees is 19,000 bytes, 1,000 of them 1)."""
    gaps = marks.split(b'\x01')
    gaps.pop()
    kept = list(itertools.accumulate(map((1).__add__, map(len, gaps)),
                                     initial=offset - 1))
    del kept[0]
    return kept


class World:
    """Every provider of one database, and the change counters it
    reflects. ``lock`` is held while refreshing and while a search
    reads."""

    def __init__(self):
        self.lock = threading.RLock()
        self.epoch = None
        self.slots = {}
        self.rps = Providers(self)
        self.trees = Trees(self)
        self.by_trait = Members(self, 'trait')
        self.by_agg = Members(self, 'agg')
        self.by_uuid = Uuids(self)
        # root id -> frozenset of the trait ids in its tree, on first use.
        self.tree_traits = model.OnFirstUse(self._traits_in_tree)
        self._mysql = False
        self.loads = 0                  # full loads (tests)
        self.loading_apart = False      # see engine._ready
        self.reading = False            # see _reading
        self._renewal = None            # (base inode, thread): _renew_apart
        self._opened = None             # see first_load_is_long
        self._reset(snapshot.Snapshot(snapshot.build(
            [], [], [], [], [], None, {})))

    # -- the change check -------------------------------------------------

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
                snapshot.inode(self.base.path) != self.base.ino:
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
        if len(self._cache) > _CACHE:
            self._cache = {}
        if len(self.models) > _CACHE:
            self.models = ProviderModels(self)
        if len(self._edited_roots) > _CACHE:
            # roots_with_each's lists are made again when next asked.
            self._each = {}
            self._edited_roots = []
        if self._made_trees_size > _CACHE:
            self._made_trees = {}
            self._made_trees_size = 0
        if self._searched_size > _SEARCHED:
            self._searched = {}
            self._searched_size = 0
        REFRESH_SECONDS.inc(time.perf_counter() - start)

    def _catch_up(self, ctx, conn, current):
        """Read again the providers logged since the counters this world
        reflects; the reason to load everything instead, or None."""
        behind = changes.behind(self.slots, current)
        if behind == 0:
            return None
        if behind is None:
            # Or back: a restore, a failover (changes.behind).
            return 'behind the change log, or off it'
        if behind > max(_CHUNK, self.count // 2):
            # Reading the log and then most providers by id costs more
            # than reading every provider at once.
            return 'more changes than half the providers'
        # Past a tenth of the snapshot, in providers read again or in
        # kinds made since (each new usage of a provider may make one),
        # a new snapshot keeps this process's share small: renewed by a
        # thread, or here past twice the limit or when it cannot be.
        since = max(len(self.changed), len(self.kinds) - len(self.base.kinds))
        limit = _overlay_limit(self.base.n)
        if since + behind > limit and (
                since + behind > 2 * limit
                or not self._renew_apart(conn, ctx.config)):
            return 'many changes since the snapshot'
        ids = changes.logged(conn, self.slots, current)
        if ids is None:
            return 'change log pruned while read, or not the one seen'
        self._apply(ctx, conn, ids)
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
            target=_renew_file, name='placement-world-renew',
            args=(path, ino, conn.engine, config, self._mysql), daemon=True)
        self._renewal = (ino, thread)
        thread.start()
        return True

    def first_load_is_long(self, conn, catch_up_apart=True):
        """Whether this world was never loaded and loading it means
        reading at least READ_APART_FROM providers from a database
        server: no snapshot file of the node to start from, or one too
        old to catch up from (a node restarted after many writes, or
        after a new epoch: its first answers would wait for the whole
        read, 15 s at a million providers); or, with ``catch_up_apart``,
        catching up with at least CATCH_UP_APART_FROM providers changed
        since the node's file. (An embedded SQLite file is for small
        clouds, and a read in another thread there makes the requests'
        connections wait for its locks.)"""
        if self.loads or conn.dialect.name == 'sqlite':
            return False
        if SHARED_DIR and snapshot.shareable(conn.engine):
            snap = snapshot.open_file(snapshot.path_for(SHARED_DIR,
                                                        conn.engine))
            # For the load that follows: checked once (its checksum).
            self._opened = snap
            # A file too old to catch up from is read again, whole.
            epoch, current = changes.counters(conn)
            if snap is not None and snap.epoch == epoch and \
                    changes.ahead(snap.slots, current):
                # Newer than this transaction's counters: _from_file.
                return False
            if snap is not None and _catches_up(snap, epoch, current):
                if not catch_up_apart:
                    return False
                # (A count of the log's bumps, changes.behind, says little
                # of the providers: a transaction bumps a slot once.)
                ids = changes.logged(conn, snap.slots, current)
                return ids is not None and len(ids) >= CATCH_UP_APART_FROM
        return conn.execute(sa.select(sa.func.count()).select_from(
            _RP)).scalar() >= READ_APART_FROM

    def read_all(self, ctx, conn):
        """Read every provider, with no change check: a world of its own
        for a database that does not count its changes (explain)."""
        self._mysql = conn.dialect.name == 'mysql'
        self._use(ctx, snapshot.Snapshot(self._bytes(conn, None, {})))

    # -- loading ----------------------------------------------------------

    def _load_all(self, ctx, conn, epoch, current):
        """Make this world the database's as of ``current``: from the
        node's snapshot file when there is one recent enough, else read
        whole (and written to the file for the others, when large).
        Returns how it was done, for the log."""
        path = None
        if SHARED_DIR and snapshot.shareable(conn.engine):
            path = snapshot.path_for(SHARED_DIR, conn.engine)
            if self._from_file(ctx, conn, path, epoch, current):
                return 'caught up from the shared snapshot'
            count = conn.execute(sa.select(sa.func.count()).select_from(
                _RP)).scalar()
            if count < SHARE_FROM:
                path = None
        data = snap = None
        if path is None:
            how = 'read from the database'
        else:
            how = 'read from the database, shared'
            try:
                with snapshot.locked(path):
                    # Another process may have written it while this one
                    # waited.
                    if self._from_file(ctx, conn, path, epoch, current):
                        return 'caught up from the shared snapshot'
                    data = self._reading(conn, epoch, current)
                    self._write_shared(ctx, path, data)
                    snap = snapshot.open_file(path)
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
        self._use(ctx, snap)
        self.slots = current
        PROVIDERS_READ.inc(self.count)
        return how

    def _write_shared(self, ctx, path, data):
        """Write the node's file of snapshot ``data``, ending with its
        trees rendered (_rendered); without them if rendering fails: they
        only spare the processes work, the world is whole without them."""
        try:
            snapshot.write_file(path, data, self._rendered(ctx, data))
        except OSError:
            raise
        except Exception:
            LOG.exception('Allocation candidates: rendering the trees for '
                          '%s failed; the file goes without them.', path)
            snapshot.write_file(path, data)

    def _rendered(self, ctx, data):
        """The chunks ending a snapshot file of ``data`` with its trees
        rendered by the registered renderer (render_trees_with); none if
        there is none. Each tree whose providers are all in its run
        (tree()'s Layout of the snapshot) is rendered; the others are
        rendered by the processes, as the trees changed since."""
        if _RENDERER is None:
            return ()
        key, render = _RENDERER
        self._take(ctx, snapshot.Snapshot(data))
        base = self.base
        starts, shapes = base.tstart, base.tshape

        def trees():
            for i in range(len(base.troot)):
                shape = shapes[i]
                yield None if shape < 0 else self._base_tree(
                    starts[i], starts[i + 1], shape)
        return snapshot.rendered_section(data, key, render(trees()))

    def _from_file(self, ctx, conn, path, epoch, current):
        """Take the node's snapshot file if it is of this epoch, newer
        than this world's base and no further behind ``current`` than a
        catch-up covers, in the database's history; then catch up. False
        if not. A file past ``current`` was written since it was read
        (by another process, while this one waited for the file's lock):
        it is checked against counters read again, on a connection of
        its own (``conn``'s transaction may see the database as it was)."""
        if self.loads and snapshot.inode(path) == self.base.ino:
            return False
        snap, self._opened = self._opened, None
        if snap is None or snap.ino != snapshot.inode(path) or \
                not snap.intact():
            snap = snapshot.open_file(path)
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
        if not _catches_up(snap, epoch, current):
            return False
        ids = set()
        if snap.slots != current:
            ids = changes.logged(conn, snap.slots, current)
            if ids is None:
                return False
        self._use(ctx, snap)
        self.slots = snap.slots
        if ids:
            self._apply(ctx, conn, ids)
            PROVIDERS_READ.inc(len(ids))
        self.slots = current
        return True

    def _reading(self, conn, epoch, current):
        """_bytes, ``reading`` meanwhile: this process reads the world
        from the database now (not waiting for another's file)."""
        self.reading = True
        try:
            return self._bytes(conn, epoch, current)
        finally:
            self.reading = False

    def _bytes(self, conn, epoch, current):
        """A snapshot of every provider, read now, as bytes."""
        return snapshot.build(*self._read(conn, None), epoch, current)

    def _read(self, conn, ids):
        """Rows of providers ``ids`` (all of them if None): (providers,
        inventories, usage, traits, aggregates), as _READS reads them."""
        if ids is None:
            return tuple(_all_rows(conn, stmt) for stmt, _col in _READS)
        out = tuple([] for _ in _READS_OF_IDS)
        ordered = sorted(ids)
        for i in range(0, len(ordered), _CHUNK):
            chunk = {'ids': ordered[i:i + _CHUNK]}
            for rows, stmt in zip(out, _READS_OF_IDS):
                rows += conn.execute(stmt, chunk).all()
        return out

    def _use(self, ctx, snap):
        """Make ``snap`` the base, nothing changed since: a full load."""
        self._take(ctx, snap)
        self.loads += 1

    def _take(self, ctx, snap):
        """Make ``snap`` the base, its kinds made."""
        self._reset(snap)
        names = self._names(ctx)
        for raw in snap.kinds:
            self._kind(raw, names)

    def _reset(self, snap):
        """``snap`` and nothing else: no kind made yet, nothing changed
        since, nothing kept from before."""
        self.base = snap
        self.kinds = []                 # Kind by index, the base's first
        self._parts = []                # their model.Part, by index
        self._kind_index = {}           # raw kind -> index
        self._alike = {}                # what kinds share, see _kind()
        self.changed = {}               # id -> Rec, None if gone
        self._tree_ov = {}              # root -> ids, trees changed
        self._uuid_ov = {}              # uuid -> id, providers changed
        self._cache = {}                # id -> Rec made from the base
        self.models = ProviderModels(self)  # id -> model.Provider
        self._made_trees = {}           # root -> model.Tree, see tree()
        self._made_trees_size = 0       # providers in them (about)
        self._searched = {}             # root -> {request: picks}
        self._searched_size = 0         # picks in them (about)
        self._layouts = {}              # root -> model.Layout, see tree()
        self._shapes = [                # the base's tree shapes
            model.Layout.of(parents, root, len(parents))
            for parents, root in snap.shapes]
        self._each = {}                 # see roots_with_each()
        self._edited_roots = []         # roots edited since the snapshot
        self._ov_runs = {}              # root -> _changed_tree, changed trees
        self._fits = {}                 # see fits()
        self._class_filters = {}        # see _class_filter()
        self._class_marks = {}          # see _marks()
        self._kind_marks = {}           # see _kinds_serving()
        self.roots = array.array('q', snap.troot)   # sorted root ids
        self.children = snap.children   # providers with a parent
        self.count = snap.n             # providers
        self.by_trait.reset()
        self.by_agg.reset()
        self.tree_traits.clear()
        self._per_tree = None           # see per_tree()

    @staticmethod
    def _names(ctx):
        return (model.OnFirstUse(lambda rc: rc_obj.name_for_id(ctx, rc)),
                model.OnFirstUse(lambda t: trait_obj.name_for_id(ctx, t)))

    def _kind(self, raw, names):
        """The index of kind ``raw`` (see snapshot.Snapshot.kinds), made
        on first sight. What kinds share is made once (``_alike``): a
        million providers' 14,000 kinds have 43,000 inventories but 135
        distinct ones, and a handful of sets of traits and aggregates (a
        node's process starts 0.3 s sooner)."""
        k = self._kind_index.get(raw)
        if k is not None:
            return k
        rc_names, trait_names = names
        inv_rows, tids, aids = raw
        alike = self._alike
        kind = Kind()
        kind.inv, kind.prov_inv = {}, {}
        for row in inv_rows:
            made = alike.get(row)
            if made is None:
                made = alike[row] = self._inventory(row, rc_names)
            rc, inv, name, room = made
            kind.inv[rc] = inv
            kind.prov_inv[name] = room
        made = alike.get((_TRAITS, tids))
        if made is None:
            # In trait id order: see model.Traits.
            made = alike[_TRAITS, tids] = (frozenset(tids), model.Traits(
                [trait_names[t] for t in tids]))
        kind.traits, kind.names = made
        kind.aggs = alike.get((_AGGS, aids))
        if kind.aggs is None:
            kind.aggs = alike[_AGGS, aids] = frozenset(aids)
        kind.part = model.Part(kind.prov_inv, kind.names)
        k = self._kind_index[raw] = len(self.kinds)
        self.kinds.append(kind)
        self._parts.append(kind.part)
        return k

    def _inventory(self, row, rc_names):
        """(class id, rules.Inventory, class name, rules.Room) of an
        inventory row of a raw kind."""
        rc, total, reserved, ratio, min_unit, max_unit, step, n = row
        return (rc, rules.inventory(total, reserved, ratio, min_unit,
                                    max_unit, step, n,
                                    single_precision=self._mysql),
                rc_names[rc],
                rules.room(int((total - reserved) * ratio), n, max_unit))

    def _model(self, rid):
        """The model.Provider of provider ``rid`` (see ProviderModels):
        its record's when it has one, else made from the snapshot's
        columns without one."""
        if rid in self.changed or rid in self._cache:
            rec = self.rps[rid]
            return _provider(rid, rec.uuid, rec.parent, rec.root,
                             self.kinds[rec.kind])
        base = self.base
        pos = base.pos_of(rid)
        if pos is None:
            raise KeyError(rid)
        return _provider(rid, base.uuid_at(pos), base.parent[pos] or None,
                         base.root[pos], self.kinds[base.kind[pos]])

    def _make(self, pos):
        """The Rec of the snapshot's provider at ``pos``, kept a while."""
        base = self.base
        k = base.kind[pos]
        rid = base.ids[pos]
        rec = self._cache[rid] = Rec(rid, base.uuid_at(pos),
                                     base.parent[pos] or None,
                                     base.root[pos], self.kinds[k], k)
        return rec

    def _apply(self, ctx, conn, ids):
        """Read providers ``ids`` again, over the snapshot."""
        rps, invs, usage, traits, aggs = self._read(conn, ids)
        for rid in ids:
            self._drop(rid)
        raws = snapshot.kinds_of(invs, usage, traits, aggs)
        names = self._names(ctx)
        for rid, uuid, parent, root in sorted(rps):
            k = self._kind(raws.get(rid, snapshot.NO_KIND), names)
            self._add(Rec(rid, uuid, parent, snapshot.root_or_self(rid, root),
                          self.kinds[k], k))

    def _tree_to_edit(self, root):
        ids = self._tree_ov.get(root)
        if ids is None:
            ids = self._tree_ov[root] = self.trees.get(root, [])
        return ids

    def _add(self, rec):
        self.changed[rec.id] = rec
        self._uuid_ov[rec.uuid] = rec.id
        self.count += 1
        tree = self._tree_to_edit(rec.root)
        if not tree:
            self.roots.insert(bisect.bisect_left(self.roots, rec.root),
                              rec.root)
        bisect.insort(tree, rec.id)
        self._edited(rec, True)

    def _drop(self, rp_id):
        rec = self.rps.get(rp_id)
        if rec is None:
            return
        self.changed[rp_id] = None
        if self._uuid_ov.get(rec.uuid) == rp_id:
            del self._uuid_ov[rec.uuid]
        self._cache.pop(rp_id, None)
        self.models.pop(rp_id, None)
        self.count -= 1
        tree = self._tree_to_edit(rec.root)
        tree.remove(rp_id)
        if not tree:
            self.roots.pop(bisect.bisect_left(self.roots, rec.root))
        self._edited(rec, False)

    def _edited(self, rec, present):
        self._edited_roots.append(rec.root)
        if rec.parent is not None:
            self.children += 1 if present else -1
        self.tree_traits.pop(rec.root, None)
        self._ov_runs.pop(rec.root, None)
        self._made_trees.pop(rec.root, None)
        self._searched.pop(rec.root, None)
        self._layouts.pop(rec.root, None)
        if self._per_tree is not None:
            self._per_tree.touch(rec.root)
        self.by_trait.edit(rec.traits, rec.id, present)
        self.by_agg.edit(rec.aggs, rec.id, present)

    # -- what a search asks -------------------------------------------------

    def fits(self, amounts):
        """{index of a Kind: what its inventory serves of ``amounts``}, a
        search's memo (search._Request._fitting) for one group's amounts,
        kept as long as the kinds: a Kind never changes once made (a new
        inventory or usage is a new one)."""
        memo = self._fits.get(amounts)
        if memo is None:
            if len(self._fits) >= _FIT_MEMOS:
                self._fits = {}
            memo = self._fits[amounts] = {}
        return memo

    def tree_kinds(self, root):
        """The kinds of the providers of the tree under ``root``, in id
        order (a tuple; empty if there is no such tree)."""
        ids = self._tree_ov.get(root)
        if ids is None:
            start, end = self.base.tree(root)
            return tuple(self.base.kind[start:end])
        return self._changed_tree(root, ids)[0]

    def kinds_by_tree(self):
        """(root, tree_kinds) of every tree: the snapshot's unchanged
        trees read from its kind column in one pass."""
        base, overlay = self.base, self._tree_ov
        kinds = base.kind.tolist()
        starts = base.tstart.tolist()
        for i, root in enumerate(base.troot):
            if root not in overlay:
                yield root, kinds[starts[i]:starts[i + 1]]
        for root, ids in overlay.items():
            if ids:
                yield root, self._changed_tree(root, ids)[0]

    def _changed_tree(self, root, ids):
        """(kinds, over) of the tree under ``root``, changed since the
        snapshot (its providers ``ids``), kept until it changes again: its
        kinds (tree_kinds) and what _changed_in_run says of it."""
        known = self._ov_runs.get(root)
        if known is None:
            start, end = self.base.tree(root)
            over = self._changed_in_run(start, end, ids)
            if over is None:
                rps = self.rps
                kinds = tuple(rps[rid].kind for rid in ids)
            else:
                kinds = self.base.kind[start:end].tolist()
                for i, rec in over:
                    kinds[i] = rec.kind
                kinds = tuple(kinds)
            known = self._ov_runs[root] = (kinds, over)
        return known

    def _changed_in_run(self, start, end, ids):
        """[(position, Rec)] of the providers changed since the snapshot
        among ``ids``, a changed tree's providers (by id), when they are
        the snapshot's run ``start`` to ``end`` -- a write changed a
        provider's usage, not who is in the tree: the tree is then the
        run's columns with those put over them, no record made for the
        others (the rest of a tree of 19 would cost 40 us to make). None
        when the tree's providers are not the run's."""
        if self.base.ids[start:end].tolist() != ids:
            return None
        return [(i, rec) for i, rec in enumerate(map(self.changed.get, ids))
                if rec is not None]

    def tree_rows(self, roots, classes=None):
        """(ids, kinds, roots): the providers of the trees under
        ``roots`` (the trees unchanged since the snapshot first, in the
        order of ``roots``, then the others), a tree's by id; the index of
        each one's kind and its root; with ``classes`` (class ids), only
        those with inventory of one of them.

        The trees unchanged since the snapshot are runs of its positions
        (a walk's roots one after another make one run; a random sample's
        are scattered, each found in the snapshot's tree_at): they are
        read together at C speed, and the providers with none of
        ``classes`` left out by the snapshot's cls column (of a tree of
        19, the one a request for VCPU and MEMORY_MB reads)."""
        base = self.base
        overlay = self._tree_ov
        tstart = base.tstart
        keep = None if classes is None else self._class_filter(classes)
        out = ids, kinds, tree_roots = [], [], []
        if type(roots) is not list:
            roots = list(roots)
        changed = ()
        if overlay:
            changed = [root for root in roots if root in overlay]
            if changed:
                roots = [root for root in roots if root not in overlay]
        found = [i for i in map(base.tree_at.get, roots) if i is not None]
        if found:
            if found == list(range(found[0], found[0] + len(found))):
                # Trees one after another: one run.
                starts, ends = [tstart[found[0]]], [tstart[found[-1] + 1]]
            else:
                starts = list(map(tstart.__getitem__, found))
                ends = list(map(tstart.__getitem__, map((1).__add__, found)))
            self._read_runs(starts, ends, keep, *out)
        serving = None if keep is None or not changed else \
            self._kinds_serving(classes).__getitem__
        for root in changed:
            mine = overlay[root]
            mine_kinds = self.tree_kinds(root)
            if serving is not None:
                serves = list(map(serving, mine_kinds))
                mine = list(itertools.compress(mine, serves))
                mine_kinds = list(itertools.compress(mine_kinds, serves))
            ids += mine
            kinds += mine_kinds
            tree_roots += [root] * len(mine)
        return out

    def _read_runs(self, starts, ends, keep, *out):
        """Append to ``out`` (ids, kinds, roots) the snapshot's providers
        at positions ``starts`` to ``ends``, those whose cls ``keep`` (a
        _class_filter) keeps."""
        base = self.base
        columns = (base.ids, base.kind, base.root)
        slices = list(map(slice, starts, ends))
        if keep is not None and len(slices) == 1:
            kept = _ones(bytes(base.cls[slices[0]]).translate(keep),
                         starts[0])
        elif keep is not None:
            # Trees apart (a random sample's, a walk's between changed
            # trees): the positions kept found in each tree's run of the
            # marks, a C call or two each.
            find = self._marks(keep).find
            kept = []
            for start, end in zip(starts, ends):
                at = find(1, start, end)
                while at >= 0:
                    kept.append(at)
                    at = find(1, at + 1, end)
        if keep is not None:
            for to, column in zip(out, columns):
                to += map(column.__getitem__, kept)
        elif len(slices) == 1:
            for to, column in zip(out, columns):
                to += column[slices[0]].tolist()
        else:
            for to, column in zip(out, columns):
                to += memoryview(b''.join(map(
                    column.__getitem__, slices))).cast(column.format).tolist()

    def _class_filter(self, classes):
        """bytes.translate's table for the snapshot's cls column: 1 for
        the sets of classes with one of ``classes`` (a frozenset), and for
        a set the column does not name."""
        table = self._class_filters.get(classes)
        if table is None:
            if len(self._class_filters) >= _FIT_MEMOS:
                self._class_filters = {}
            sets = self.base.class_sets
            table = self._class_filters[classes] = bytes(
                i >= len(sets) or not classes.isdisjoint(sets[i])
                for i in range(256))
        return table

    def _marks(self, keep):
        """The snapshot's cls column through ``keep`` (a _class_filter):
        1 at the positions it keeps. A byte per provider: a few are kept
        (a megabyte each at a million providers)."""
        marks = self._class_marks.get(keep)
        if marks is None:
            if len(self._class_marks) >= _MARKS:
                self._class_marks = {}
            marks = self._class_marks[keep] = bytes(self.base.cls).translate(
                keep)
        return marks

    def _kinds_serving(self, classes):
        """1 at the index of each Kind with inventory of one of
        ``classes`` (a bytearray, extended as kinds are made: a Kind
        never changes)."""
        marks = self._kind_marks.get(classes)
        if marks is None:
            if len(self._kind_marks) >= _FIT_MEMOS:
                self._kind_marks = {}
            marks = self._kind_marks[classes] = bytearray()
        kinds = self.kinds
        if len(marks) < len(kinds):
            marks.extend(not classes.isdisjoint(kind.inv)
                         for kind in kinds[len(marks):])
        return marks

    def roots_with_each(self, wanted):
        """The roots, in id order, of the trees that have, for each (of,
        keys) of ``wanted`` (a frozenset), a provider with one of ``keys``
        (a frozenset of trait ids, ``of`` 'trait'; of aggregate ids,
        'agg'). None when those are most of the trees (_MOST_TREES): a
        walk finds their candidates about as soon without the list, which
        costs a pass over it.

        The snapshot's trees are judged once per snapshot, from its
        indexes; the trees changed since, when first asked and then as
        they change (the roots edited since the last ask,
        ``_edited_roots``, judged again). A request pays for neither: only
        a pass leaving the changed trees' snapshot state out."""
        overlay = self._tree_ov
        log = self._edited_roots
        entry = self._each.get(wanted)
        if entry is None:
            if len(self._each) >= _EACH_MEMOS:
                self._each = {}
            entry = self._each[wanted] = [
                self._base_roots_with_each(wanted),
                {root for root in overlay
                 if self._tree_has_each(root, wanted)},
                len(log)]
        base, changed, seen = entry
        if base is None or not overlay:
            return base
        if seen < len(log):
            for root in set(log[seen:]):
                if root in overlay and self._tree_has_each(root, wanted):
                    changed.add(root)
                else:
                    changed.discard(root)
            entry[2] = len(log)
        out = [root for root in base if root not in overlay]
        if changed:
            out += changed
            out.sort()
        return out

    def _base_roots_with_each(self, wanted):
        """roots_with_each of the snapshot alone (an array, or None)."""
        base = self.base
        sets = []
        for of, keys in wanted:
            roots = set()
            for key in keys:
                roots.update(base.members(of, key, 'roots'))
            sets.append(roots)
        sets.sort(key=len)
        found = sets[0].intersection(*sets[1:])
        if len(found) >= _MOST_TREES * len(base.troot):
            return None
        return array.array('q', sorted(found))

    def _tree_has_each(self, root, wanted):
        kinds = [self.kinds[k] for k in set(self.tree_kinds(root))]
        return all(any(not keys.isdisjoint(
            kind.traits if of == 'trait' else kind.aggs) for kind in kinds)
            for of, keys in wanted)

    def _traits_in_tree(self, root):
        kinds = self.kinds
        return frozenset().union(*(kinds[k].traits
                                   for k in set(self.tree_kinds(root))))

    def root_of(self, uuid, any_case=False):
        """The root id of the tree of provider ``uuid`` (in_tree), None if
        there is none; ``any_case``: MySQL's collation matches a uuid in
        any case."""
        found = self.by_uuid.ids(uuid, any_case)
        return self.rps[found[0]].root if found else None

    def per_tree(self):
        """PerTree of this world: counted on first use after a full load,
        then for the trees changed since."""
        if self._per_tree is None:
            self._per_tree = per_tree.PerTree(self)
        return self._per_tree

    def answer(self, cands, rendered_as=None):
        """model.Providers of an answer: those ``cands`` pick, and the
        Trees of those they allocate from. Made here, under the lock: the
        handler renders them after it is released. With ``rendered_as``,
        the key of the caller's rendering (render_trees_with), the trees
        unchanged since the snapshot come rendered (``rendered``: runs of
        them, see Snapshot.rendered) when the snapshot's file holds that
        rendering, not as Trees."""
        models = self.models
        provs = {rid: models[rid] for rid in model.picked_providers(cands)}
        roots = {provs[rid].root_id
                 for rid in model.allocated_providers(cands)}
        runs = ()
        base = self.base
        if rendered_as is not None and base.rendered_key == rendered_as:
            changed = self._tree_ov
            runs, missing = base.rendered(sorted(
                root for root in roots if root not in changed))
            if runs:
                roots = [root for root in roots if root in changed]
                roots += missing
        return model.Providers(provs, {root: self.tree(root)
                                       for root in roots},
                               rendered=runs)

    def searches(self, request):
        """The searches of trees for ``request`` (a key naming all a
        search under one anchor reads of a request, see search.py): the
        combiner's picks under a root, kept until the tree changes
        (_edited) -- a thousand anchors of nova's NUMA-aware requests,
        request after request, most trees unchanged since."""
        return _Searches(self, request)

    def tree(self, root):
        """The model.Tree of the tree under ``root``, kept until the tree
        changes: a tree's providers are made only for its summaries, from
        the snapshot's columns (the combiner makes the few it looks at).
        Its Layout is the snapshot's shape of the tree, or worked out and
        kept per root until the tree changes."""
        tree = self._made_trees.get(root)
        if tree is not None:
            return tree
        start, end, shape = self.base.tree_and_shape(root)
        mine = self._tree_ov.get(root)
        if mine is None and shape >= 0:
            tree = self._base_tree(start, end, shape)
        else:
            tree = self._other_tree(root, start, end, shape, mine)
        self._made_trees[root] = tree
        self._made_trees_size += len(tree.parts)
        return tree

    def _other_tree(self, root, start, end, shape, mine):
        """tree() of a tree changed since the snapshot (its providers
        ``mine``), or with a parent in another tree (``shape`` -1)."""
        base = self.base
        if mine is None:
            ids = None
            uuids = base.uuids_between(start, end)
            kinds = base.kind[start:end].tolist()
            layout = None
            canonical = base.canonical
        else:
            ids = mine
            kinds, over = self._changed_tree(root, mine)
            uuids, parent_ids, same, canonical = self._tree_columns(
                start, end, mine, over)
            layout = self._shapes[shape] if same and shape >= 0 else None
        if layout is None:
            layout = self._layouts.get(root)
        if layout is not None:
            return model.Tree(uuids, kinds, layout, canonical=canonical,
                              table=self._parts)
        if ids is None:
            ids = base.ids[start:end].tolist()
            parent_ids = base.parent[start:end].tolist()
        tree = model.Tree.of(ids, uuids, kinds, parent_ids, root,
                             self._uuid, table=self._parts)
        if tree.layout.size == len(ids):
            self._layouts[root] = tree.layout
        return tree

    def _base_tree(self, start, end, shape):
        """The model.Tree of the snapshot's tree at positions ``start`` to
        ``end``, of shape ``shape`` (not -1): as the snapshot has it."""
        base = self.base
        return model.Tree(base.uuids_between(start, end),
                          base.kind[start:end].tolist(), self._shapes[shape],
                          canonical=base.canonical, table=self._parts)

    def _tree_columns(self, start, end, ids, over):
        """(uuids, parent ids, same, canonical) of the providers ``ids``
        of a tree changed since the snapshot, whose run there is ``start``
        to ``end`` (``over``: _changed_in_run's); ``same``: the providers
        and parents are the run's; ``canonical``: every uuid is known
        canonical (model.Tree). Mostly the snapshot's own (a write changes
        one provider's usage, not the tree): read from its columns, with
        what changed put over them (no record made for the others)."""
        base = self.base
        if over is not None:
            uuids = list(base.uuids_between(start, end))
            parents = base.parent[start:end].tolist()
            same = canonical = True
            for i, rec in over:
                uuids[i] = rec.uuid.encode()
                same = same and (rec.parent or 0) == parents[i]
                canonical = canonical and snapshot.canonical(uuids[i])
                parents[i] = rec.parent
            return uuids, parents, same, canonical and base.canonical
        recs = list(map(self.rps.__getitem__, ids))
        return ([rec.uuid.encode() for rec in recs],
                [rec.parent for rec in recs], False, False)

    def _uuid(self, rid):
        """The uuid of provider ``rid`` (encoded), None if there is none."""
        rec = self.rps.get(rid)
        return rec.uuid.encode() if rec is not None else None


# What World._read reads, and the column naming each row's provider.
_READS = (
    (sa.select(_RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id,
               _RP.c.root_provider_id), _RP.c.id),
    (sa.select(_INV.c.resource_provider_id, _INV.c.resource_class_id,
               _INV.c.total, _INV.c.reserved, _INV.c.allocation_ratio,
               _INV.c.min_unit, _INV.c.max_unit, _INV.c.step_size),
     _INV.c.resource_provider_id),
    (sa.select(_ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id,
               sa.func.sum(_ALLOC.c.used)).group_by(
        _ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id),
     _ALLOC.c.resource_provider_id),
    (sa.select(_RPT.c.resource_provider_id, _RPT.c.trait_id),
     _RPT.c.resource_provider_id),
    (sa.select(_RPA.c.resource_provider_id, _RPA.c.aggregate_id),
     _RPA.c.resource_provider_id),
)
# The same of the providers of a chunk of ids, written into the statement
# as numbers: a catch-up reads ten thousand providers in 20 chunks, and as
# 500 bound parameters each the client spends twice as long on them as
# the database on the rows.
_IDS = sa.bindparam('ids', expanding=True, literal_execute=True)
_READS_OF_IDS = tuple(stmt.where(col.in_(_IDS)) for stmt, col in _READS)


def _all_rows(conn, stmt):
    """Every row of ``stmt`` (which has no parameters) as the driver's
    tuples, on ``conn``'s connection and transaction: a full load reads
    millions of rows, and SQLAlchemy's Row objects cost more than the
    driver's reading them (4.3 s against 1.3 s at a million providers)."""
    cursor = conn.connection.driver_connection.cursor()
    try:
        cursor.execute(str(stmt.compile(dialect=conn.dialect)))
        return cursor.fetchall()
    finally:
        cursor.close()


# (key, render): what renders a model.Tree's provider summaries for the
# node's snapshot file (render_trees_with).
_RENDERER = None


def render_trees_with(key, render):
    """Have the snapshot files written from now on end with every tree
    rendered by ``render`` (an iterable of model.Tree, or None for a tree
    it need not render -> one bytes each), as ``key`` (see
    World.answer). The handler registers its rendering at the current
    microversions: the objects know no JSON."""
    global _RENDERER
    _RENDERER = (key, render)


def configure(conf):
    """Where this process shares its worlds (``[candidates]`` options)."""
    global SHARED_DIR
    SHARED_DIR = None
    if conf.candidates.share_world:
        SHARED_DIR = (conf.candidates.world_dir or
                      snapshot.default_directory())


# engine -> World
_WORLDS = weakref.WeakKeyDictionary()
_WORLDS_LOCK = threading.Lock()


def for_connection(conn):
    """This process's World of the database ``conn`` reads; None if that
    database does not count its changes (see changes.counted)."""
    if not changes.counted(conn):
        return None
    engine = conn.engine
    world = _WORLDS.get(engine)
    if world is None:
        with _WORLDS_LOCK:
            world = _WORLDS.setdefault(engine, World())
    return world
