"""The reasons of rules.py's verdicts, in words, step by step.

Explain (explain.py) judges every provider of the world against each
request group with ``Judge``: the rules the search applies
(rules.py), in the order of its filters (``rules.FILTERS``), each refusal worded
with its numbers (``384 left of 8192 (reserved 512, ratio 1.0, used
7296)``). ``View`` is the world as explain reads it, with the names of
its ids.
"""
import collections

import os_traits
import sqlalchemy as sa

from placement.db import models
from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects import aggregate_rules
from placement.objects.candidates import names as names_mod
from placement.objects.candidates import rules
from placement.objects import trait as trait_obj
from placement.objects import trait_rules

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE

# Per-group steps: the filters, in the order they are judged.
STEPS = [(f.key, f.label) for f in rules.FILTERS]
STEP_INDEX = {key: i for i, (key, _) in enumerate(STEPS)}
# The amount steps, by the rules.amount_level they need.
_AMOUNT_STEPS = ((rules.NO_ROOM, 'resources'),
                 (rules.OUTSIDE_UNITS, 'capacity'),
                 (rules.SERVES, 'units'))


class View:
    """The world as explain reads it, with the words for its ids.

    Provider names are the one thing read beside the world: the world
    does not keep them (a rename changes no answer), and an explanation
    names providers."""

    def __init__(self, ctx, conn, world, groups):
        self.ctx = ctx
        self.world = world
        self.rps = world.rps
        self.name = dict(conn.execute(sa.select(
            models.RP.c.id, models.RP.c.name)).all())
        try:
            tid = trait_obj.id_for_name(ctx, SHARING_TRAIT)
        except exception.TraitNotFound:
            tid = None
        self.sharing = frozenset(world.by_trait.get(tid, ()))
        uuids = set()
        for rg in groups.values():
            uuids |= rg.forbidden_aggs
            for any_of in rg.member_of:
                uuids |= any_of
        self.agg_ids = agg_obj.ids_for_uuids(conn, uuids)
        self.agg_uuid = {aid: u for u, aid in self.agg_ids.items()}
        self._mysql = conn.dialect.name == 'mysql'
        self.by_root = {root: set(ids) for root, ids in world.trees.items()}

    def label(self, rid):
        return self.name.get(rid) or self.rps[rid].uuid

    def root(self, rec):
        return self.rps.get(rec.root, rec)

    def tree_root_of(self, uuid):
        return self.world.root_of(uuid, any_case=self._mysql)

    def traits(self, tids):
        return sorted(trait_obj.name_for_id(self.ctx, t) for t in tids)

    def aggs(self, aids):
        return sorted(self.agg_uuid.get(a, str(a)) for a in aids)


def _asked(resolved, asked, miss):
    """The names asked for the any-of set ``miss`` of ``resolved``."""
    return next(a for r, a in zip(resolved, asked) if r is miss)


def group_name(g):
    return 'group %s' % g.suffix if g.suffix else 'unnumbered group'


def left(inv):
    return int(inv.limit) - inv.used


def _amount_text(g, inv, rc_amount, level):
    """Why ``inv`` of class ``rc_amount`` (name, amount) stops at
    ``level`` (rules.amount_level)."""
    rc, amount = rc_amount
    if level == rules.NO_INVENTORY:
        return 'no %s inventory' % rc
    if level == rules.NO_ROOM:
        return ('%s %d requested, %d left of %d (reserved %d, ratio %s, '
                'used %d)' % (rc, amount, left(inv), inv.total,
                              inv.reserved, inv.allocation_ratio, inv.used))
    bound = rules.min_max_unit(inv, amount)
    if bound is not None:
        return '%s %d requested, %s %d' % ((rc, amount) + bound)
    return '%s %d requested, not a multiple of step_size %d' % (
        rc, amount, inv.step_size)


