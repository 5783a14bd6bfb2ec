"""Capacity report: how many more requests like a GET
/allocation_candidates query fit now, per provider tree, per aggregate of
the trees' roots and overall.

What "fit" means: a copy of the request is one of its allocation
candidates (what GET /allocation_candidates would offer, at the newest
microversion); k copies fit when some k candidates, repeats allowed, can
all be claimed together: for every provider and class, usage plus their
amounts stays within ``(total - reserved) * allocation_ratio`` (min_unit,
max_unit and step_size bind each candidate already). Claiming them one
after another then never meets a 409, whatever the order.

* ``total``: the most copies that fit in the whole world together.
* a tree's ``fits``: the most copies anchored in that tree (its own
  providers, plus sharing providers, trait MISC_SHARES_VIA_AGGREGATE, in
  an aggregate one of its providers is in) that fit, as if no other tree
  took anything. ``shared: true`` when another tree can draw on the same
  sharing provider: the figure is then "up to N" and the trees' figures
  do not add up; ``total`` and the aggregates' figures count the shared
  capacity once.
* an aggregate's figure: the most copies anchored in the trees whose
  root is in the aggregate, together.
* ``exact``: the figure is proven. Not proven only when a tree has more
  than MAX_PATTERNS candidates (counted over its first ones) or the
  integer program runs past SOLVE_SECONDS (its best answer so far); both
  are lower bounds: every counted copy really fits.

How: the unnumbered group alone, with no sharing provider holding a
requested class, is counted in closed form from four statements
(providers; inventories with usage; traits the request names, the
sharing trait among them; aggregates): copies take each class from any
eligible provider independently, so the count is, per class, the sum of
the providers' room, and the least of those over the classes (20,000
providers in well under 2 s). Everything else -- numbered groups under
either group_policy, same_subtree, sharing providers, required traits of
the unnumbered group spread over several providers -- is counted over
the candidates themselves (candidates/sql.py and combine.py, the code
behind GET /allocation_candidates) as an integer program: maximise the
number of copies, each taking one candidate's amounts, within the room
left per provider and class (``max_copies``). Trees linked through a
sharing provider are solved together, each other tree alone.
"""
import collections
import math

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import aggregate_rules
from placement.objects.candidates import combine
from placement.objects.candidates import model
from placement.objects.candidates import sql_request
from placement.objects import capacity_rules
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj
from placement.objects import trait_rules

_RP = models.RP
_INV = models.INV
_ALLOC = models.ALLOC
_RPT = models.RPT
_RPA = models.RPA
_AGG = models.AGG


class _Inv:
    """One inventory with its usage. ``cap`` is the capacity as the
    candidates' filters compute it (on MySQL with the FLOAT ratio's single
    precision), so that a tree counted as fitting once has a candidate."""
    __slots__ = ('cap', 'used', 'min_unit', 'max_unit', 'step')

    def __init__(self, total, reserved, ratio, min_unit, max_unit, step,
                 used, mysql=False):
        self.cap = capacity_rules.capacity(
            total, reserved, capacity_rules.stored_ratio(ratio, mysql))
        self.used = int(used)      # MySQL sums are Decimal
        self.min_unit = min_unit
        self.max_unit = max_unit
        self.step = step

    def serves(self, amount):
        return capacity_rules.units_allow(amount, self.min_unit,
                                          self.max_unit, self.step)

    def room(self, amount):
        """How many more ``amount``s fit (0 when units refuse it)."""
        return _room_after(self, amount, 0) if self.serves(amount) else 0


class _Group:
    """A request group with names resolved to ids."""

    def __init__(self, ctx, group):
        self.suffix = group.suffix
        self.numbered = group.use_same_provider
        self.resources = {rc_obj.id_for_name(ctx, name): amount
                          for name, amount in group.resources.items()}
        self.required = [{trait_obj.id_for_name(ctx, n) for n in any_of}
                         for any_of in group.required]
        self.forbidden = {trait_obj.id_for_name(ctx, n)
                          for n in group.forbidden}
        self.member_of = group.member_of           # sets of uuids
        self.forbidden_aggs = group.forbidden_aggs
        self.in_tree = group.in_tree


