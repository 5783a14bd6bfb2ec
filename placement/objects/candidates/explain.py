"""Why a GET /allocation_candidates query answers what it answers.

The real answer comes from the real engine (``gather.find``), run
in-process on the same request groups; the explanation is computed beside
it, on its own code path, so ordinary candidate queries never pay for it.

Shape of the explanation:

* per request group, the providers each filter step kept, in a fixed
  order (class present, capacity left, min/max unit and step size,
  traits, aggregates, in_tree, root_required), judged over the rows of
  every provider's inventories, usages, traits and aggregates read once
  (bounded by the world's size: fine up to some 10^4 providers). The
  rules are gather's: a numbered group judges one provider; the
  unnumbered group judges a provider with its root for aggregates and
  with its tree (or a sharing provider) for required traits;
* then what combining the groups removed, worked out by running the real
  engine again with one rule relaxed at a time (limit, group_policy
  isolate, same_subtree, one provider per tree before 1.29): a provider
  used only once a rule is relaxed was removed by that rule; what no
  relaxation brings back is explained from the per-group survivors
  (nothing in its tree serves another group, a sharing provider with no
  tree to serve, or the picks do not fit together);
* the first reason for every provider, in words and numbers;
* when nothing fits, what dropping one constraint would bring back
  (again by the real engine).

Kept providers are exactly those the real answer allocates from or maps
a group to; every other provider has one reason, so the counts add up.
"""
import collections
import copy

import os_traits
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects.candidates import gather
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE

# Per-group steps, in the order they are judged.
STEPS = [
    ('resourceless', 'positive filter (resourceless group)'),
    ('resources', 'class present'),
    ('capacity', 'capacity left'),
    ('units', 'min/max unit, step size'),
    ('required', 'required traits'),
    ('forbidden', 'forbidden traits'),
    ('member_of', 'member_of aggregates'),
    ('forbidden_aggs', 'forbidden aggregates'),
    ('in_tree', 'in_tree'),
    ('root_required', 'root_required'),
]
STEP_INDEX = {key: i for i, (key, _) in enumerate(STEPS)}
# Steps after the groups are combined, in the order they are attributed.
COMBINATION = [
    ('limit', 'limit'),
    ('isolate', 'group_policy=isolate'),
    ('same_subtree', 'same_subtree'),
    ('one_per_tree', 'one provider per tree (before 1.29)'),
    ('tree', 'rest of the tree cannot serve the request'),
    ('sharing', 'sharing provider: no tree to serve'),
    ('together', 'picks do not fit together'),
]
# Engine runs with no limit stop here: enough to see which providers
# some candidate uses.
_RELAXED_CAP = 20000
# At most this many constraints are tried for suggestions.
_MAX_SUGGESTIONS = 16


class _Provider:
    __slots__ = ('id', 'uuid', 'name', 'parent_id', 'root_id', 'inv',
                 'used', 'traits', 'aggs')

    def __init__(self, id, uuid, name, parent_id, root_id):
        self.id = id
        self.uuid = uuid
        self.name = name
        self.parent_id = parent_id
        self.root_id = root_id
        self.inv = {}        # rc name -> (total, reserved, min, max, step,
        #                                 ratio)
        self.used = {}       # rc name -> used
        self.traits = set()  # trait ids
        self.aggs = set()    # aggregate ids

    @property
    def label(self):
        return self.name or self.uuid


class _World:
    """Every provider with its inventories, usage, traits, aggregates."""

    def __init__(self):
        self.provs = {}
        self.trait_names = {}
        self.agg_uuids = {}
        self.sharing = set()
        self.trees = False