class Judge:
    """The per-group steps over one view: rules.py's verdicts, in words."""

    def __init__(self, view, wide):
        self.view = view
        self.rps = view.rps
        ctx = view.ctx
        self.root_required, self.root_forbidden = names_mod.root_traits(
            ctx, wide)
        tree = collections.defaultdict(frozenset)
        for root, ids in view.world.trees.items():
            tree[root] = frozenset().union(*(self.rps[i].traits
                                             for i in ids))
        sharing = frozenset().union(*(self.rps[i].traits
                                      for i in view.sharing))
        self._tree_traits = tree
        self._sharing_traits = sharing
        self._all_traits = frozenset().union(*tree.values())
        self._levels = {}

    def judge(self, g, rec):
        """(step key, reason) for the first step ``rec`` fails in ``g``,
        None when it passes them all."""
        if not g.resources and not rules.resourceless_group(g):
            return ('resourceless', 'a group without resources matches no '
                    'provider unless it has required traits or member_of')
        return (self._amounts(g, rec) or self._traits_and_aggs(g, rec) or
                self._in_tree(g, rec) or self._root_required(rec))

    # -- amounts --------------------------------------------------------

    def _levels_of(self, g):
        """{provider id: [(class name, amount, level)]} for ``g``'s
        amounts, None for a provider serving every class; computed once
        for every provider."""
        cached = self._levels.get(('prov', g.suffix))
        if cached is None:
            cached = {}
            for rid, rec in self.rps.items():
                levels = [(name, amt, rules.amount_level(
                    rec.inv, g.rc_ids[name], amt))
                    for name, amt in g.resources]
                cached[rid] = (None if all(lvl == rules.SERVES
                                           for _, _, lvl in levels)
                               else levels)
            self._levels[('prov', g.suffix)] = cached
        return cached

    def _best_levels(self, g, ids):
        """{class name: the best level among providers ``ids``}."""
        best = {}
        levels_of = self._levels_of(g)
        for rid in ids:
            levels = levels_of[rid] or [(rc, amt, rules.SERVES)
                                        for rc, amt in g.resources]
            for rc, _amt, lvl in levels:
                if lvl > best.get(rc, -1):
                    best[rc] = lvl
        return best

    def _tree_levels(self, g, root):
        key = ('tree', g.suffix, root)
        if key not in self._levels:
            self._levels[key] = self._best_levels(
                g, self.view.by_root.get(root, ()))
        return self._levels[key]

    def _sharing_levels(self, g):
        key = ('sharing', g.suffix)
        if key not in self._levels:
            self._levels[key] = self._best_levels(g, self.view.sharing)
        return self._levels[key]

    def inventory(self, g, rec, name):
        return rec.inv.get(g.rc_ids.get(name))

    def _amounts(self, g, rec):
        """Every class present, with room, within the units. A numbered
        group needs each on the provider; the unnumbered group needs one
        class on the provider and each one somewhere in its tree or on a
        sharing provider."""
        if not g.resources:
            return None
        levels = self._levels_of(g)[rec.id]
        if levels is None:
            return None
        for need, key in _AMOUNT_STEPS:
            failing = [(rc, amt) for rc, amt, lvl in levels
                       if lvl == need - 1]
            if g.numbered:
                if failing:
                    return (key, _amount_text(
                        g, self.inventory(g, rec, failing[0][0]),
                        failing[0], need - 1))
                continue
            if all(lvl < need for _rc, _amt, lvl in levels):
                if need == rules.NO_ROOM:
                    return (key, 'no inventory of %s' % ', '.join(
                        rc for rc, _amt in failing))
                return (key, '; '.join(
                    _amount_text(g, self.inventory(g, rec, f[0]), f,
                                 need - 1) for f in failing))
            if rec.id in self.view.sharing:
                continue     # serves other trees: judged when combined
            tree = self._tree_levels(g, rec.root)
            shared = self._sharing_levels(g)
            for rc, amt, lvl in levels:
                if max(tree.get(rc, 0), shared.get(rc, 0)) >= need:
                    continue
                where = self._where(rec)
                if lvl == need - 1:
                    text = _amount_text(g, self.inventory(g, rec, rc),
                                        (rc, amt), need - 1)
                    if where:
                        text += ', nor does any other %s' % where
                    return (key, text)
                return (key, '%s %d requested: no %s can serve it'
                        % (rc, amt, where))
        return None

    def _where(self, rec):
        """The other providers the unnumbered group could use with
        ``rec``, in words ('' when there are none)."""
        alone = len(self.view.by_root.get(rec.root, ())) == 1
        tree = 'provider of its tree (root %s)' % self.view.label(rec.root)
        if not self.view.sharing:
            return '' if alone else tree
        return 'sharing provider' if alone else tree + ' or sharing provider'

    # -- traits and aggregates ------------------------------------------

    def _traits_and_aggs(self, g, rec):
        view = self.view
        if rec.id in view.sharing:
            pool = (self._all_traits,)
        else:
            pool = (self._tree_traits[rec.root], self._sharing_traits)
        root = view.root(rec)
        verdict = rules.group_verdict(g, rec, root, pool)
        if verdict is None:
            return None
        key = verdict.rule
        miss = verdict.detail
        if key == 'required':
            # The names as asked (an unknown one has no id).
            asked = sorted(_asked(g.required, g.rg.required, miss))
            what = ('required trait %s' % asked[0] if len(asked) == 1
                    else 'any of the traits %s' % ', '.join(asked))
            if g.numbered:
                return (key, 'lacks %s' % what)
            if rec.id in view.sharing:
                return (key, 'no provider has %s' % what)
            where = self._where(rec)
            return (key, 'lacks %s%s' % (
                what, ', as does every other %s' % where if where else ''))
        if key == 'forbidden':
            return (key, 'has forbidden trait %s'
                    % ', '.join(view.traits(miss)))
        if key == 'member_of':
            asked = sorted(_asked(g.member_of, g.rg.member_of, miss))
            what = ('aggregate %s' % asked[0] if len(asked) == 1
                    else 'any of the aggregates %s' % ', '.join(asked))
            if not g.numbered and root is not rec:
                return (key, 'neither it nor its root %s is in %s'
                        % (view.label(root.id), what))
            return (key, 'not in %s' % what)
        text = 'in forbidden aggregate %s' % ', '.join(view.aggs(miss))
        if aggregate_rules.forbidden_aggregates(rec.aggs, miss) is None:
            text += ' (via its root %s)' % view.label(root.id)
        return (key, text)

    # -- trees ----------------------------------------------------------

    def _in_tree(self, g, rec):
        if not (g.rg.in_tree and g.resources):
            return None
        if g.tree_root is None:
            return ('in_tree', 'in_tree %s names no provider' % g.rg.in_tree)
        if rules.in_tree(rec.root, g.tree_root) is not None:
            return ('in_tree', 'not in the tree of in_tree %s (root %s)'
                    % (g.rg.in_tree, self.view.label(g.tree_root)))
        return None

    def _root_required(self, rec):
        if rec.id in self.view.sharing:
            # Judged on the roots of the trees it serves (combination).
            return None
        root = self.view.root(rec)
        miss = trait_rules.root_required(root.traits, self.root_required,
                                   self.root_forbidden)
        if miss is None:
            return None
        kind, tids = miss
        label = self.view.label(root.id)
        if kind == 'required':
            return ('root_required', 'its root %s lacks root_required '
                    'trait %s' % (label, self.view.traits(tids)[0]))
        return ('root_required', 'its root %s has forbidden root trait %s'
                % (label, ', '.join(self.view.traits(tids))))

    def passes_but(self, g, rec, rc):
        """``rec`` passes every step of ``g`` but those about class
        ``rc``."""
        if g.numbered:
            for other, amount in g.resources:
                inv = self.inventory(g, rec, other)
                if other != rc and (inv is None or
                                    not rules.serves(inv, amount)):
                    return False
        return not (self._traits_and_aggs(g, rec) or
                    self._in_tree(g, rec) or self._root_required(rec))
