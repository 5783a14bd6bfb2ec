"""Capacity report: how many more requests like a GET
/allocation_candidates query fit now, per provider tree, summed per
aggregate of the tree's root and overall.

Four statements read what the request needs (providers; inventories of
the requested classes with usage; the providers' traits among those the
request names; aggregate memberships); the counting is Python.

A provider serves an amount of a class when the amount is within min_unit
and max_unit and a multiple of step_size; it has room for
``max k: used + k * amount <= (total - reserved) * allocation_ratio``
such amounts. Eligibility follows GET /allocation_candidates (see
candidates/gather.py): a numbered group's provider holds the traits and is
in the aggregates itself; for the unnumbered group a provider is in an
aggregate when it or its root is, and traits count over the providers it
uses; root_required/root_forbidden look at the root.

Exact: a request of the unnumbered group alone, each class on one provider
of the tree or required traits absent: copies take each class from any
provider with room independently, so the count is, per class, the sum of
the providers' room, and the least of those over the classes. With
required traits and a class on several providers, traits are judged on
every eligible provider of the tree together (may over-count).
Approximated: requests with numbered groups. Copies are placed one
assignment at a time, each group on the eligible provider with the most
room left (several copies at once when an assignment repeats); every
counted copy really fits, so the count is a lower bound.
Not counted: resources of sharing providers reached through an aggregate
(MISC_SHARES_VIA_AGGREGATE) from another tree.
"""
import collections
import math

import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj

_RP = models.RP
_INV = models.INV
_ALLOC = models.ALLOC
_RPT = models.RPT
_RPA = models.RPA
_AGG = models.AGG


class _Inv:
    __slots__ = ('cap', 'used', 'min_unit', 'max_unit', 'step')

    def __init__(self, total, reserved, ratio, min_unit, max_unit, step,
                 used):
        self.cap = (total - reserved) * ratio
        self.used = int(used)      # MySQL sums are Decimal
        self.min_unit = min_unit
        self.max_unit = max_unit
        self.step = step

    def serves(self, amount):
        return (self.min_unit <= amount <= self.max_unit
                and (self.step <= 0 or amount % self.step == 0))

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
    def __init__(self, ctx, classes, trait_ids):
        s = ctx.session
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
            self.inv[(row[0], row[1])] = _Inv(*row[2:])
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