@db_api.reader.connection
def _read_world(ctx):
    conn = ctx.connection
    world = _World()
    rp = models.RP
    for rid, uuid, name, parent, root in conn.execute(sa.select(
            rp.c.id, rp.c.uuid, rp.c.name, rp.c.parent_provider_id,
            rp.c.root_provider_id)):
        world.provs[rid] = _Provider(rid, uuid, name, parent, root)
        if parent is not None:
            world.trees = True
    inv = models.INV
    rows = conn.execute(sa.select(
        inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total,
        inv.c.reserved, inv.c.min_unit, inv.c.max_unit, inv.c.step_size,
        inv.c.allocation_ratio)).all()
    alloc = models.ALLOC
    usage = conn.execute(sa.select(
        alloc.c.resource_provider_id, alloc.c.resource_class_id,
        sa.func.sum(alloc.c.used)).group_by(
        alloc.c.resource_provider_id, alloc.c.resource_class_id)).all()
    rc_ids = {r[1] for r in rows} | {r[1] for r in usage}
    rc_names = rc_obj.names_for_ids(ctx, rc_ids) if rc_ids else {}
    for rid, rc, total, reserved, min_unit, max_unit, step, ratio in rows:
        prov = world.provs.get(rid)
        if prov is not None:
            prov.inv[rc_names[rc]] = (total, reserved, min_unit, max_unit,
                                      step, float(ratio))
    for rid, rc, used in usage:
        prov = world.provs.get(rid)
        if prov is not None:
            prov.used[rc_names[rc]] = int(used or 0)
    rpt, trait = models.RPT, models.TRAIT
    for rid, tid, name in conn.execute(sa.select(
            rpt.c.resource_provider_id, rpt.c.trait_id, trait.c.name)
            .select_from(rpt.join(trait, trait.c.id == rpt.c.trait_id))):
        prov = world.provs.get(rid)
        if prov is not None:
            prov.traits.add(tid)
        world.trait_names[tid] = name
        if name == SHARING_TRAIT and prov is not None:
            world.sharing.add(rid)
    rpa, agg = models.RPA, models.AGG
    for rid, aid, uuid in conn.execute(sa.select(
            rpa.c.resource_provider_id, rpa.c.aggregate_id, agg.c.uuid)
            .select_from(rpa.join(agg, agg.c.id == rpa.c.aggregate_id))):
        prov = world.provs.get(rid)
        if prov is not None:
            prov.aggs.add(aid)
        world.agg_uuids[aid] = uuid
    return world


@db_api.reader.connection
def _resolve_names(ctx, groups, wide):
    """Names of the query as the database matches them: trait ids
    (None for an unknown trait), aggregate ids, in_tree roots."""
    conn = ctx.connection

    def trait_id(name):
        try:
            return trait_obj.id_for_name(ctx, name)
        except exception.TraitNotFound:
            return None

    aggs = set()
    for rg in groups.values():
        aggs |= rg.forbidden_aggs
        for any_of in rg.member_of:
            aggs |= any_of
    agg_ids = agg_obj.ids_for_uuids(conn, aggs)
    trees = {}
    for rg in groups.values():
        if rg.in_tree and rg.in_tree not in trees:
            trees[rg.in_tree] = conn.execute(
                sa.select(models.RP.c.root_provider_id).where(
                    models.RP.c.uuid == rg.in_tree)).scalar()
    names = set(wide.root_required) | set(wide.root_forbidden)
    for rg in groups.values():
        names |= rg.forbidden
        for any_of in rg.required:
            names |= any_of
    return {n: trait_id(n) for n in names}, agg_ids, trees


class _Group:
    """A request group, names turned into ids, with its step functions."""

    def __init__(self, rg, trait_ids, agg_ids, trees):
        self.rg = rg
        self.suffix = rg.suffix
        self.numbered = rg.use_same_provider
        self.resources = list(rg.resources.items())
        self.required = [(sorted(any_of),
                          {trait_ids[n] for n in any_of} - {None})
                         for any_of in rg.required]
        self.forbidden = {trait_ids[n]: n for n in rg.forbidden
                          if trait_ids[n] is not None}
        self.member_of = [(sorted(any_of),
                           {agg_ids[u] for u in any_of if u in agg_ids})
                          for any_of in rg.member_of]
        self.forbidden_aggs = {agg_ids[u] for u in rg.forbidden_aggs
                               if u in agg_ids}
        self.in_tree = rg.in_tree if rg.resources else None
        self.tree_root = trees.get(rg.in_tree) if self.in_tree else None

    @property
    def name(self):
        return ('group %s' % self.suffix if self.suffix
                else 'unnumbered group')


def _left(prov, rc):
    total, reserved, _mn, _mx, _step, ratio = prov.inv[rc]
    return int((total - reserved) * ratio) - prov.used.get(rc, 0)


def _capacity_text(prov, rc, amount):
    total, reserved, _mn, _mx, _step, ratio = prov.inv[rc]
    return ('%s %d requested, %d left of %d (reserved %d, ratio %s, used %d)'
            % (rc, amount, _left(prov, rc), total, reserved, ratio,
               prov.used.get(rc, 0)))


def _units_text(prov, rc, amount):
    _t, _r, min_unit, max_unit, step, _ratio = prov.inv[rc]
    if amount < min_unit:
        return '%s %d requested, min_unit %d' % (rc, amount, min_unit)
    if amount > max_unit:
        return '%s %d requested, max_unit %d' % (rc, amount, max_unit)
    return '%s %d requested, not a multiple of step_size %d' % (
        rc, amount, step)


def _has_capacity(prov, rc, amount):
    total, reserved, _mn, _mx, _step, ratio = prov.inv[rc]
    return prov.used.get(rc, 0) + amount <= (total - reserved) * ratio


def _units_ok(prov, rc, amount):
    _t, _r, min_unit, max_unit, step, _ratio = prov.inv[rc]
    return min_unit <= amount <= max_unit and amount % step == 0