class _World:
    def __init__(self, conn, classes, trait_ids):
        s = conn
        # fetchall (.all()): one driver call, not one per row.
        self.rps = {r[0]: r for r in s.execute(sa.select(
            _RP.c.id, _RP.c.uuid, _RP.c.name, _RP.c.root_provider_id)
        ).all()}
        self.by_uuid = {r[1]: r[0] for r in self.rps.values()}
        used = (sa.select(_ALLOC.c.resource_provider_id.label('rp'),
                          _ALLOC.c.resource_class_id.label('rc'),
                          sa.func.sum(_ALLOC.c.used).label('used'))
                .where(_ALLOC.c.resource_class_id.in_(classes))
                .group_by(_ALLOC.c.resource_provider_id,
                          _ALLOC.c.resource_class_id).subquery('used'))
        self.inv = {}       # {(rp, rc): _Inv}
        mysql = conn.dialect.name == 'mysql'
        for row in s.execute(
                sa.select(_INV.c.resource_provider_id,
                          _INV.c.resource_class_id, _INV.c.total,
                          _INV.c.reserved, _INV.c.allocation_ratio,
                          _INV.c.min_unit, _INV.c.max_unit,
                          _INV.c.step_size,
                          sa.func.coalesce(used.c.used, 0))
                .select_from(_INV.outerjoin(used, sa.and_(
                    used.c.rp == _INV.c.resource_provider_id,
                    used.c.rc == _INV.c.resource_class_id)))
                .where(_INV.c.resource_class_id.in_(classes))).all():
            self.inv[(row[0], row[1])] = _Inv(*row[2:], mysql=mysql)
        self.traits = collections.defaultdict(set)
        if trait_ids:
            for rp, tid in s.execute(
                    sa.select(_RPT.c.resource_provider_id, _RPT.c.trait_id)
                    .where(_RPT.c.trait_id.in_(sorted(trait_ids)))).all():
                self.traits[rp].add(tid)
        self.aggs = collections.defaultdict(set)     # rp id -> agg uuids
        for rp, agg in s.execute(
                sa.select(_RPA.c.resource_provider_id, _AGG.c.uuid)
                .select_from(_RPA.join(_AGG,
                                       _AGG.c.id == _RPA.c.aggregate_id))
        ).all():
            self.aggs[rp].add(agg)
        self.trees = collections.defaultdict(list)   # root id -> rp ids
        for rp_id, row in self.rps.items():
            self.trees[row[3] if row[3] is not None else rp_id].append(
                rp_id)

    def root(self, rp_id):
        root = self.rps[rp_id][3]
        return rp_id if root is None else root


class _Counter:
    """Count one tree's copies of the request."""

    def __init__(self, world, groups, wide, in_tree_roots):
        self.w = world
        self.groups = groups
        self.wide = wide
        self.in_tree_roots = in_tree_roots
        self.isolate = wide.group_policy == 'isolate'
        # The unnumbered group alone: a tree of one provider is counted
        # without the general machinery (most clouds are such trees).
        self.simple = len(groups) == 1 and not groups[0].numbered
        if self.simple:
            self.plain = groups[0]
            self.amounts = list(self.plain.resources.items())

    def _one_provider(self, rp):
        g = self.plain
        w = self.w
        if g.required or g.forbidden or self.wide.root_required or \
                self.wide.root_forbidden:
            traits = w.traits.get(rp, set())
            if (not trait_rules.traits_allow(traits, g.required, g.forbidden)
                    or trait_rules.root_required(
                        traits, self.wide.root_required,
                        self.wide.root_forbidden) is not None):
                return 0
        if g.member_of or g.forbidden_aggs:
            if not aggregate_rules.aggregates_allow(
                    w.aggs.get(rp, set()), g.member_of, g.forbidden_aggs):
                return 0
        if g.suffix in self.in_tree_roots and (
                self.in_tree_roots[g.suffix] != rp):
            return 0
        fits = None
        for rc, amount in self.amounts:
            inv = w.inv.get((rp, rc))
            if inv is None:
                return 0
            room = inv.room(amount)
            if not room:
                return 0
            if fits is None or room < fits:
                fits = room
        return fits or 0

    def _eligible(self, g, rp, root):
        w = self.w
        if g.suffix in self.in_tree_roots and (
                self.in_tree_roots[g.suffix] != root):
            return False
        traits = w.traits.get(rp, set())
        if trait_rules.forbidden_traits(traits, g.forbidden) is not None:
            return False
        if g.numbered:
            if trait_rules.required_traits(traits, g.required) is not None:
                return False
            aggs = w.aggs.get(rp, set())
        else:
            # The unnumbered group: a root's aggregates span its tree.
            aggs = w.aggs.get(rp, set()) | w.aggs.get(root, set())
        if not aggregate_rules.aggregates_allow(aggs, g.member_of,
                                                g.forbidden_aggs):
            return False
        return all((rp, rc) in w.inv and w.inv[(rp, rc)].serves(amount)
                   for rc, amount in g.resources.items()) if g.numbered \
            else True

    def count(self, root, members):
        """Copies that fit in the tree of ``root`` by the closed form, or
        None when the tree needs the search over candidates (required
        traits of the unnumbered group spread over several providers)."""
        if len(members) == 1:
            return self._one_provider(root)
        w = self.w
        if trait_rules.root_required(
                w.traits.get(root, set()), self.wide.root_required,
                self.wide.root_forbidden) is not None:
            return 0
        plain = self.plain
        ok = [rp for rp in members if self._eligible(plain, rp, root)]
        per_class = {}
        for rc, amount in plain.resources.items():
            per_class[rc] = [rp for rp in ok if (rp, rc) in w.inv
                             and w.inv[(rp, rc)].serves(amount)]
            if not per_class[rc]:
                return 0
        if plain.required and any(len(rps) > 1
                                  for rps in per_class.values()):
            return None
        if plain.required:
            held = [w.traits.get(rp, set())
                    for rps in per_class.values() for rp in rps]
            if trait_rules.required_traits_among(
                    held, plain.required) is not None:
                return 0
        return min(sum(w.inv[(rp, rc)].room(amount) for rp in per_class[rc])
                   for rc, amount in plain.resources.items())


