"""The model of the freshness check (freshness.py): what the database
holds (Snapshot) and the random writes made from it -- through the API
(ApiWrites, by our processes or upstream's), by hand in SQL (SqlWrites)
and by placement-manage (ManageWrites). Most writes are valid; some are
refused (a stale generation, inventory in use, a cycle...), which must
change nothing.
"""
import collections
import json
import uuid as uuidlib

import sqlalchemy as sa

from placement.db import models

# The newest microversion (ours and upstream 16.0.0).
LATEST = 39

_RP, _INV, _ALLOC = models.RP, models.INV, models.ALLOC
_RPT, _RPA, _AGG = models.RPT, models.RPA, models.AGG
_TRAIT, _RC, _CONSUMER = models.TRAIT, models.RC, models.CONSUMER

# What the random writes and queries pick from.
STANDARD_RCS = ['VCPU', 'MEMORY_MB', 'DISK_GB']
CUSTOM_RCS = ['CUSTOM_GPU', 'CUSTOM_FPGA', 'CUSTOM_NIC', 'CUSTOM_PMEM',
              'CUSTOM_QAT']
SHARES = 'MISC_SHARES_VIA_AGGREGATE'
STANDARD_TRAITS = ['HW_CPU_X86_AVX', 'STORAGE_DISK_SSD', SHARES]
CUSTOM_TRAITS = ['CUSTOM_A', 'CUSTOM_B', 'CUSTOM_C', 'CUSTOM_D']
# Names traits get renamed to by hand (the API cannot rename a trait).
RENAMED_TRAITS = ['CUSTOM_E', 'CUSTOM_F', 'CUSTOM_G']
AGGS = ['a99e0000-0000-4000-8000-00000000000%d' % i for i in range(4)]
PROJECTS = ['p0', 'p1']
USERS = ['u0', 'u1']
MIN_PROVIDERS, MAX_PROVIDERS = 5, 15
MAX_CONSUMERS = 12
MAX_CUSTOM_RCS = 4


def mv(minor):
    """Microversion 1.``minor``."""
    return '1.%d' % minor


def seeded_uuid(rnd):
    """A uuid from the run's seed (a run is replayed from its seed)."""
    return str(uuidlib.UUID(int=rnd.getrandbits(128), version=4))


# -- what the database holds -------------------------------------------------

class Snapshot:
    """The rows the random writes and queries are made from, read in one
    go from the database (whoever wrote them)."""

    def __init__(self, conn):
        self.dialect = conn.dialect.name
        self.rps = {r.id: r for r in conn.execute(sa.select(
            _RP.c.id, _RP.c.uuid, _RP.c.name, _RP.c.generation,
            _RP.c.parent_provider_id, _RP.c.root_provider_id))}
        self.rc_names = dict(conn.execute(
            sa.select(_RC.c.id, _RC.c.name)).all())
        self.rc_ids = {n: i for i, n in self.rc_names.items()}
        self.inv = {}           # (rp id, rc id) -> row
        for r in conn.execute(sa.select(
                _INV.c.resource_provider_id, _INV.c.resource_class_id,
                _INV.c.total, _INV.c.reserved, _INV.c.min_unit,
                _INV.c.max_unit, _INV.c.step_size,
                _INV.c.allocation_ratio)):
            self.inv[(r[0], r[1])] = r
        self.allocs = collections.defaultdict(dict)  # consumer -> {(rp,rc)}
        self.used = collections.Counter()           # (rp, rc) -> used
        for rp, consumer, rc, used in conn.execute(sa.select(
                _ALLOC.c.resource_provider_id, _ALLOC.c.consumer_id,
                _ALLOC.c.resource_class_id, _ALLOC.c.used)):
            self.allocs[consumer][(rp, rc)] = used
            self.used[(rp, rc)] += used
        self.consumer_gen = dict(conn.execute(sa.select(
            _CONSUMER.c.uuid, _CONSUMER.c.generation)).all())
        self.trait_names = dict(conn.execute(
            sa.select(_TRAIT.c.id, _TRAIT.c.name).where(sa.or_(
                _TRAIT.c.name.like('CUSTOM_%'),
                _TRAIT.c.name.in_(STANDARD_TRAITS)))).all())
        self.rp_traits = collections.defaultdict(set)
        for rp, tid in conn.execute(sa.select(_RPT.c.resource_provider_id,
                                              _RPT.c.trait_id)):
            self.rp_traits[rp].add(tid)
        self.agg_uuids = dict(conn.execute(
            sa.select(_AGG.c.id, _AGG.c.uuid)).all())
        self.agg_ids = {u: i for i, u in self.agg_uuids.items()}
        self.rp_by_uuid = {r.uuid: r.id for r in self.rps.values()}
        self.rp_aggs = collections.defaultdict(set)
        for rp, aid in conn.execute(sa.select(_RPA.c.resource_provider_id,
                                              _RPA.c.aggregate_id)):
            self.rp_aggs[rp].add(aid)

    # -- helpers --------------------------------------------------------------

    def custom_rcs(self):
        return sorted(n for n in self.rc_names.values()
                      if n.startswith('CUSTOM_'))

    def classes(self):
        """Names of the classes a provider could hold."""
        return STANDARD_RCS + self.custom_rcs()

    def custom_traits(self):
        return sorted(n for n in self.trait_names.values()
                      if n.startswith('CUSTOM_'))

    def traits(self):
        return sorted(self.trait_names.values())

    def children(self, rp_id):
        return [r.id for r in self.rps.values()
                if r.parent_provider_id == rp_id]

    def subtree(self, rp_id):
        out, todo = [], [rp_id]
        while todo:
            rid = todo.pop()
            out.append(rid)
            todo.extend(self.children(rid))
        return out

    def invs_of(self, rp_id):
        return {rc: row for (rp, rc), row in self.inv.items()
                if rp == rp_id}

    def free(self, rp_id, rc_id, consumer=None):
        """Units of ``rc_id`` left on ``rp_id`` (a consumer's own usage
        counts as free when it is being replaced)."""
        row = self.inv.get((rp_id, rc_id))
        if row is None:
            return 0
        cap = int((row.total - row.reserved) * row.allocation_ratio)
        used = self.used[(rp_id, rc_id)]
        if consumer is not None:
            used -= self.allocs.get(consumer, {}).get((rp_id, rc_id), 0)
        return cap - used

    def amount(self, rnd, rp_id, rc_id, consumer=None):
        """A valid amount to allocate; when none fits, and now and then,
        one the API refuses (over max_unit or capacity), in the column's
        range (SQL by hand uses it too)."""
        row = self.inv.get((rp_id, rc_id))
        if row is None:
            return rnd.randint(1, 4)
        top = min(row.max_unit, self.free(rp_id, rc_id, consumer))
        low = max(row.min_unit, row.step_size)
        low += (-low) % row.step_size
        if top < low or rnd.random() < 0.05:
            return rnd.choice([1, row.total, min(row.max_unit + 1,
                                                 2 ** 31 - 1)])
        steps = (top - low) // row.step_size
        return low + row.step_size * rnd.randint(0, min(steps, 3))