def _level(prov, rc, amount):
    """0: no inventory of ``rc``; 1: no room for ``amount``; 2: room, but
    outside min/max unit or step size; 3: it can serve ``amount``."""
    if rc not in prov.inv:
        return 0
    if not _has_capacity(prov, rc, amount):
        return 1
    if not _units_ok(prov, rc, amount):
        return 2
    return 3


def _amount_text(prov, rc_amount, need):
    """Why ``prov`` fails the amount step ``need`` for (rc, amount)."""
    rc, amount = rc_amount
    if need == 1:
        return 'no %s inventory' % rc
    if need == 2:
        return _capacity_text(prov, rc, amount)
    return _units_text(prov, rc, amount)


def _serves(prov, rc, amount):
    return (rc in prov.inv and _has_capacity(prov, rc, amount) and
            _units_ok(prov, rc, amount))


class _Judge:
    """The per-group steps over one world."""

    def __init__(self, world, wide, trait_ids):
        self.world = world
        self.provs = world.provs
        self.root_required = {trait_ids[n]: n for n in wide.root_required}
        self.root_forbidden = {trait_ids[n]: n for n in wide.root_forbidden
                               if trait_ids[n] is not None}
        by_root = collections.defaultdict(set)
        for prov in self.provs.values():
            by_root[prov.root_id].add(prov.id)
        self.by_root = by_root
        self._levels = {}
        self._traits = None

    def _trait_sets(self):
        """(traits held anywhere in each tree, by any sharing provider,
        by any provider): the unnumbered group's required traits, worked
        out on first need."""
        if self._traits is None:
            tree = collections.defaultdict(set)
            for prov in self.provs.values():
                if prov.traits:
                    tree[prov.root_id] |= prov.traits
            sharing = set()
            for rid in self.world.sharing:
                sharing |= self.provs[rid].traits
            self._traits = (tree, sharing, set().union(*tree.values()))
        return self._traits

    def _agg(self, aid):
        return self.world.agg_uuids.get(aid, str(aid))

    def _trait(self, tid):
        return self.world.trait_names.get(tid, str(tid))

    def _root(self, prov):
        return self.provs.get(prov.root_id, prov)

    def judge(self, g, prov):
        """(step key, reason) for the first step ``prov`` fails in ``g``,
        None when it passes them all."""
        for step in (self._resourceless, self._amounts,
                     self._required, self._forbidden,
                     self._member_of, self._forbidden_aggs, self._in_tree,
                     self._root_required):
            reason = step(g, prov)
            if reason is not None:
                return reason
        return None

    def _resourceless(self, g, prov):
        if g.resources or g.required or g.member_of:
            return None
        return ('resourceless', 'a group without resources matches no '
                'provider unless it has required traits or member_of')

    def _amounts(self, g, prov):
        """Steps on amounts: every class present (level 1), with room
        (2), within the units (3). A numbered group needs each on the
        provider; the unnumbered group needs one class on the provider
        and each one somewhere in its tree or on a sharing provider."""
        if not g.resources:
            return None
        levels = self._levels_of(g)[prov.id]
        if levels is None:
            return None     # it serves every class itself
        for need, key in ((1, 'resources'), (2, 'capacity'), (3, 'units')):
            reason = self._amount_step(g, prov, levels, need, key)
            if reason is not None:
                return reason
        return None

    def _amount_step(self, g, prov, levels, need, key):
        failing = [(rc, amt) for rc, amt, lvl in levels if lvl == need - 1]
        if g.numbered:
            if failing:
                return (key, _amount_text(prov, failing[0], need))
            return None
        if all(lvl < need for _rc, _amt, lvl in levels):
            if need == 1:
                return (key, 'no inventory of %s' % ', '.join(
                    rc for rc, _amt in failing))
            return (key, '; '.join(_amount_text(prov, f, need)
                                   for f in failing))
        if prov.id in self.world.sharing:
            return None     # serves other trees: judged when combined
        tree = self._tree_levels(g)[prov.root_id]
        shared = self._sharing_levels(g)
        for rc, amt, lvl in levels:
            if max(tree.get(rc, 0), shared.get(rc, 0)) >= need:
                continue
            where = self._where(prov)
            if lvl == need - 1:
                text = _amount_text(prov, (rc, amt), need)
                if where:
                    text += ', nor does any other %s' % where
                return (key, text)
            return (key, '%s %d requested: no %s can serve it'
                    % (rc, amt, where))
        return None

    def _where(self, prov):
        """The other providers the unnumbered group could use with
        ``prov``, in words ('' when there are none)."""
        alone = len(self.by_root[prov.root_id]) == 1
        tree = 'provider of its tree (root %s)' % self._root(prov).label
        if not self.world.sharing:
            return '' if alone else tree
        return 'sharing provider' if alone else tree + ' or sharing provider'

    def _levels_of(self, g):
        """{provider id: [(class, amount, level)]} for ``g``'s amounts,
        computed once for every provider."""
        cached = self._levels.get(('prov', g.suffix))
        if cached is None:
            cached = {}
            for rp, prov in self.provs.items():
                levels = [(rc, amt, _level(prov, rc, amt))
                          for rc, amt in g.resources]
                # None: serves every class (the usual case, no step to
                # fail, and the tree's best level is 3 for each).
                cached[rp] = (None if all(lvl == 3 for _, _, lvl in levels)
                              else levels)
            self._levels[('prov', g.suffix)] = cached
        return cached

    def _tree_levels(self, g):
        """{root: {class: best level in the tree}} for ``g``."""
        cached = self._levels.get(('tree', g.suffix))
        if cached is None:
            cached = collections.defaultdict(dict)
            for rp, levels in self._levels_of(g).items():
                best = cached[self.provs[rp].root_id]
                if levels is None:
                    levels = [(rc, amt, 3) for rc, amt in g.resources]
                for rc, _amt, lvl in levels:
                    if lvl > best.get(rc, 0):
                        best[rc] = lvl
            self._levels[('tree', g.suffix)] = cached
        return cached

    def _sharing_levels(self, g):
        cached = self._levels.get(('sharing', g.suffix))
        if cached is None:
            cached = {}
            for rid in self.world.sharing:
                for rc, amt in g.resources:
                    lvl = _level(self.provs[rid], rc, amt)
                    if lvl > cached.get(rc, 0):
                        cached[rc] = lvl
            self._levels[('sharing', g.suffix)] = cached
        return cached

    def _required(self, g, prov):
        for names, ids in g.required:
            if prov.traits & ids:
                continue
            what = ('required trait %s' % names[0] if len(names) == 1
                    else 'any of the traits %s' % ', '.join(names))
            if g.numbered:
                return ('required', 'lacks %s' % what)
            # The unnumbered group's traits are judged on the providers
            # used together: its tree's, or a sharing provider's.
            tree_traits, sharing_traits, any_traits = self._trait_sets()
            if prov.id in self.world.sharing:
                if ids & any_traits:
                    continue
                return ('required', 'no provider has %s' % what)
            if ids & tree_traits[prov.root_id] or ids & sharing_traits:
                continue
            where = self._where(prov)
            return ('required', 'lacks %s%s' % (
                what, ', as does every other %s' % where
                if where else ''))
        return None

    def _forbidden(self, g, prov):
        bad = sorted(g.forbidden[t] for t in prov.traits & set(g.forbidden))
        if bad:
            return ('forbidden', 'has forbidden trait %s' % ', '.join(bad))
        return None

    def _member_of(self, g, prov):
        root = self._root(prov)
        for uuids, ids in g.member_of:
            if prov.aggs & ids:
                continue
            if not g.numbered and root.aggs & ids and all(
                    root.aggs & other for _, other in g.member_of):
                # The root's aggregates span its tree, for every set.
                continue
            what = ('aggregate %s' % uuids[0] if len(uuids) == 1
                    else 'any of the aggregates %s' % ', '.join(uuids))
            if not g.numbered and root is not prov:
                return ('member_of', 'neither it nor its root %s is in %s'
                        % (root.label, what))
            return ('member_of', 'not in %s' % what)
        return None

    def _forbidden_aggs(self, g, prov):
        bad = prov.aggs & g.forbidden_aggs
        if bad:
            return ('forbidden_aggs', 'in forbidden aggregate %s'
                    % ', '.join(sorted(self._agg(a) for a in bad)))
        root = self._root(prov)
        bad = root.aggs & g.forbidden_aggs
        if not g.numbered and bad:
            return ('forbidden_aggs', 'in forbidden aggregate %s (via its '
                    'root %s)' % (', '.join(sorted(self._agg(a)
                                                   for a in bad)),
                                  root.label))
        return None

    def _in_tree(self, g, prov):
        if not g.in_tree:
            return None
        if g.tree_root is None:
            return ('in_tree', 'in_tree %s names no provider' % g.in_tree)
        if prov.root_id != g.tree_root:
            return ('in_tree', 'not in the tree of in_tree %s (root %s)'
                    % (g.in_tree, self.provs[g.tree_root].label))
        return None

    def _root_required(self, g, prov):
        if not (self.root_required or self.root_forbidden):
            return None
        if prov.id in self.world.sharing:
            # Judged on the roots of the trees it serves (combination).
            return None
        root = self._root(prov)
        for tid, name in sorted(self.root_required.items(),
                                key=lambda kv: kv[1]):
            if tid not in root.traits:
                return ('root_required', 'its root %s lacks root_required '
                        'trait %s' % (root.label, name))
        bad = sorted(n for t, n in self.root_forbidden.items()
                     if t in root.traits)
        if bad:
            return ('root_required', 'its root %s has forbidden root trait '
                    '%s' % (root.label, ', '.join(bad)))
        return None