def _room_after(inv, amount, extra):
    """How many more ``amount``s fit once ``extra`` more is used, units
    aside. Float division may be one off either way; settled exactly."""
    has_room = capacity_rules.has_room
    k = max(0, math.floor((inv.cap - inv.used - extra) / amount))
    while has_room(inv.used + extra, (k + 1) * amount, inv.cap):
        k += 1
    while k > 0 and not has_room(inv.used + extra, k * amount, inv.cap):
        k -= 1
    return k


# A tree whose candidates outnumber this is counted over its first ones
# only (a lower bound, ``exact: false``).
MAX_PATTERNS = 2000
# Seconds the integer program may take per question before its best
# answer so far is taken (a lower bound, ``exact: false``).
SOLVE_SECONDS = 2.0


def _sharing_trait(ctx):
    try:
        return trait_obj.id_for_name(ctx, sql_request.SHARING_TRAIT)
    except exception.TraitNotFound:
        return None


def _patterns(ctx, groups, wide, roots):
    """{anchor root id: ([pattern], truncated)} and the room per (provider,
    class name). A pattern is the allocation of one candidate, {(rp id,
    class name): amount}; the candidates are GET /allocation_candidates'
    own (sql + combine) at the newest microversion, per anchor (the
    tree's root; a sharing provider serves every tree sharing one of its
    aggregates). ``roots``: the anchors wanted, None for all."""
    try:
        gatherer = sql_request.Request(ctx, groups, wide)
    except sql_request.Empty:
        return {}, {}
    cgroups = gatherer.combine_groups()
    if not cgroups:
        return {}, {}
    anchors = combine.viable_anchors(cgroups)
    if roots is not None:
        anchors = [a for a in anchors if a in roots]
    providers = gatherer.providers(anchors, gatherer.sharing)
    isolate = wide.group_policy == 'isolate'
    out = {}
    for anchor in anchors:
        pats = {}
        truncated = False
        # Each anchor alone: combine() looks over every anchor of the
        # groups it is given, which would make this loop quadratic.
        mine = [model.Group(g.suffix, g.resources,
                            {anchor: g.by_anchor[anchor]}
                            if anchor in g.by_anchor else {},
                            required=g.required, forbidden=g.forbidden)
                for g in cgroups]
        for cand in combine.combine(
                providers, mine, isolate=isolate,
                same_subtrees=wide.same_subtrees, anchors=[anchor],
                seen=set(), shared_ids=gatherer.sharing):
            if len(pats) >= MAX_PATTERNS:
                truncated = True
                break
            key = frozenset((rp, rc, amount)
                            for rp, res in cand.allocations.items()
                            for rc, amount in res.items())
            pats.setdefault(key, {(rp, rc): amount
                                  for rp, rc, amount in key})
        if pats:
            out[anchor] = (list(pats.values()), truncated)
    room = {}
    for rp, prov in providers.items():
        for rc, inv in prov.inventory.items():
            room[(rp, rc)] = inv.capacity - inv.used
    return out, room