# -- writes ------------------------------------------------------------------

class Write:
    """One write: an API request (``method``, ``path``, ``version``,
    ``body``), SQL statements typed by hand (``sql``: [(text, params)]),
    a placement-manage command (``manage``: args; after the SQL when
    both are given), or an operator's act on the database (``act``: a
    function of the engine; freshness_operator). ``kind`` names it in
    counts and reports; ``writer`` (ours, upstream, hand, manage) and
    ``by`` (the process) are filled in when it runs."""

    def __init__(self, kind, method=None, path=None, version=None,
                 body=None, sql=None, manage=None, act=None):
        self.kind = kind
        self.act = act
        self.method, self.path, self.version = method, path, version
        self.body = body
        self.sql = sql
        self.manage = manage
        self.writer = self.by = None
        self.status = None

    def refused(self):
        """An API write answered 4xx (which must have changed nothing)."""
        return self.method is not None and self.status >= 400

    def request(self):
        # A service (the reshaper is for services only) and an admin.
        return {'method': self.method, 'path': self.path,
                'version': self.version, 'body': self.body,
                'headers': {'x-roles': 'admin,service'}}

    def __str__(self):
        if self.act is not None:
            what = 'the database\'s own tools'
        elif self.sql is not None:
            what = '; '.join('%s %s' % (t, p or '') for t, p in self.sql)
            if self.manage is not None:
                what += '; placement-manage ' + ' '.join(self.manage)
        elif self.manage is not None:
            what = 'placement-manage ' + ' '.join(self.manage)
        else:
            what = '%s %s @%s %s' % (self.method, self.path, self.version,
                                     json.dumps(self.body)
                                     if self.body is not None else '')
        return '[%s by %s -> %s] %s' % (self.kind, self.by, self.status,
                                        what)


def _tables(kind, tables):
    """The tables a write kind writes: the entry of ``tables`` for its
    longest prefix."""
    parts = kind.split('_')
    for n in range(len(parts), 0, -1):
        found = tables.get('_'.join(parts[:n]))
        if found is not None:
            return found
    return ()


def _pick(rnd, weights, tables, favour):
    """A kind by weight; ``favour`` (a table) makes the kinds writing it
    ten times likelier (to show its trigger is needed, sooner)."""
    kinds = list(weights)
    return rnd.choices(kinds, [
        weights[k] * (10 if favour in _tables(k, tables) else 1)
        for k in kinds])[0]