def _used_by_group(cands):
    """{suffix: {provider id}} over candidates (allocations, and the
    mappings of resourceless groups)."""
    out = collections.defaultdict(set)
    for cand in cands:
        for group, pick in zip(cand.groups, cand.picks):
            if group.same_provider:
                out[group.suffix].add(pick)
            else:
                out[group.suffix].update(pick)
    return out


def _flat_used(by_group):
    return set().union(*by_group.values()) if by_group else set()


class Engine:
    """The real engine, with the handler's options, for relaxed runs."""

    def __init__(self, ctx, nested_aware, max_candidates, strategy,
                 randomize):
        self.ctx = ctx
        self.nested_aware = nested_aware
        self.max_candidates = max_candidates
        self.strategy = strategy
        self.randomize = randomize

    # The primary, like the world the explanation reads (a replica's
    # answer could disagree with it while the replica lags).
    def real(self, groups, wide):
        with db_api.primary_only(self.ctx):
            return gather.find(
                self.ctx, groups, wide, nested_aware=self.nested_aware,
                max_candidates=self.max_candidates, strategy=self.strategy,
                randomize=self.randomize)

    def relaxed(self, groups, wide, nested_aware=None):
        """Providers used per group, with no limit. A name that does not
        exist gives nothing: the real query answered 200 only because an
        earlier group was empty (upstream's order), which a relaxed
        query may no longer be."""
        wide = copy.copy(wide)
        wide.limit = None
        try:
            with db_api.primary_only(self.ctx):
                cands, _p, _t = gather.find(
                    self.ctx, groups, wide,
                    nested_aware=(self.nested_aware if nested_aware is None
                                  else nested_aware),
                    max_candidates=_RELAXED_CAP, strategy='depth-first')
        except (exception.ResourceClassNotFound, exception.TraitNotFound):
            return {}
        return _used_by_group(cands)