def max_copies(patterns, room):
    """(most copies that fit together, proven?) when each copy takes one
    of ``patterns`` ({key: amount}) and the copies' amounts per key must
    stay within ``room`` ({key: amount}).

    An integer program: maximise the sum of n_p, for each key the sum of
    n_p * amount_p(key) at most room(key), n_p >= 0 integers. Solved
    exactly by HiGHS (scipy.optimize.milp, zero gap) unless it runs out
    of SOLVE_SECONDS, then its best feasible answer (not proven)."""
    bounds = []
    kept = []
    for pat in patterns:
        bound = min(room.get(key, 0) // amount
                    for key, amount in pat.items())
        if bound > 0:
            kept.append(pat)
            bounds.append(bound)
    if not kept:
        return 0, True
    users = collections.Counter(key for pat in kept for key in pat)
    if all(users[key] == 1 for pat in kept for key in pat):
        # No two patterns draw on the same key: each goes its own way.
        return sum(bounds), True
    # Imported here: scipy takes most of a second to import and the
    # common requests never need it.
    import numpy
    from scipy import optimize
    from scipy import sparse
    keys = {key: i for i, key in enumerate(users)}
    rows, cols, vals = [], [], []
    for col, pat in enumerate(kept):
        for key, amount in pat.items():
            rows.append(keys[key])
            cols.append(col)
            vals.append(amount)
    matrix = sparse.csr_array((vals, (rows, cols)),
                              shape=(len(keys), len(kept)))
    limits = numpy.array([room[key] for key in keys], dtype=float)
    res = optimize.milp(
        c=-numpy.ones(len(kept)),
        constraints=optimize.LinearConstraint(matrix, -numpy.inf, limits),
        integrality=numpy.ones(len(kept)),
        bounds=optimize.Bounds(0, numpy.array(bounds, dtype=float)),
        options={'time_limit': SOLVE_SECONDS, 'mip_rel_gap': 0,
                 'presolve': True})
    if res.x is None:
        return _greedy(kept, room), False
    counts = [int(round(x)) for x in res.x]
    used = collections.Counter()
    for n, pat in zip(counts, kept):
        for key, amount in pat.items():
            used[key] += n * amount
    if any(used[key] > room[key] for key in used):
        # Rounding went over: keep what certainly fits.
        counts = [int(math.floor(x + 1e-9)) for x in res.x]
        return max(sum(counts), _greedy(kept, room)), False
    if res.status != 0:
        return max(sum(counts), _greedy(kept, room)), False
    return sum(counts), True


def _components(by_anchor):
    """Anchors linked, directly or not, by a provider their patterns
    share (a sharing provider): lists of anchors."""
    parent = {a: a for a in by_anchor}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    first = {}
    for anchor, pats in by_anchor.items():
        for pat in pats:
            for rp, _rc in pat:
                other = first.setdefault(rp, anchor)
                ra, rb = find(anchor), find(other)
                if ra != rb:
                    parent[ra] = rb
    comps = collections.defaultdict(list)
    for anchor in by_anchor:
        comps[find(anchor)].append(anchor)
    return list(comps.values())