class ApiWrites:
    """Random API writes made from a Snapshot; ``make(rnd, snap)`` picks
    one by weight. Most are valid; some are refused (stale generation,
    in-use inventory, a cycle...), which must change nothing."""

    WEIGHTS = {
        'inventory_put_all': 8, 'inventory_post': 4, 'inventory_put_one': 6,
        'inventory_delete_one': 3, 'inventory_delete_all': 2,
        'allocation_put': 14, 'allocation_post': 7,
        'allocation_delete': 5,
        'provider_create': 4, 'provider_delete': 3, 'provider_parent': 4,
        'provider_rename': 1,
        'traits_set': 6, 'traits_delete': 2, 'trait_create': 1,
        'trait_delete': 1,
        'aggregates_set': 6,
        'class_create': 2, 'class_rename': 3, 'class_delete': 2,
        'reshape': 4,
    }

    # The tables each kind writes (see favour).
    TABLES = {
        'inventory': ('inventories',), 'allocation': ('allocations',),
        'reshape': ('inventories', 'allocations'),
        'provider': ('resource_providers',),
        'provider_delete': ('resource_providers', 'inventories',
                            'resource_provider_traits',
                            'resource_provider_aggregates'),
        'traits': ('resource_provider_traits',), 'trait': ('traits',),
        'aggregates': ('resource_provider_aggregates',),
        'class': ('resource_classes',),
    }

    def make(self, rnd, snap, favour=None):
        if len(snap.rps) < MIN_PROVIDERS:
            kind = 'provider_create'
        else:
            kind = _pick(rnd, self.WEIGHTS, self.TABLES, favour)
        return getattr(self, kind)(rnd, snap, kind)

    # -- pickers ------------------------------------------------------------

    @staticmethod
    def _rp(rnd, snap):
        return snap.rps[rnd.choice(sorted(snap.rps))]

    @staticmethod
    def _gen(rnd, gen):
        """The generation to send: now and then a stale one."""
        return gen - 1 if rnd.random() < 0.03 else gen

    def _inv_record(self, rnd, rc, with_class=False):
        total = {'VCPU': rnd.randint(1, 16),
                 'MEMORY_MB': rnd.choice([512, 1024, 2048, 4096]),
                 'DISK_GB': rnd.choice([10, 100, 500, 1000])}.get(
            rc, rnd.randint(1, 8))
        rec = {'total': total}
        if rnd.random() < 0.2:
            rec['reserved'] = rnd.choice([0, 1, total // 4])
        if rnd.random() < 0.2:
            rec['allocation_ratio'] = rnd.choice([1.0, 1.5, 2.0, 16.0, 0.5])
        if rnd.random() < 0.15:
            rec['max_unit'] = max(1, total // rnd.choice([1, 2, 4]))
        if rnd.random() < 0.1:
            rec['min_unit'] = rnd.choice([1, 2])
        if rnd.random() < 0.1:
            rec['step_size'] = rnd.choice([1, 2])
        if with_class:
            rec['resource_class'] = rc
        return rec

    def _classes(self, rnd, snap, n):
        classes = snap.classes()
        if rnd.random() < 0.03:
            classes = classes + ['CUSTOM_MISSING']
        return rnd.sample(classes, min(n, len(classes)))

    # -- inventories --------------------------------------------------------

    def inventory_put_all(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        have = [snap.rc_names[rc] for rc in snap.invs_of(rp.id)]
        # Keep what it has, mostly: inventory in use may not go.
        names = set(n for n in have if rnd.random() < 0.8)
        names.update(self._classes(rnd, snap, rnd.choice([0, 1, 1, 2])))
        return Write(kind, 'PUT', '/resource_providers/%s/inventories'
                     % rp.uuid, mv(rnd.randint(0, LATEST)), {
                         'resource_provider_generation':
                             self._gen(rnd, rp.generation),
                         'inventories': {n: self._inv_record(rnd, n)
                                         for n in sorted(names)}})

    def inventory_post(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        rc = self._classes(rnd, snap, 1)[0]
        body = self._inv_record(rnd, rc, with_class=True)
        body['resource_provider_generation'] = self._gen(rnd, rp.generation)
        return Write(kind, 'POST', '/resource_providers/%s/inventories'
                     % rp.uuid, mv(rnd.randint(0, LATEST)), body)

    def _held(self, rnd, snap):
        """(provider, class name) of an inventory, if any."""
        if not snap.inv:
            return None, None
        rp_id, rc_id = rnd.choice(sorted(snap.inv))
        return snap.rps[rp_id], snap.rc_names[rc_id]

    def inventory_put_one(self, rnd, snap, kind):
        rp, rc = self._held(rnd, snap)
        if rp is None:
            return self.inventory_post(rnd, snap, 'inventory_post')
        body = self._inv_record(rnd, rc)
        body['resource_provider_generation'] = self._gen(rnd, rp.generation)
        return Write(kind, 'PUT', '/resource_providers/%s/inventories/%s'
                     % (rp.uuid, rc), mv(rnd.randint(0, LATEST)), body)

    def inventory_delete_one(self, rnd, snap, kind):
        rp, rc = self._held(rnd, snap)
        if rp is None:
            return self.inventory_post(rnd, snap, 'inventory_post')
        return Write(kind, 'DELETE', '/resource_providers/%s/inventories/%s'
                     % (rp.uuid, rc), mv(rnd.randint(0, LATEST)))

    def inventory_delete_all(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        return Write(kind, 'DELETE', '/resource_providers/%s/inventories'
                     % rp.uuid, mv(rnd.randint(5, LATEST)))

    # -- allocations --------------------------------------------------------

    def _placement(self, rnd, snap, consumer, like=None, avoid=()):
        """{rp uuid: {class: amount}}: for each class of ``like``
        ({(rp, rc): used}, a consumer's allocations) or of 1-3 random
        inventories, a provider holding it (another one than before for
        the classes in ``avoid``)."""
        wanted = sorted({rc for _, rc in like}) if like else sorted(
            {rc for _, rc in rnd.sample(sorted(snap.inv),
                                        min(len(snap.inv),
                                            rnd.randint(1, 3)))})
        out = collections.defaultdict(dict)
        for rc in wanted:
            holders = [rp for (rp, c) in sorted(snap.inv) if c == rc]
            elsewhere = [rp for rp in holders
                         if (rp, rc) not in (like or {})]
            if rc in avoid and elsewhere:
                holders = elsewhere
            if not holders:
                continue
            rp = rnd.choice(holders)
            out[snap.rps[rp].uuid][snap.rc_names[rc]] = snap.amount(
                rnd, rp, rc, consumer)
        return dict(out)

    def _consumer(self, rnd, snap, existing=None):
        """(uuid, its generation or None): an existing consumer or a new
        one."""
        if existing is None:
            existing = (snap.allocs and rnd.random() < 0.75) or (
                len(snap.allocs) >= MAX_CONSUMERS)
        if existing and snap.allocs:
            c = rnd.choice(sorted(snap.allocs))
            return c, snap.consumer_gen.get(c)
        return seeded_uuid(rnd), None

    def _new_allocations(self, rnd, snap, consumer):
        """A new set of allocations for ``consumer``: a move (every class
        elsewhere), a partial replacement (some classes elsewhere, one
        added or dropped) or a fresh pick."""
        mine = snap.allocs.get(consumer)
        how = rnd.choice(['move', 'partial', 'fresh']) if mine else 'fresh'
        if how == 'move':
            return self._placement(rnd, snap, consumer, mine,
                                   avoid={rc for _, rc in mine}), how
        if how == 'partial':
            keep = {k: v for k, v in mine.items() if rnd.random() < 0.5}
            moved = {k: v for k, v in mine.items() if k not in keep}
            if moved and rnd.random() < 0.3:
                moved.pop(rnd.choice(sorted(moved)))       # dropped
            out = self._placement(rnd, snap, consumer, moved,
                                  avoid={rc for _, rc in moved}) if moved \
                else {}
            for (rp, rc), used in keep.items():
                if rp in snap.rps:
                    out.setdefault(snap.rps[rp].uuid, {})[
                        snap.rc_names.get(rc, 'CUSTOM_GONE')] = (
                        used if rnd.random() < 0.7
                        else snap.amount(rnd, rp, rc, consumer))
            if rnd.random() < 0.3:
                for u, res in self._placement(rnd, snap, consumer).items():
                    out.setdefault(u, {}).update(res)
            return out, how
        return self._placement(rnd, snap, consumer), how

    def _consumer_fields(self, rnd, minor, gen, body):
        if minor >= 8:
            body['project_id'] = rnd.choice(PROJECTS)
            body['user_id'] = rnd.choice(USERS)
        if minor >= 28:
            body['consumer_generation'] = (self._gen(rnd, gen)
                                           if gen is not None else None)
        if minor >= 38:
            body['consumer_type'] = rnd.choice(['INSTANCE', 'MIGRATION'])
        return body

    def allocation_put(self, rnd, snap, kind):
        consumer, gen = self._consumer(rnd, snap)
        allocs, how = self._new_allocations(rnd, snap, consumer)
        minor = rnd.randint(0, LATEST)
        if minor < 12:
            body = {'allocations': [
                {'resource_provider': {'uuid': u}, 'resources': res}
                for u, res in sorted(allocs.items())]}
        else:
            body = {'allocations': {u: {'resources': res}
                                    for u, res in allocs.items()}}
        self._consumer_fields(rnd, minor, gen, body)
        return Write('%s_%s' % (kind, how), 'PUT',
                     '/allocations/' + consumer, mv(minor), body)

    def allocation_post(self, rnd, snap, kind):
        """Several consumers at once: a migration's shape (one consumer's
        allocations moved to another, the first emptied), or random."""
        minor = rnd.randint(13, LATEST)
        body = {}
        if snap.allocs and rnd.random() < 0.5:
            source, gen = self._consumer(rnd, snap, existing=True)
            target = seeded_uuid(rnd)
            body[target] = self._consumer_fields(rnd, minor, None, {
                'allocations': {u: {'resources': r} for u, r in
                                self._placement(
                                    rnd, snap, target,
                                    snap.allocs[source]).items()}})
            body[source] = self._consumer_fields(rnd, minor, gen, {
                'allocations': {}})
            kind += '_migration'
        for _ in range(rnd.randint(0 if body else 1, 2)):
            consumer, gen = self._consumer(rnd, snap)
            if consumer in body:
                continue
            allocs, _how = self._new_allocations(rnd, snap, consumer)
            if rnd.random() < 0.1:
                allocs = {}
            body[consumer] = self._consumer_fields(rnd, minor, gen, {
                'allocations': {u: {'resources': r}
                                for u, r in allocs.items()}})
        return Write(kind, 'POST', '/allocations', mv(minor), body)

    def allocation_delete(self, rnd, snap, kind):
        consumer, _gen = self._consumer(rnd, snap, existing=True)
        return Write(kind, 'DELETE', '/allocations/' + consumer,
                     mv(rnd.randint(0, LATEST)))

    # -- providers ----------------------------------------------------------

    def provider_create(self, rnd, snap, kind):
        minor = rnd.randint(0, LATEST)
        if len(snap.rps) >= MAX_PROVIDERS:
            return self.provider_delete(rnd, snap, 'provider_delete')
        body = {'name': 'rp-' + seeded_uuid(rnd)[:8]}
        if rnd.random() < 0.7:
            body['uuid'] = seeded_uuid(rnd)
        if minor >= 14 and snap.rps and rnd.random() < 0.6:
            parent = self._rp(rnd, snap)
            if parent.root_provider_id is not None:
                body['parent_provider_uuid'] = parent.uuid
        return Write(kind, 'POST', '/resource_providers', mv(minor), body)

    def provider_delete(self, rnd, snap, kind):
        if len(snap.rps) <= MIN_PROVIDERS:
            return self.provider_create(rnd, snap, 'provider_create')
        # Mostly one that can go: a leaf without allocations.
        used = {rp for allocs in snap.allocs.values() for rp, _ in allocs}
        free = [r for r in sorted(snap.rps) if r not in used
                and not snap.children(r)]
        rid = rnd.choice(free) if free and rnd.random() < 0.85 else \
            self._rp(rnd, snap).id
        return Write(kind, 'DELETE', '/resource_providers/%s'
                     % snap.rps[rid].uuid, mv(rnd.randint(0, LATEST)))

    def provider_parent(self, rnd, snap, kind):
        """A new parent: 1.37 on, anywhere (or none); before, a root may
        take one (the server refuses the rest)."""
        rp = self._rp(rnd, snap)
        mine = set(snap.subtree(rp.id))
        others = [r for r in sorted(snap.rps) if r not in mine]
        minor = rnd.choice([rnd.randint(14, 36), rnd.randint(37, LATEST),
                            rnd.randint(37, LATEST)])
        if rnd.random() < 0.05 and rp.parent_provider_id is not None:
            others = sorted(mine - {rp.id}) or others     # a cycle
        if others and (rp.parent_provider_id is None or
                       rnd.random() < 0.8):
            parent = snap.rps[rnd.choice(others)].uuid
        else:
            parent = None
        return Write(kind, 'PUT', '/resource_providers/' + rp.uuid,
                     mv(minor), {'name': rp.name,
                                 'parent_provider_uuid': parent})

    def provider_rename(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        minor = rnd.randint(0, LATEST)
        body = {'name': 'rp-' + seeded_uuid(rnd)[:8]}
        if minor >= 14 and rp.parent_provider_id is not None:
            body['parent_provider_uuid'] = snap.rps[
                rp.parent_provider_id].uuid
        return Write(kind, 'PUT', '/resource_providers/' + rp.uuid,
                     mv(minor), body)

    # -- traits and aggregates ----------------------------------------------

    def traits_set(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        pool = sorted(set(snap.traits()) | set(STANDARD_TRAITS))
        names = rnd.sample(pool, rnd.randint(0, min(3, len(pool))))
        if rnd.random() < 0.03:
            names.append('CUSTOM_MISSING')
        return Write(kind, 'PUT', '/resource_providers/%s/traits' % rp.uuid,
                     mv(rnd.randint(6, LATEST)), {
                         'resource_provider_generation':
                             self._gen(rnd, rp.generation),
                         'traits': names})

    def traits_delete(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        return Write(kind, 'DELETE', '/resource_providers/%s/traits'
                     % rp.uuid, mv(rnd.randint(6, LATEST)))

    def trait_create(self, rnd, snap, kind):
        return Write(kind, 'PUT', '/traits/' + rnd.choice(CUSTOM_TRAITS),
                     mv(rnd.randint(6, LATEST)))

    def trait_delete(self, rnd, snap, kind):
        names = snap.custom_traits() or CUSTOM_TRAITS
        return Write(kind, 'DELETE', '/traits/' + rnd.choice(names),
                     mv(rnd.randint(6, LATEST)))

    def aggregates_set(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        aggs = rnd.sample(AGGS, rnd.choice([0, 1, 1, 2]))
        if rnd.random() < 0.05:
            aggs.append(seeded_uuid(rnd))
        minor = rnd.randint(1, LATEST)
        if minor < 19:
            body = aggs
        else:
            body = {'aggregates': aggs, 'resource_provider_generation':
                    self._gen(rnd, rp.generation)}
        return Write(kind, 'PUT', '/resource_providers/%s/aggregates'
                     % rp.uuid, mv(minor), body)

    # -- resource classes ---------------------------------------------------

    def class_create(self, rnd, snap, kind):
        have = snap.custom_rcs()
        if len(have) >= MAX_CUSTOM_RCS:
            return self.class_delete(rnd, snap, 'class_delete')
        name = rnd.choice(CUSTOM_RCS)
        minor = rnd.randint(2, LATEST)
        if minor >= 7 and rnd.random() < 0.5:
            return Write(kind, 'PUT', '/resource_classes/' + name, mv(minor))
        return Write(kind, 'POST', '/resource_classes', mv(minor),
                     {'name': name})

    def class_rename(self, rnd, snap, kind):
        have = snap.custom_rcs()
        if not have:
            return self.class_create(rnd, snap, 'class_create')
        # The ones in use first: their providers' worlds hold the name.
        used = sorted({snap.rc_names[rc] for _, rc in snap.inv} & set(have))
        old = rnd.choice(used if used and rnd.random() < 0.8 else have)
        free = sorted(set(CUSTOM_RCS) - set(have))
        new = rnd.choice(free if free and rnd.random() < 0.8
                         else CUSTOM_RCS)
        return Write(kind, 'PUT', '/resource_classes/' + old,
                     mv(rnd.randint(2, 6)), {'name': new})

    def class_delete(self, rnd, snap, kind):
        have = snap.custom_rcs() or CUSTOM_RCS
        return Write(kind, 'DELETE', '/resource_classes/' + rnd.choice(have),
                     mv(rnd.randint(2, LATEST)))

    # -- reshaper -----------------------------------------------------------

    def reshape(self, rnd, snap, kind):
        """Move a class's inventory and the allocations against it from a
        provider to another of its tree, as a virt driver does (the
        allocations of a few other consumers rewritten as they are)."""
        minor = rnd.randint(30, LATEST)
        moves = [(rp, rc) for (rp, rc) in sorted(snap.inv)
                 if len(snap.subtree(snap.rps[rp].root_provider_id or rp))
                 > 1]
        if not moves:
            return self.inventory_put_all(rnd, snap, 'inventory_put_all')
        src, rc = rnd.choice(moves)
        tree = snap.subtree(snap.rps[src].root_provider_id or src)
        dst = rnd.choice([r for r in tree if r != src])
        invs = {src: dict(snap.invs_of(src)), dst: dict(snap.invs_of(dst))}
        row = invs[src].pop(rc)
        if rc not in invs[dst] or rnd.random() < 0.5:
            invs[dst][rc] = row

        def record(r):
            return {'total': r.total, 'reserved': r.reserved,
                    'min_unit': r.min_unit, 'max_unit': r.max_unit,
                    'step_size': r.step_size,
                    'allocation_ratio': r.allocation_ratio}

        body = {'inventories': {
            snap.rps[rp].uuid: {
                'resource_provider_generation': self._gen(
                    rnd, snap.rps[rp].generation),
                'inventories': {snap.rc_names[c]: record(r)
                                for c, r in sorted(inv.items())}}
            for rp, inv in invs.items()}, 'allocations': {}}
        for consumer, allocs in sorted(snap.allocs.items()):
            if (src, rc) not in allocs and rnd.random() < 0.9:
                continue
            new = collections.defaultdict(dict)
            for (rp, c), used in allocs.items():
                if rp not in snap.rps:
                    continue
                target = dst if (rp, c) == (src, rc) else rp
                new[snap.rps[target].uuid][snap.rc_names.get(
                    c, 'CUSTOM_GONE')] = used
            body['allocations'][consumer] = self._consumer_fields(
                rnd, minor, snap.consumer_gen.get(consumer), {
                    'allocations': {u: {'resources': r}
                                    for u, r in new.items()}})
        return Write(kind, 'POST', '/reshaper', mv(minor), body)


class ManageWrites:
    """placement-manage commands that write (run by our SQL process)."""

    COMMANDS = [['db', 'online_data_migrations'],
                ['db', 'online_data_migrations', '--max-count', '1'],
                ['audit', '--fix'], ['os-traits', 'sync'], ['db', 'sync']]

    def make(self, rnd, snap):
        return Write('manage', manage=rnd.choice(self.COMMANDS))


class SqlWrites:
    """Writes an operator types by hand, committed one transaction each,
    keeping the data as the API would (roots follow parents, no
    allocation against a missing inventory) but bumping nothing."""

    WEIGHTS = {
        'sql_inventory_update': 8, 'sql_inventory_insert': 3,
        'sql_inventory_delete': 3, 'sql_inventory_move': 2,
        'sql_allocation_delete': 6, 'sql_allocation_insert': 5,
        'sql_allocation_move': 5, 'sql_allocation_update': 3,
        'sql_trait_add': 4, 'sql_trait_remove': 3, 'sql_trait_change': 3,
        'sql_aggregate_add': 4, 'sql_aggregate_remove': 3,
        'sql_aggregate_change': 3,
        'sql_reparent': 4, 'sql_provider_insert': 2,
        'sql_provider_delete': 2, 'sql_class_rename': 3,
        'sql_class_recreate': 2, 'sql_trait_rename': 2,
        'sql_truncate': 0.5,
    }

    TABLES = {
        'sql_inventory': ('inventories',),
        'sql_inventory_move': ('inventories', 'allocations'),
        'sql_allocation': ('allocations',),
        'sql_trait': ('resource_provider_traits',),
        'sql_aggregate': ('resource_provider_aggregates',),
        'sql_reparent': ('resource_providers',),
        'sql_provider': ('resource_providers',),
        'sql_provider_delete': ('resource_providers', 'inventories',
                                'resource_provider_traits',
                                'resource_provider_aggregates'),
        'sql_class': ('resource_classes',), 'sql_trait_rename': ('traits',),
        'sql_truncate': ('allocations', 'inventories',
                         'resource_provider_traits',
                         'resource_provider_aggregates'),
    }

    def make(self, rnd, snap, favour=None):
        """``favour``: a table, or 'TRUNCATE <table>' (its TRUNCATE
        trigger's run: that table emptied often)."""
        if favour and favour.startswith('TRUNCATE '):
            favour = favour.split()[1]
            if (favour in self.TABLES['sql_truncate'] and
                    rnd.random() < 0.2):
                return self._truncated('sql_truncate', snap, favour)
        kind = _pick(rnd, self.WEIGHTS, self.TABLES, favour)
        if kind == 'sql_truncate':
            return self._truncated(kind, snap, rnd.choice(
                self.TABLES['sql_truncate']))
        sql = getattr(self, kind)(rnd, snap)
        return Write(kind, sql=sql) if sql else None

    def _truncated(self, kind, snap, table):
        """``table`` emptied at once (one that nothing refers to):
        TRUNCATE, which fires statement triggers only (none on MySQL);
        SQLite has no TRUNCATE, so DELETE with no WHERE there."""
        if snap.dialect == 'sqlite':
            return Write(kind, sql=[('DELETE FROM %s' % table, None)])
        sql = [('TRUNCATE TABLE %s' % table, None)]
        if snap.dialect == 'mysql':
            # MySQL fires no trigger for TRUNCATE: the operator reloads
            # every world after it (placement-manage reload).
            return Write(kind, sql=sql, manage=['reload'])
        return Write(kind, sql=sql)

    @staticmethod
    def _rp(rnd, snap):
        return snap.rps[rnd.choice(sorted(snap.rps))]

    def sql_inventory_update(self, rnd, snap):
        if not snap.inv:
            return None
        rp, rc = rnd.choice(sorted(snap.inv))
        column = rnd.choice(['total', 'total', 'reserved',
                             'allocation_ratio', 'max_unit'])
        row = snap.inv[(rp, rc)]
        value = {'total': max(1, row.total + rnd.choice([-2, -1, 1, 4])),
                 'reserved': rnd.choice([0, 1, 2]),
                 'allocation_ratio': rnd.choice([1.0, 2.0, 0.5]),
                 'max_unit': rnd.choice([1, row.total])}[column]
        return [('UPDATE inventories SET %s = :v WHERE '
                 'resource_provider_id = :rp AND resource_class_id = :rc'
                 % column, {'v': value, 'rp': rp, 'rc': rc})]

    def sql_inventory_insert(self, rnd, snap):
        rp = self._rp(rnd, snap)
        rc = snap.rc_ids.get(rnd.choice(snap.classes()))
        if rc is None or (rp.id, rc) in snap.inv:
            return None
        return [('INSERT INTO inventories (resource_provider_id, '
                 'resource_class_id, total, reserved, min_unit, max_unit, '
                 'step_size, allocation_ratio) VALUES (:rp, :rc, :t, 0, 1, '
                 ':t, 1, 1.0)', {'rp': rp.id, 'rc': rc,
                                 't': rnd.randint(1, 64)})]

    def sql_inventory_delete(self, rnd, snap):
        free = [k for k in sorted(snap.inv) if not snap.used[k]]
        if not free:
            return None
        rp, rc = rnd.choice(free)
        return [('DELETE FROM inventories WHERE resource_provider_id = :rp '
                 'AND resource_class_id = :rc', {'rp': rp, 'rc': rc})]

    def sql_allocation_delete(self, rnd, snap):
        if not snap.allocs:
            return None
        consumer = rnd.choice(sorted(snap.allocs))
        if rnd.random() < 0.5:
            return [('DELETE FROM allocations WHERE consumer_id = :c',
                     {'c': consumer})]
        rp, rc = rnd.choice(sorted(snap.allocs[consumer]))
        return [('DELETE FROM allocations WHERE consumer_id = :c AND '
                 'resource_provider_id = :rp AND resource_class_id = :rc',
                 {'c': consumer, 'rp': rp, 'rc': rc})]

    def sql_allocation_insert(self, rnd, snap):
        """Usage with no consumer row behind it (an incomplete consumer,
        which online data migrations complete)."""
        if not snap.inv:
            return None
        rp, rc = rnd.choice(sorted(snap.inv))
        return [('INSERT INTO allocations (resource_provider_id, '
                 'consumer_id, resource_class_id, used) VALUES '
                 '(:rp, :c, :rc, :u)', {
                     'rp': rp, 'rc': rc, 'u': snap.amount(rnd, rp, rc),
                     'c': seeded_uuid(rnd)})]

    def sql_allocation_move(self, rnd, snap):
        if not snap.allocs:
            return None
        consumer = rnd.choice(sorted(snap.allocs))
        rp, rc = rnd.choice(sorted(snap.allocs[consumer]))
        others = [r for (r, c) in sorted(snap.inv) if c == rc and r != rp]
        if not others:
            return None
        return [('UPDATE allocations SET resource_provider_id = :to WHERE '
                 'consumer_id = :c AND resource_provider_id = :rp AND '
                 'resource_class_id = :rc', {'to': rnd.choice(others),
                                             'c': consumer, 'rp': rp,
                                             'rc': rc})]

    def sql_allocation_update(self, rnd, snap):
        if not snap.allocs:
            return None
        consumer = rnd.choice(sorted(snap.allocs))
        rp, rc = rnd.choice(sorted(snap.allocs[consumer]))
        return [('UPDATE allocations SET used = :u WHERE consumer_id = :c '
                 'AND resource_provider_id = :rp AND resource_class_id = :rc',
                 {'u': snap.amount(rnd, rp, rc, consumer), 'c': consumer,
                  'rp': rp, 'rc': rc})]

    def sql_inventory_move(self, rnd, snap):
        """A reshape by hand: an inventory (and the allocations against
        it) to another provider."""
        if not snap.inv:
            return None
        rp, rc = rnd.choice(sorted(snap.inv))
        others = [r for r in sorted(snap.rps) if (r, rc) not in snap.inv]
        if not others:
            return None
        to = rnd.choice(others)
        return [('UPDATE %s SET resource_provider_id = :to WHERE '
                 'resource_provider_id = :rp AND resource_class_id = :rc'
                 % t, {'to': to, 'rp': rp, 'rc': rc})
                for t in ('inventories', 'allocations')]

    def sql_trait_change(self, rnd, snap):
        """One provider's trait becomes another, or goes to another
        provider (an UPDATE of the link row)."""
        pairs = sorted((rp, t) for rp, ts in snap.rp_traits.items()
                       for t in ts)
        if not pairs:
            return None
        rp, t = rnd.choice(pairs)
        if rnd.random() < 0.5:
            column, choices = 'trait_id', sorted(
                set(snap.trait_names) - snap.rp_traits[rp])
        else:
            column, choices = 'resource_provider_id', [
                r for r in sorted(snap.rps) if t not in snap.rp_traits[r]]
        if not choices:
            return None
        return [('UPDATE resource_provider_traits SET %s = :v WHERE '
                 'resource_provider_id = :rp AND trait_id = :t' % column,
                 {'v': rnd.choice(choices), 'rp': rp, 't': t})]

    def sql_aggregate_change(self, rnd, snap):
        pairs = sorted((rp, a) for rp, aggs in snap.rp_aggs.items()
                       for a in aggs)
        if not pairs:
            return None
        rp, a = rnd.choice(pairs)
        if rnd.random() < 0.5:
            column, choices = 'aggregate_id', sorted(
                set(snap.agg_uuids) - snap.rp_aggs[rp])
        else:
            column, choices = 'resource_provider_id', [
                r for r in sorted(snap.rps) if a not in snap.rp_aggs[r]]
        if not choices:
            return None
        return [('UPDATE resource_provider_aggregates SET %s = :v WHERE '
                 'resource_provider_id = :rp AND aggregate_id = :a' % column,
                 {'v': rnd.choice(choices), 'rp': rp, 'a': a})]

    def sql_trait_add(self, rnd, snap):
        rp = self._rp(rnd, snap)
        missing = sorted(set(snap.trait_names) - snap.rp_traits[rp.id])
        if not missing:
            return None
        return [('INSERT INTO resource_provider_traits (resource_provider_id,'
                 ' trait_id) VALUES (:rp, :t)', {'rp': rp.id,
                                                 't': rnd.choice(missing)})]

    def sql_trait_remove(self, rnd, snap):
        pairs = sorted((rp, t) for rp, ts in snap.rp_traits.items()
                       for t in ts)
        if not pairs:
            return None
        rp, t = rnd.choice(pairs)
        return [('DELETE FROM resource_provider_traits WHERE '
                 'resource_provider_id = :rp AND trait_id = :t',
                 {'rp': rp, 't': t})]

    def sql_aggregate_add(self, rnd, snap):
        rp = self._rp(rnd, snap)
        by_uuid = {u: i for i, u in snap.agg_uuids.items()}
        agg = rnd.choice(AGGS)
        stmts = []
        if agg not in by_uuid:
            stmts.append(('INSERT INTO placement_aggregates (uuid) VALUES '
                          '(:u)', {'u': agg}))
        elif by_uuid[agg] in snap.rp_aggs[rp.id]:
            return None
        stmts.append(('INSERT INTO resource_provider_aggregates '
                      '(resource_provider_id, aggregate_id) SELECT :rp, id '
                      'FROM placement_aggregates WHERE uuid = :u',
                      {'rp': rp.id, 'u': agg}))
        return stmts

    def sql_aggregate_remove(self, rnd, snap):
        pairs = sorted((rp, a) for rp, aggs in snap.rp_aggs.items()
                       for a in aggs)
        if not pairs:
            return None
        rp, a = rnd.choice(pairs)
        return [('DELETE FROM resource_provider_aggregates WHERE '
                 'resource_provider_id = :rp AND aggregate_id = :a',
                 {'rp': rp, 'a': a})]

    def sql_reparent(self, rnd, snap):
        """A provider (and its subtree) under another tree, or made a
        root: parent and roots updated together."""
        rp = self._rp(rnd, snap)
        mine = snap.subtree(rp.id)
        others = [r for r in sorted(snap.rps) if r not in mine]
        if rp.parent_provider_id is not None and rnd.random() < 0.3:
            parent, root = None, rp.id
        elif others:
            parent = rnd.choice(others)
            root = snap.rps[parent].root_provider_id or parent
        else:
            return None
        return [('UPDATE resource_providers SET parent_provider_id = :p '
                 'WHERE id = :id', {'p': parent, 'id': rp.id}),
                ('UPDATE resource_providers SET root_provider_id = :r '
                 'WHERE id IN (%s)' % ','.join(str(i) for i in mine),
                 {'r': root})]

    def sql_provider_insert(self, rnd, snap):
        if len(snap.rps) >= MAX_PROVIDERS:
            return None
        u = seeded_uuid(rnd)
        stmts = [('INSERT INTO resource_providers (uuid, name, generation) '
                  'VALUES (:u, :n, 0)', {'u': u, 'n': 'sql-' + u[:8]})]
        parent = self._rp(rnd, snap) if rnd.random() < 0.5 else None
        if parent is not None and parent.root_provider_id is not None:
            stmts.append(('UPDATE resource_providers SET parent_provider_id'
                          ' = :p, root_provider_id = :r WHERE uuid = :u',
                          {'p': parent.id, 'r': parent.root_provider_id,
                           'u': u}))
        else:
            stmts.append(('UPDATE resource_providers SET root_provider_id '
                          '= id WHERE uuid = :u', {'u': u}))
        if rnd.random() < 0.5:
            stmts.append(('INSERT INTO inventories (resource_provider_id, '
                          'resource_class_id, total, reserved, min_unit, '
                          'max_unit, step_size, allocation_ratio) SELECT '
                          'id, :rc, 8, 0, 1, 8, 1, 1.0 FROM '
                          'resource_providers WHERE uuid = :u',
                          {'u': u, 'rc': snap.rc_ids['VCPU']}))
        return stmts

    def sql_provider_delete(self, rnd, snap):
        if len(snap.rps) <= MIN_PROVIDERS:
            return None
        used = {rp for allocs in snap.allocs.values() for rp, _ in allocs}
        leaves = [r for r in sorted(snap.rps) if r not in used
                  and not snap.children(r)]
        if not leaves:
            return None
        rid = rnd.choice(leaves)
        return [('DELETE FROM %s WHERE resource_provider_id = :id' % t,
                 {'id': rid}) for t in ('inventories',
                                        'resource_provider_traits',
                                        'resource_provider_aggregates')] + [
            # A root refers to itself (which MySQL will not delete).
            ('UPDATE resource_providers SET root_provider_id = NULL '
             'WHERE id = :id', {'id': rid}),
            ('DELETE FROM resource_providers WHERE id = :id', {'id': rid})]

    def sql_class_rename(self, rnd, snap):
        have = snap.custom_rcs()
        free = sorted(set(CUSTOM_RCS) - set(have))
        if not have or not free:
            return None
        return [('UPDATE resource_classes SET name = :new WHERE name = :old',
                 {'old': rnd.choice(have), 'new': rnd.choice(free)})]

    def sql_class_recreate(self, rnd, snap):
        """A rename the long way: the class's row deleted and inserted
        again, same id, another name."""
        have = snap.custom_rcs()
        free = sorted(set(CUSTOM_RCS) - set(have))
        if not have or not free:
            return None
        rc = snap.rc_ids[rnd.choice(have)]
        return [('DELETE FROM resource_classes WHERE id = :id', {'id': rc}),
                ('INSERT INTO resource_classes (id, name) VALUES (:id, :n)',
                 {'id': rc, 'n': rnd.choice(free)})]

    def sql_trait_rename(self, rnd, snap):
        have = snap.custom_traits()
        free = sorted(set(CUSTOM_TRAITS + RENAMED_TRAITS) - set(have))
        if not have or not free:
            return None
        return [('UPDATE traits SET name = :new WHERE name = :old',
                 {'old': rnd.choice(have), 'new': rnd.choice(free)})]