def explain(engine, groups, wide, names=(), sample=10, real=None):
    """The explanation (a JSON-able dict) of the query ``groups`` /
    ``wide`` (request.RequestGroup by suffix, request.RequestWide).

    ``real``: the real engine's (candidates, providers, has_trees) when
    the caller already has it. ``names``: providers (uuid or name) to
    explain whatever their fate; ``sample``: how many others to explain.
    """
    ctx = engine.ctx
    if real is None:
        real = engine.real(groups, wide)
    cands = real[0]
    world = _read_world(ctx)
    trait_ids, agg_ids, trees = _resolve_names(ctx, groups, wide)
    judge = _Judge(world, wide, trait_ids)
    egroups = [_Group(rg, trait_ids, agg_ids, trees)
               for rg in groups.values()]
    provs = world.provs
    ids = sorted(provs)

    # Per-group steps.
    verdicts = {}                   # suffix -> {rp: (key, text) | None}
    group_out = []
    for g in egroups:
        per = {rp: judge.judge(g, provs[rp]) for rp in ids}
        verdicts[g.suffix] = per
        removed = collections.Counter(v[0] for v in per.values() if v)
        steps = []
        left = len(ids)
        for key, label in STEPS:
            if key not in removed and not _step_applies(g, key, wide):
                continue
            steps.append({'step': key, 'label': label, 'in': left,
                          'removed': removed[key],
                          'kept': left - removed[key]})
            left -= removed[key]
        group_out.append({'group': g.suffix, 'name': g.name,
                          'request': _describe(g.rg), 'steps': steps,
                          'kept': left})
    survivors = {s: {rp for rp, v in per.items() if v is None}
                 for s, per in verdicts.items()}
    union = set().union(*survivors.values()) if survivors else set()

    used_by_group = _used_by_group(cands)
    kept = _flat_used(used_by_group)

    # Combination: what each relaxation brings back.
    comb_reason = {}                # rp -> (key, text)
    pending = union - kept
    seen = set(kept)
    if pending:
        later = _relaxations(engine, groups, wide, real[2])
        for key, run in later:
            if not pending:
                break
            back = _flat_used(run()) & pending
            for rp in sorted(back):
                comb_reason[rp] = (key, _COMB_TEXT[key])
            pending -= back
            seen |= back
        pairing = _Pairing(judge, egroups, survivors)
        for rp in sorted(pending):
            comb_reason[rp] = pairing.why(provs[rp])
    comb_removed = collections.Counter(v[0] for v in comb_reason.values())
    comb_steps = []
    left = len(union)
    for key, label in COMBINATION:
        if comb_removed[key] or _comb_applies(key, wide, engine, real[2]):
            comb_steps.append({'step': key, 'label': label, 'in': left,
                               'removed': comb_removed[key],
                               'kept': left - comb_removed[key]})
            left -= comb_removed[key]

    # Every provider's first reason.
    reasons = {}
    for rp in ids:
        if rp in kept:
            continue
        if rp in comb_reason:
            key, text = comb_reason[rp]
            reasons[rp] = (key, None, text)
            continue
        best = None
        for g in egroups:
            key, text = verdicts[g.suffix][rp]
            if best is None or STEP_INDEX[key] > STEP_INDEX[best[0]]:
                best = (key, g.suffix, text)
        reasons[rp] = best
    counts = collections.Counter(r[0] for r in reasons.values())

    explained = _pick(world, names, reasons, kept, sample)
    out_providers = []
    for rp, asked in explained:
        if rp is None:
            out_providers.append({'provider': asked, 'uuid': None,
                                  'name': None, 'kept': False,
                                  'step': None, 'group': None,
                                  'reason': '%s: no such provider' % asked,
                                  'groups': {}})
            continue
        prov = provs[rp]
        entry = {'provider': prov.label, 'uuid': prov.uuid,
                 'name': prov.name, 'kept': rp in kept}
        if rp in kept:
            entry.update(step=None, group=None, reason='%s: kept' % (
                prov.label))
        else:
            key, suffix, text = reasons[rp]
            entry.update(step=key, group=suffix,
                         reason='%s: %s' % (prov.label, text))
        entry['groups'] = {
            g.suffix: (None if verdicts[g.suffix][rp] is None else
                       {'step': verdicts[g.suffix][rp][0],
                        'reason': verdicts[g.suffix][rp][1]})
            for g in egroups}
        entry['used_for'] = sorted(s for s, rps in used_by_group.items()
                                   if rp in rps)
        out_providers.append(entry)

    body = {
        'candidates': len(cands),
        'providers': {'total': len(ids), 'kept': len(kept),
                      'excluded': len(ids) - len(kept)},
        'groups': group_out,
        'combination': {'in': len(union), 'steps': comb_steps,
                        'kept': left},
        'reasons': dict(sorted(counts.items(),
                               key=lambda kv: _order_key(kv[0]))),
        'explained': out_providers,
        'not_shown': len(ids) - sum(1 for rp, _ in explained
                                    if rp is not None),
        'suggestions': [],
    }
    if not cands:
        body['suggestions'] = _suggestions(engine, groups, wide, egroups,
                                           judge, verdicts)
    return body