def _in_aggs(any_ofs, forbidden, aggs):
    return (all(any_of & aggs for any_of in any_ofs)
            and not forbidden & aggs)


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
            if (not all(any_of & traits for any_of in g.required)
                    or traits & g.forbidden
                    or not self.wide.root_required <= traits
                    or self.wide.root_forbidden & traits):
                return 0
        if g.member_of or g.forbidden_aggs:
            if not _in_aggs(g.member_of, g.forbidden_aggs,
                            w.aggs.get(rp, set())):
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
        if traits & g.forbidden:
            return False
        if g.numbered:
            if not all(any_of & traits for any_of in g.required):
                return False
            aggs = w.aggs.get(rp, set())
        else:
            aggs = w.aggs.get(rp, set()) | w.aggs.get(root, set())
        if not _in_aggs(g.member_of, g.forbidden_aggs, aggs):
            return False
        return all((rp, rc) in w.inv and w.inv[(rp, rc)].serves(amount)
                   for rc, amount in g.resources.items()) if g.numbered \
            else True

    def count(self, root, members):
        """(copies that fit, exact?) for the tree of ``root``."""
        if len(members) == 1 and self.simple:
            return self._one_provider(root), True
        w = self.w
        rtraits = w.traits.get(root, set())
        if (not self.wide.root_required <= rtraits
                or self.wide.root_forbidden & rtraits):
            return 0, True
        plain = None
        numbered = []
        for g in self.groups:
            if g.numbered:
                cands = [rp for rp in members
                         if self._eligible(g, rp, root)]
                if not cands:
                    return 0, True
                numbered.append((g, cands))
            else:
                plain = g
        per_class = {}
        exact = True
        if plain is not None:
            ok = [rp for rp in members if self._eligible(plain, rp, root)]
            for rc, amount in plain.resources.items():
                per_class[rc] = [rp for rp in ok if (rp, rc) in w.inv
                                 and w.inv[(rp, rc)].serves(amount)]
                if not per_class[rc]:
                    return 0, True
            if plain.required:
                used = set().union(*per_class.values())
                traits = set().union(*(w.traits.get(rp, set())
                                       for rp in used))
                if not all(any_of & traits for any_of in plain.required):
                    return 0, True
                exact = all(len(rps) == 1 for rps in per_class.values())
        if not numbered:
            return min(sum(w.inv[(rp, rc)].room(amount)
                           for rp in per_class[rc])
                       for rc, amount in plain.resources.items()), exact
        return self._greedy(numbered, plain, per_class), False

    def _greedy(self, numbered, plain, per_class):
        w = self.w
        # Most constrained groups first.
        numbered = sorted(numbered, key=lambda gc: len(gc[1]))
        taken = collections.Counter()    # (rp, rc) -> used in this run
        count = 0

        def room(rp, rc, amount, extra):
            # Units were checked when the providers were found eligible.
            return _room_after(w.inv[(rp, rc)], amount,
                               taken[(rp, rc)] + extra)

        while True:
            plan = collections.Counter()   # (rp, rc) -> amount per copy
            used_rps = set()
            for g, cands in numbered:
                best, best_room = None, 0
                for rp in cands:
                    if self.isolate and rp in used_rps:
                        continue
                    r = min(room(rp, rc, amount, plan[(rp, rc)])
                            for rc, amount in g.resources.items())
                    if r > best_room:
                        best, best_room = rp, r
                if best is None:
                    return count
                used_rps.add(best)
                for rc, amount in g.resources.items():
                    plan[(best, rc)] += amount
            if plain is not None:
                for rc, amount in plain.resources.items():
                    best, best_room = None, 0
                    for rp in per_class[rc]:
                        r = room(rp, rc, amount, plan[(rp, rc)])
                        if r > best_room:
                            best, best_room = rp, r
                    if best is None:
                        return count
                    plan[(best, rc)] += amount
            # How many times this very assignment still fits.
            repeat = min(_room_after(w.inv[key], per_copy, taken[key])
                         for key, per_copy in plan.items())
            if repeat < 1:
                return count
            batch = max(1, repeat // 2)
            for key, per_copy in plan.items():
                taken[key] += per_copy * batch
            count += batch


def _room_after(inv, amount, extra):
    """How many more ``amount``s fit once ``extra`` more is used, units
    aside. Float division may be one off either way; settled exactly."""
    k = max(0, math.floor((inv.cap - inv.used - extra) / amount))
    while inv.used + extra + (k + 1) * amount <= inv.cap:
        k += 1
    while k > 0 and inv.used + extra + k * amount > inv.cap:
        k -= 1
    return k


@db_api.reader
def report(ctx, groups, wide):
    """The report for parsed request ``groups`` ({suffix: RequestGroup})
    and ``wide`` (RequestWide): {'trees': [...], 'aggregates': {uuid:
    fits}, 'total': n, 'exact': bool}. Raises ResourceClassNotFound or
    TraitNotFound for unknown names."""
    if wide.same_subtrees:
        raise exception.BadRequest(
            'same_subtree is not supported by the capacity report.')
    resolved = [_Group(ctx, g) for g in groups.values()]
    wide_ids = collections.namedtuple('Wide', 'group_policy root_required '
                                      'root_forbidden')(
        wide.group_policy,
        {trait_obj.id_for_name(ctx, n) for n in wide.root_required},
        {trait_obj.id_for_name(ctx, n) for n in wide.root_forbidden})
    classes = sorted({rc for g in resolved for rc in g.resources})
    trait_ids = set(wide_ids.root_required) | wide_ids.root_forbidden
    for g in resolved:
        trait_ids |= g.forbidden.union(*g.required)
    world = _World(ctx, classes, trait_ids)
    in_tree_roots = {}
    for g in resolved:
        if g.in_tree:
            rp = world.by_uuid.get(g.in_tree)
            # An unknown in_tree provider matches no tree.
            in_tree_roots[g.suffix] = world.root(rp) if rp else None
    counter = _Counter(world, resolved, wide_ids, in_tree_roots)
    trees = []
    by_agg = collections.Counter()
    total = 0
    exact = True
    for root, members in world.trees.items():
        fits, tree_exact = counter.count(root, members)
        if not fits:
            continue
        exact = exact and tree_exact
        row = world.rps[root]
        trees.append({'root_provider_uuid': row[1], 'name': row[2],
                      'fits': fits, 'exact': tree_exact})
        total += fits
        for agg in world.aggs.get(root, ()):
            by_agg[agg] += fits
    trees.sort(key=lambda t: (-t['fits'], t['name'] or '',
                              t['root_provider_uuid']))
    return {'trees': trees, 'aggregates': dict(sorted(by_agg.items())),
            'total': total, 'exact': exact}