def _same_draw(by_anchor, anchors, fits, room):
    """The most copies ``anchors`` take together when every candidate of
    theirs draws the same amounts from the keys several of them use (the
    usual case: one sharing pool): each tree's own figure, capped by what
    the shared keys hold, ``min(sum of fits, room // amount)``. Exact: a
    tree can always take fewer copies, and its other keys are its own.
    None when the draws differ (the integer program decides)."""
    users = collections.defaultdict(set)
    for anchor in anchors:
        for pat in by_anchor[anchor]:
            for key in pat:
                users[key].add(anchor)
    shared = {key for key, who in users.items() if len(who) > 1}
    draw = None
    for anchor in anchors:
        for pat in by_anchor[anchor]:
            mine = {key: amount for key, amount in pat.items()
                    if key in shared}
            if draw is None:
                draw = mine
            elif mine != draw:
                return None
    if not draw:
        return None
    return min(sum(fits[a] for a in anchors),
               min(room[key] // amount for key, amount in draw.items()))


def _greedy(patterns, room):
    """Copies that certainly fit: each pattern in turn as often as what
    is left allows (a lower bound when the integer program gives up)."""
    left = dict(room)
    count = 0
    for pat in patterns:
        n = min(left.get(key, 0) // amount for key, amount in pat.items())
        if n > 0:
            count += n
            for key, amount in pat.items():
                left[key] -= n * amount
    return count


def _union(by_anchor, anchors):
    seen = {}
    for anchor in anchors:
        for pat in by_anchor[anchor]:
            seen.setdefault(frozenset(pat.items()), pat)
    return list(seen.values())


@db_api.reader.connection
def report(ctx, groups, wide):
    """The report for parsed request ``groups`` ({suffix: RequestGroup})
    and ``wide`` (RequestWide): {'trees': [...], 'aggregates': {uuid:
    fits}, 'total': n, 'exact': bool}. Raises ResourceClassNotFound or
    TraitNotFound for unknown names, as GET /allocation_candidates does:
    not after a group with no candidates (names.resolve), then nothing
    fits."""
    try:
        resolved = [_Group(ctx, g) for g in groups.values()]
        wide_ids = collections.namedtuple(
            'Wide', 'group_policy root_required root_forbidden')(
            wide.group_policy,
            {trait_obj.id_for_name(ctx, n) for n in wide.root_required},
            {trait_obj.id_for_name(ctx, n) for n in wide.root_forbidden})
    except (exception.ResourceClassNotFound, exception.TraitNotFound):
        try:
            sql_request.Request(ctx, groups, wide)
        except sql_request.Empty:
            return {'trees': [], 'aggregates': {}, 'total': 0,
                    'exact': True}
        raise
    classes = sorted({rc for g in resolved for rc in g.resources})
    trait_ids = set(wide_ids.root_required) | wide_ids.root_forbidden
    for g in resolved:
        trait_ids |= g.forbidden.union(*g.required)
    sharing_tid = _sharing_trait(ctx)
    if sharing_tid is not None:
        trait_ids.add(sharing_tid)
    world = _World(ctx.connection, classes, trait_ids)
    in_tree_roots = {}
    for g in resolved:
        if g.in_tree:
            rp = world.by_uuid.get(g.in_tree)
            # An unknown in_tree provider matches no tree.
            in_tree_roots[g.suffix] = world.root(rp) if rp else None
    counter = _Counter(world, resolved, wide_ids, in_tree_roots)
    # Providers sharing a requested class make trees compete for it.
    sharing = sharing_tid is not None and any(
        sharing_tid in world.traits.get(rp, ()) for rp, _rc in world.inv)

    fits = {}               # root -> copies
    exact = {}              # root -> proven
    search_roots = None     # None: every tree through the search
    if counter.simple and not sharing:
        search_roots = set()
        for root, members in world.trees.items():
            n = counter.count(root, members)
            if n is None:
                search_roots.add(root)
            elif n:
                fits[root] = n
                exact[root] = True
    by_anchor = {}
    room = {}
    if search_roots is None or search_roots:
        found, room = _patterns(ctx, groups, wide, search_roots)
        for anchor, (pats, truncated) in found.items():
            n, proven = max_copies(pats, room)
            if n:
                fits[anchor] = n
                exact[anchor] = proven and not truncated
                by_anchor[anchor] = pats

    # Trees drawing on the same sharing provider compete: the figure of
    # each is what it alone could take; their sum over-counts. What they
    # take together is solved as one problem per linked set of trees.
    shared = set()
    groups_of = [[a] for a in fits if a not in by_anchor]
    for comp in _components(by_anchor):
        groups_of.append(comp)
        if len(comp) > 1:
            shared.update(comp)
    total = 0
    all_exact = all(exact.values())

    def together(anchors):
        nonlocal all_exact
        if len(anchors) == 1:
            return fits[anchors[0]]
        n = _same_draw(by_anchor, anchors, fits, room)
        if n is not None:
            return n
        n, proven = max_copies(_union(by_anchor, anchors), room)
        all_exact = all_exact and proven
        return n

    by_agg = collections.Counter()
    for comp in groups_of:
        total += together(comp)
        aggs = collections.defaultdict(list)
        for anchor in comp:
            for agg in world.aggs.get(anchor, ()):
                aggs[agg].append(anchor)
        for agg, anchors in aggs.items():
            by_agg[agg] += together(anchors)
    trees = []
    for root, n in fits.items():
        row = world.rps[root]
        trees.append({'root_provider_uuid': row[1], 'name': row[2],
                      'fits': n, 'exact': exact[root],
                      'shared': root in shared})
    trees.sort(key=lambda t: (-t['fits'], t['name'] or '',
                              t['root_provider_uuid']))
    return {'trees': trees, 'aggregates': dict(sorted(by_agg.items())),
            'total': total, 'exact': all_exact}