def _order_key(key):
    if key in STEP_INDEX:
        return STEP_INDEX[key]
    return len(STEPS) + [k for k, _ in COMBINATION].index(key)


def _step_applies(g, key, wide):
    """Whether step ``key`` filters anything in group ``g`` (steps that
    do not are left out of its table)."""
    rg = g.rg
    return {
        'resourceless': not rg.resources,
        'resources': bool(rg.resources),
        'capacity': bool(rg.resources),
        'units': bool(rg.resources),
        'required': bool(rg.required),
        'forbidden': bool(rg.forbidden),
        'member_of': bool(rg.member_of),
        'forbidden_aggs': bool(rg.forbidden_aggs),
        'in_tree': bool(g.in_tree),
        'root_required': bool(wide.root_required or wide.root_forbidden),
    }[key]


def _comb_applies(key, wide, engine, has_trees):
    return {
        'limit': wide.limit is not None or (
            engine.max_candidates is not None and
            engine.max_candidates >= 0),
        'isolate': wide.group_policy == 'isolate',
        'same_subtree': bool(wide.same_subtrees),
        'one_per_tree': not engine.nested_aware and has_trees,
        'tree': False, 'sharing': False, 'together': False,
    }[key]


_COMB_TEXT = {
    'limit': 'passes every filter, but the answer was cut by limit (or '
             'max_allocation_candidates) before it',
    'isolate': 'passes every filter, but group_policy=isolate keeps the '
               'numbered groups on distinct providers and no such '
               'combination uses it',
    'same_subtree': 'passes every filter, but no combination using it '
                    'keeps the same_subtree groups below one provider',
    'one_per_tree': 'passes every filter, but before microversion 1.29 a '
                    'candidate may use only one provider of a tree',
}


def _relaxations(engine, groups, wide, has_trees):
    """(key, run) in attribution order; each run relaxes one rule more
    than the previous."""
    steps = []
    cur = copy.copy(wide)
    if _comb_applies('limit', wide, engine, has_trees):
        steps.append(('limit', cur))
    if wide.group_policy == 'isolate':
        cur = copy.copy(cur)
        cur.group_policy = 'none'
        steps.append(('isolate', cur))
    if wide.same_subtrees:
        cur = copy.copy(cur)
        cur.same_subtrees = []
        steps.append(('same_subtree', cur))
    out = [(key, (lambda w=w: engine.relaxed(groups, w)))
           for key, w in steps]
    if not engine.nested_aware and has_trees:
        out.append(('one_per_tree', lambda w=cur: engine.relaxed(
            groups, w, nested_aware=True)))
    return out


