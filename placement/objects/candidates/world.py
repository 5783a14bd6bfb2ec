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

A full load happens on first use, when the database's epoch changes (a
new database, a renamed resource class or trait, ``placement-manage
reload``), when this process is further behind than the change log keeps,
when more changed than half its providers (cheaper to read them all), and
when the log was pruned between its two reads. Each is logged at INFO
and counted in /metrics.
"""
import bisect
import collections
import threading
import time
import weakref

from oslo_log import log as logging
import prometheus_client
import sqlalchemy as sa

from placement.db import models
from placement.objects.candidates import model
from placement.objects.candidates import rules
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


class Rec:
    """One provider as the search reads it.

    ``inv`` is {class id: rules.Inventory}, its limit rounded as the
    database rounds it; ``traits`` and ``aggs`` are frozensets of ids;
    ``prov`` is the model.Provider handed to the combiner and the
    summaries.
    Never changed once made: a refresh replaces it."""

    __slots__ = ('id', 'uuid', 'parent', 'root', 'inv', 'traits', 'aggs',
                 'prov')

    def __init__(self, id, uuid, parent, root):
        self.id = id
        self.uuid = uuid
        self.parent = parent
        self.root = root
        self.inv = {}
        self.traits = frozenset()
        self.aggs = frozenset()
        self.prov = None


class PerTree:
    """The most providers one tree has with inventory of a class
    (``most``; class None: providers of any kind), or with a trait
    (``most_with_trait``): true bounds on the choices a root offers a
    group, which the random sample needs (search._Request.bound,
    sample.py). Counts, not capacity, so usage changes leave them alone.

    Kept per tree as a summary shared by alike trees (a cloud's trees are
    alike: little memory), and settled for the trees changed since
    (``touch``) when next asked."""

    _ANY = (0, None)

    def __init__(self, world):
        self.world = world
        # root -> ((key, providers), ...): key (0, None) for the tree's
        # size, (1, class id), (2, trait id)
        self.of_tree = {}
        # key -> {providers in one tree: trees with that many}
        self.trees = collections.defaultdict(collections.Counter)
        # key -> the roots of the trees with at least one such provider
        self.roots = collections.defaultdict(set)
        self.changed = set(world.trees)
        self._same = {}

    def touch(self, root):
        self.changed.add(root)

    def _settle(self):
        world = self.world
        rps = world.rps
        hists = self.trees
        for root in self.changed:
            for key, n in self.of_tree.pop(root, ()):
                hist = hists[key]
                hist[n] -= 1
                if not hist[n]:
                    del hist[n]
                self.roots[key].discard(root)
            ids = world.trees.get(root)
            if not ids:
                continue
            counts = collections.Counter()
            counts[self._ANY] = len(ids)
            for rid in ids:
                rec = rps[rid]
                counts.update((1, rc) for rc in rec.inv)
                counts.update((2, tid) for tid in rec.traits)
            summary = tuple(sorted(counts.items()))
            summary = self.of_tree[root] = self._same.setdefault(summary,
                                                                 summary)
            for key, n in summary:
                hists[key][n] += 1
                self.roots[key].add(root)
        self.changed.clear()

    def _most(self, key):
        if self.changed:
            self._settle()
        hist = self.trees.get(key)
        return max(hist) if hist else 0

    def most(self, rc):
        """The most providers with class ``rc`` (None: any) in one tree;
        0 if none has it."""
        return self._most(self._ANY if rc is None else (1, rc))

    def most_with_trait(self, trait_id):
        return self._most((2, trait_id))

    def roots_with(self, rc):
        """The roots of the trees with a provider of class ``rc``."""
        if self.changed:
            self._settle()
        return self.roots.get((1, rc), ())


class World:
    """Every provider of one database, and the change counters it
    reflects. ``lock`` is held while refreshing and while a search
    reads."""

    def __init__(self):
        self.lock = threading.RLock()
        self.epoch = None
        self.slots = {}
        self.rps = {}                               # id -> Rec
        self.trees = {}                             # root id -> [ids]
        self.roots = []                             # sorted root ids
        self.by_trait = collections.defaultdict(set)    # trait id -> ids
        self.by_agg = collections.defaultdict(set)      # agg id -> ids
        self.by_uuid = {}                           # uuid -> id
        self.children = 0                           # providers w/ parent
        # root id -> frozenset of the trait ids in its tree, on first use.
        self.tree_traits = model.OnFirstUse(self._traits_in_tree)
        self._per_tree = None                       # see per_tree()
        self.loads = 0                              # full loads (tests)

    # -- the change check -------------------------------------------------

    def refresh(self, ctx, conn):
        """Bring the world up to every change committed so far."""
        start = time.perf_counter()
        epoch, current = changes.counters(conn)
        why = None
        if not self.loads:
            why = 'first use'
        elif epoch != self.epoch:
            why = 'new epoch'
        else:
            why = self._catch_up(ctx, conn, current)
        if why is not None:
            self._load(ctx, conn, None)
            LOG.info('Allocation candidates: loaded %d providers (%s) in '
                     '%.3f s.', len(self.rps), why,
                     time.perf_counter() - start)
            FULL_LOADS.labels(why).inc()
            PROVIDERS_READ.inc(len(self.rps))
        self.epoch = epoch
        self.slots = current
        REFRESH_SECONDS.inc(time.perf_counter() - start)

    def _catch_up(self, ctx, conn, current):
        """Read again the providers logged since the counters this world
        reflects; the reason to load everything instead, or None."""
        behind = changes.behind(self.slots, current)
        if behind == 0:
            return None
        if behind is None:
            return 'behind the change log'
        if behind > max(_CHUNK, len(self.rps) // 2):
            # Reading the log and then most providers by id costs more
            # than reading every provider at once.
            return 'more changes than half the providers'
        ids = changes.logged(conn, self.slots, current)
        if ids is None:
            return 'change log pruned while read'
        self._load(ctx, conn, ids)
        PARTIAL_LOADS.inc()
        PROVIDERS_READ.inc(len(ids))
        return None

    def read_all(self, ctx, conn):
        """Read every provider, with no change check: a world of its own
        for a database that does not count its changes (explain)."""
        self._load(ctx, conn, None)

    # -- loading ----------------------------------------------------------

    def _read(self, conn, ids):
        """Rows of providers ``ids`` (all of them if None)."""
        def chunks():
            if ids is None:
                yield None
                return
            ordered = sorted(ids)
            for i in range(0, len(ordered), _CHUNK):
                yield ordered[i:i + _CHUNK]

        rps, invs, usage, traits, aggs = [], [], [], [], []
        for chunk in chunks():
            def only(col):
                return [] if chunk is None else [col.in_(chunk)]
            rps += conn.execute(sa.select(
                _RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id,
                _RP.c.root_provider_id).where(*only(_RP.c.id))).all()
            invs += conn.execute(sa.select(
                _INV.c.resource_provider_id, _INV.c.resource_class_id,
                _INV.c.total, _INV.c.reserved, _INV.c.allocation_ratio,
                _INV.c.min_unit, _INV.c.max_unit, _INV.c.step_size).where(
                *only(_INV.c.resource_provider_id))).all()
            usage += conn.execute(sa.select(
                _ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id,
                sa.func.sum(_ALLOC.c.used)).where(
                *only(_ALLOC.c.resource_provider_id)).group_by(
                _ALLOC.c.resource_provider_id,
                _ALLOC.c.resource_class_id)).all()
            traits += conn.execute(sa.select(
                _RPT.c.resource_provider_id, _RPT.c.trait_id).where(
                *only(_RPT.c.resource_provider_id))).all()
            aggs += conn.execute(sa.select(
                _RPA.c.resource_provider_id, _RPA.c.aggregate_id).where(
                *only(_RPA.c.resource_provider_id))).all()
        return rps, invs, usage, traits, aggs

    def _load(self, ctx, conn, ids):
        """Read providers ``ids`` again (every provider if None).

        Equal values are stored once (``same``): most providers of a
        cloud have the same traits, aggregates and inventories, so this
        keeps a large world small (see doc/source/candidates-engine.rst)."""
        rps, invs, usage, traits, aggs = self._read(conn, ids)
        everything = ids is None
        if everything:
            self.rps = {}
            self.trees = {}
            self.roots = []
            self.by_trait = collections.defaultdict(set)
            self.by_agg = collections.defaultdict(set)
            self.by_uuid = {}
            self.children = 0
            self.tree_traits.clear()
            self._per_tree = None
            self.loads += 1
        else:
            for rp_id in ids:
                self._drop(rp_id)
        same = {}

        def once(value):
            return same.setdefault(value, value)

        rc_names = model.OnFirstUse(
            lambda rc: rc_obj.name_for_id(ctx, rc))
        trait_names = model.OnFirstUse(
            lambda tid: trait_obj.name_for_id(ctx, tid))
        mysql = conn.dialect.name == 'mysql'
        used = {(rid, rc): int(n or 0) for rid, rc, n in usage}
        inv = collections.defaultdict(list)
        for rid, rc, total, reserved, ratio, min_unit, max_unit, step in invs:
            n = used.get((rid, rc), 0)
            inv[rid].append((rc, once(rules.inventory(
                total, reserved, ratio, min_unit, max_unit, step, n,
                single_precision=mysql)), once(rules.room(
                    int((total - reserved) * ratio), n, max_unit))))
        trait_ids = collections.defaultdict(list)
        for rid, tid in traits:
            trait_ids[rid].append(tid)
        agg_ids = collections.defaultdict(list)
        for rid, aid in aggs:
            agg_ids[rid].append(aid)
        listed = {}
        for rid, uuid, parent, root in sorted(rps):
            # A provider written before nested providers, not migrated
            # yet, is its own root.
            rec = Rec(rid, uuid, parent, root if root is not None else rid)
            tids = tuple(sorted(trait_ids.get(rid, ())))
            names = listed.get(tids)
            if names is None:
                # In trait id order: see model.Traits.
                names = listed[tids] = model.Traits(
                    [trait_names[t] for t in tids])
            rec.traits = once(frozenset(tids))
            rec.aggs = once(frozenset(agg_ids.get(rid, ())))
            mine = sorted(inv.get(rid, ()))
            rec.inv = once(tuple((rc, limits) for rc, limits, _ in mine))
            inventory = once(tuple((rc_names[rc], caps)
                                   for rc, _, caps in mine))
            # Dicts for the search, one per distinct inventory.
            rec.inv = same.setdefault(('inv', rec.inv), dict(rec.inv))
            rec.prov = model.Provider(
                rid, uuid, parent, rec.root, traits=names,
                inventory=same.setdefault(('prov', inventory),
                                          dict(inventory)))
            self._add(rec, everything)
        if everything:
            self.roots = sorted(self.trees)

    def _add(self, rec, bulk=False):
        """Index ``rec``; ``bulk``: in id order during a full load, which
        sorts the roots once at the end."""
        self.rps[rec.id] = rec
        self.tree_traits.pop(rec.root, None)
        self.by_uuid[rec.uuid] = rec.id
        tree = self.trees.get(rec.root)
        if tree is None:
            tree = self.trees[rec.root] = []
            if not bulk:
                bisect.insort(self.roots, rec.root)
        if bulk:
            tree.append(rec.id)
        else:
            bisect.insort(tree, rec.id)
        if rec.parent is not None:
            self.children += 1
        if self._per_tree is not None:
            self._per_tree.touch(rec.root)
        for tid in rec.traits:
            self.by_trait[tid].add(rec.id)
        for aid in rec.aggs:
            self.by_agg[aid].add(rec.id)

    def _drop(self, rp_id):
        rec = self.rps.pop(rp_id, None)
        if rec is None:
            return
        del self.by_uuid[rec.uuid]
        self.tree_traits.pop(rec.root, None)
        tree = self.trees[rec.root]
        tree.remove(rp_id)
        if not tree:
            del self.trees[rec.root]
            self.roots.pop(bisect.bisect_left(self.roots, rec.root))
        if rec.parent is not None:
            self.children -= 1
        if self._per_tree is not None:
            self._per_tree.touch(rec.root)
        for tid in rec.traits:
            self.by_trait[tid].discard(rp_id)
        for aid in rec.aggs:
            self.by_agg[aid].discard(rp_id)

    # -- what a search asks -------------------------------------------------

    def _traits_in_tree(self, root):
        return frozenset().union(*(self.rps[rid].traits
                                   for rid in self.trees.get(root, ())))

    def root_of(self, uuid, any_case=False):
        """The root id of the tree of provider ``uuid`` (in_tree), None if
        there is none; ``any_case``: MySQL's collation matches a uuid in
        any case."""
        rid = self.by_uuid.get(uuid)
        if rid is None and any_case:
            wanted = uuid.lower()
            rid = next((i for u, i in self.by_uuid.items()
                        if u.lower() == wanted), None)
        return None if rid is None else self.rps[rid].root

    def per_tree(self):
        """PerTree of this world: counted on first use after a full load,
        then for the trees changed since."""
        if self._per_tree is None:
            self._per_tree = PerTree(self)
        return self._per_tree

    def tree_providers(self, roots):
        """{id: model.Provider} of the whole trees under ``roots``."""
        out = {}
        rps = self.rps
        for root in roots:
            for rid in self.trees.get(root, ()):
                out[rid] = rps[rid].prov
        return out


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