class _Pairing:
    """Which groups the survivors under each anchor root cannot serve
    (computed once per anchor)."""

    def __init__(self, judge, egroups, survivors):
        self.judge = judge
        self.egroups = egroups
        self.survivors = survivors
        world = judge.world
        self.provs = world.provs
        tree_aggs = collections.defaultdict(set)
        for prov in self.provs.values():
            tree_aggs[prov.root_id] |= prov.aggs
        # Sharing provider -> the roots it can serve (gather's anchors).
        self.anchors_of = {
            sp: {root for root, aggs in tree_aggs.items()
                 if aggs & self.provs[sp].aggs}
            for sp in world.sharing}
        self.sharing_at = collections.defaultdict(set)
        for sp, roots in self.anchors_of.items():
            for root in roots:
                self.sharing_at[root].add(sp)
        self._missing = {}

    def missing(self, anchor):
        """What no survivor under ``anchor`` serves, as phrases."""
        if anchor in self._missing:
            return self._missing[anchor]
        out = []
        near = self.judge.by_root[anchor] | self.sharing_at[anchor]
        for g in self.egroups:
            members = near & self.survivors[g.suffix]
            if not g.numbered and g.resources:
                lacks = [rc for rc, amt in g.resources
                         if not any(_serves(self.provs[rp], rc, amt)
                                    for rp in members)]
                if lacks:
                    out.append('%s for the %s' % (', '.join(lacks), g.name))
            elif not members:
                out.append('the %s' % g.name)
        self._missing[anchor] = out
        return out

    def why(self, prov):
        """Why a provider that passes a group's filters is in no
        candidate, even with every combination rule relaxed."""
        provs = self.provs
        anchors = {prov.root_id} | self.anchors_of.get(prov.id, set())
        root = provs.get(prov.root_id, prov)
        own = self.missing(prov.root_id)
        if prov.id in self.anchors_of and all(
                self.missing(a) for a in anchors):
            others = sorted(a for a in anchors if a != prov.root_id)
            if not others:
                return ('sharing', 'sharing provider, but no other tree is '
                        'in an aggregate with it')
            return ('sharing', 'sharing provider, but none of the %d '
                    'trees it shares an aggregate with can serve the '
                    'rest: %s' % (len(others), '; '.join(
                        '%s lacks %s' % (provs[a].label,
                                         ', '.join(self.missing(a)))
                        for a in others[:3])))
        if own and all(self.missing(a) for a in anchors):
            return ('tree', 'nothing in its tree (root %s) or sharing with '
                    'it can serve %s' % (root.label, ', '.join(own)))
        return ('together', 'passes its filters, but no pick of providers '
                'with it fits together (amounts summed over groups on one '
                'provider, the unnumbered group\'s required traits held by '
                'the providers picked, a sharing provider\'s tree rules)')


def _pick(world, names, reasons, kept, sample):
    """[(provider id or None, asked name)]: the named providers, then up
    to ``sample`` others, taking reasons in turn so that each kind shows
    (kept providers last)."""
    by_uuid = {p.uuid.lower(): p.id for p in world.provs.values()}
    by_name = {}
    for p in world.provs.values():
        if p.name is not None:
            by_name.setdefault(p.name, p.id)
    out = []
    chosen = set()
    for asked in names:
        rp = by_uuid.get(asked.lower(), by_name.get(asked))
        if rp in chosen:
            continue
        if rp is not None:
            chosen.add(rp)
        out.append((rp, asked))
    by_reason = collections.defaultdict(list)
    for rp in sorted(reasons):
        if rp not in chosen:
            by_reason[reasons[rp][0]].append(rp)
    queues = [collections.deque(by_reason[k])
              for k in sorted(by_reason, key=_order_key)]
    queues.append(collections.deque(sorted(kept - chosen)))
    taken = 0
    while taken < sample and any(queues):
        for q in queues:
            if q and taken < sample:
                out.append((q.popleft(), None))
                taken += 1
    return out


def _describe(rg):
    parts = []
    s = rg.suffix
    if rg.resources:
        parts.append('resources%s=%s' % (s, ','.join(
            '%s:%d' % kv for kv in rg.resources.items())))
    plain = sorted(n for any_of in rg.required if len(any_of) == 1
                   for n in any_of)
    plain += ['!' + n for n in sorted(rg.forbidden)]
    if plain:
        parts.append('required%s=%s' % (s, ','.join(plain)))
    for any_of in rg.required:
        if len(any_of) > 1:
            parts.append('required%s=%s' % (s, any_of_text(any_of)))
    for any_of in rg.member_of:
        parts.append('member_of%s=%s' % (s, any_of_text(any_of)))
    for agg in sorted(rg.forbidden_aggs):
        parts.append('member_of%s=!%s' % (s, agg))
    if rg.in_tree:
        parts.append('in_tree%s=%s' % (s, rg.in_tree))
    return '&'.join(parts)


def any_of_text(names):
    names = sorted(names)
    return names[0] if len(names) == 1 else 'in:' + ','.join(names)


# -- suggestions --------------------------------------------------------

def _drops(groups, wide):
    """(text, groups, wide) with one constraint removed, for each."""
    out = []

    def variant(text, change_group=None, suffix=None, change_wide=None):
        g2 = {s: copy.copy(rg) for s, rg in groups.items()}
        w2 = copy.copy(wide)
        if change_group is not None:
            change_group(g2[suffix])
        if change_wide is not None:
            change_wide(w2)
        out.append((text, g2, w2))

    for s, rg in groups.items():
        for i, any_of in enumerate(rg.required):
            def drop(g, i=i):
                g.required = g.required[:i] + g.required[i + 1:]
            variant('required%s=%s' % (s, any_of_text(any_of)), drop, s)
        for name in sorted(rg.forbidden):
            def drop(g, name=name):
                g.forbidden = g.forbidden - {name}
            variant('required%s=!%s' % (s, name), drop, s)
        for i, any_of in enumerate(rg.member_of):
            def drop(g, i=i):
                g.member_of = g.member_of[:i] + g.member_of[i + 1:]
            variant('member_of%s=%s' % (s, any_of_text(any_of)), drop, s)
        for agg in sorted(rg.forbidden_aggs):
            def drop(g, agg=agg):
                g.forbidden_aggs = g.forbidden_aggs - {agg}
            variant('member_of%s=!%s' % (s, agg), drop, s)
        if rg.in_tree:
            def drop(g):
                g.in_tree = None
            variant('in_tree%s=%s' % (s, rg.in_tree), drop, s)
    for name in sorted(wide.root_required):
        def drop(w, name=name):
            w.root_required = w.root_required - {name}
        variant('root_required=%s' % name, change_wide=drop)
    for name in sorted(wide.root_forbidden):
        def drop(w, name=name):
            w.root_forbidden = w.root_forbidden - {name}
        variant('root_required=!%s' % name, change_wide=drop)
    if wide.group_policy == 'isolate':
        def drop(w):
            w.group_policy = 'none'
        variant('group_policy=isolate (with group_policy=none)',
                change_wide=drop)
    for i, sub in enumerate(wide.same_subtrees):
        def drop(w, i=i):
            w.same_subtrees = w.same_subtrees[:i] + w.same_subtrees[i + 1:]
        variant('same_subtree=%s' % ','.join(sorted(sub)), change_wide=drop)
    return out[:_MAX_SUGGESTIONS]


def _suggestions(engine, groups, wide, egroups, judge, verdicts):
    """When nothing fits: what dropping one constraint would bring back,
    by the real engine; and, per requested class, the most any provider
    passing the group's other steps could give."""
    out = []
    for text, g2, w2 in _drops(groups, wide):
        used = _flat_used(engine.relaxed(g2, w2))
        if used:
            out.append((len(used), '%d provider%s would fit without %s'
                        % (len(used), '' if len(used) == 1 else 's', text)))
    out.sort(key=lambda x: -x[0])
    lines = [text for _, text in out]
    provs = judge.world.provs
    for g in egroups:
        for rc, amount in g.resources:
            best = None
            for rp, verdict in verdicts[g.suffix].items():
                if verdict is None or verdict[0] not in ('capacity',
                                                         'units'):
                    continue
                prov = provs[rp]
                if rc not in prov.inv or _serves(prov, rc, amount):
                    continue
                if not _fits_but(judge, g, prov, rc):
                    continue
                most = _most(prov, rc)
                if most > 0 and (best is None or most > best[0]):
                    best = (most, prov)
            if best is not None:
                lines.append('%s: at most %s:%d would fit (%d asked), on '
                             '%s, which passes every other step'
                             % (g.name, rc, best[0], amount,
                                best[1].label))
    return lines


def _most(prov, rc):
    """The largest amount of ``rc`` one allocation could take now."""
    _t, _r, min_unit, max_unit, step, _ratio = prov.inv[rc]
    most = min(_left(prov, rc), max_unit)
    most -= most % step
    return most if most >= min_unit else 0


def _fits_but(judge, g, prov, rc):
    """``prov`` passes every step of ``g`` but those about ``rc``."""
    if g.numbered:
        for other, amount in g.resources:
            if other != rc and not _serves(prov, other, amount):
                return False
    return all(step(g, prov) is None for step in (
        judge._required, judge._forbidden, judge._member_of,
        judge._forbidden_aggs, judge._in_tree, judge._root_required))
