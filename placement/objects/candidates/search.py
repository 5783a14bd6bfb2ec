"""Allocation candidates searched in the in-memory world (``world/``).

The general algorithm, in one place:

1. resolve names to ids (``_Request``, through names.py); names that do
   not exist answer as upstream does (400, or an empty answer when an
   earlier group has no candidates anyway);
2. walk the trees' roots by id (``_walk``) a batch at a time (or draw
   them at random, ``_sample``); per batch and per request group collect,
   per anchor root, the providers able to serve the group on their own
   (capacity, min_unit, max_unit, step_size, traits, aggregates, in_tree,
   root_required: the functions of rules.py), plus the sharing providers
   anchored to the root by an aggregate (``_Request.groups_for``);
3. hand those to the pure combiner (``combine.py``), which yields the
   candidates lazily, and stop at the limit.

The rules each group follows are upstream's, written once in rules.py;
the SQL engine (sql.py, for databases that do not count their changes)
states them in SQL.

One fast path, behind one seam (``_sole``): one unnumbered group, no
sharing providers, over trees each with at most one provider having a
class it asks for (every tree of a flat world; a host's compute node
when its NUMA nodes and devices have other classes): each tree's
candidate is that provider holding the whole request, or none. A batch
with a tree of two such providers goes the general way. Its answers are
the general path's (``test_sole_fast_path_answers_as_the_general_path``
checks they agree).

How it stays flat in the number of providers under a limit: the walk
stops as soon as ``limit`` candidates are found. With randomize on, a
``limit`` is a uniform random sample of the whole answer, as upstream's
random.sample of every candidate: ``_sample`` draws it root by root
(sample.py has the method and why it is exact), looking at a root when it
is first drawn, so the work grows with the roots drawn, not with the
world, as long as most roots fit. The bound it needs, the most choices a
root can offer, comes from the world's counts of providers per class and
tree (per_tree.PerTree) and the sharing providers (``_Request.bound``).
When that bound is 1 every root is one candidate or none (every flat
world; the plain request over hosts whose compute node alone has its
classes), and the first ``limit`` found by the walk over a lazily
shuffled order of the roots (``_random_order``) are already such a
sample, found at the plain walk's cost.
"""
import bisect
import functools
import itertools
import operator
import random

from oslo_log import log as logging
import os_traits

from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects.candidates import combine
from placement.objects.candidates import model
from placement.objects.candidates import names
from placement.objects.candidates import rules
from placement.objects.candidates import sample
from placement.objects import trait as trait_obj

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE
# Roots looked at in the first batch of a walk (each next is four times
# more), and at least this many per candidate still wanted.
_FIRST_BATCH = 8
# Roots looked at per batch when a sample enumerates after all.
_LOOK_CHUNK = 4096


Empty = names.Empty
_INV = operator.attrgetter('inv')
_serves = rules.serves


def _holds(ascending, item):
    """Whether ``item`` is in the sorted sequence ``ascending``."""
    i = bisect.bisect_left(ascending, item)
    return i < len(ascending) and ascending[i] == item


def _random_order(items):
    """``items`` (distinct) in a uniformly random order, drawn lazily:
    taking k of them costs O(k) whatever len(items). The order in which
    items first come up in uniform draws with replacement is uniformly
    random (random.choices: a fifth of randrange's cost); once half have
    come up, the rest follow shuffled."""
    n = len(items)
    seen = set()
    choices = random.choices
    while 2 * len(seen) < n:
        for item in choices(items, k=max(_FIRST_BATCH, len(seen) // 4)):
            if item not in seen:
                seen.add(item)
                yield item
    rest = [item for item in items if item not in seen]
    random.shuffle(rest)
    yield from rest


class _Request:
    """One request resolved against ``world``."""

    def __init__(self, ctx, conn, world, groups, wide):
        self.ctx = ctx
        self.world = world
        self.rps = world.rps
        self.wide = wide
        self.trees = world.children > 0
        self.sharing = self._sharing_providers()
        self._sharing_rows = {}
        self.debug = names.LOG.isEnabledFor(logging.DEBUG)
        self.groups = self._resolve(conn, groups)

    def _sharing_providers(self):
        try:
            tid = trait_obj.id_for_name(self.ctx, SHARING_TRAIT)
        except exception.TraitNotFound:
            return frozenset()
        return frozenset(self.world.by_trait.get(tid, ()))

    # -- names to ids -------------------------------------------------------

    def _resolve(self, conn, groups):
        self.root_required, self.root_forbidden = names.root_traits(
            self.ctx, self.wide)
        if self.root_required or self.root_forbidden:
            if not any(self.rps[r].parent is None and self.root_ok(r)
                       for r in self.world.roots if r in self.rps):
                raise Empty()
        agg_uuids = set()
        for rg in groups.values():
            for any_of in rg.member_of:
                agg_uuids |= any_of
            agg_uuids |= rg.forbidden_aggs
        agg_ids = agg_obj.ids_for_uuids(conn, agg_uuids)
        self._mysql = conn.dialect.name == 'mysql'
        return names.resolve(self.ctx, groups, agg_ids, self)

    def tree_root_of(self, uuid):
        return self.world.root_of(uuid, any_case=self._mysql)

    def any_in_all(self, member_of):
        first = set()
        for aid in member_of[0]:
            first |= self.world.by_agg.get(aid, set())
        return any(all(self.rps[rid].aggs & m for m in member_of)
                   for rid in first)

    # -- filters ------------------------------------------------------------

    def root_ok(self, root):
        """``root`` passes root_required."""
        rec = self.rps.get(root)
        return rec is not None and rules.root_required(
            rec.traits, self.root_required, self.root_forbidden) is None

    def passes(self, g, rec, alone=False):
        """``rec`` passes group ``g``'s trait and aggregate rules;
        ``alone``: as the only provider ``g`` draws on (its required
        traits its own)."""
        pool = None
        if alone:
            pool = (rec.traits,)
        elif g.required and not g.numbered and not self.sharing:
            # Without sharing providers the traits must come from the
            # tree itself.
            pool = ((self.world.tree_traits[rec.root],) if self.trees
                    else (rec.traits,))
        return rules.group_verdict(g, rec, self.rps.get(rec.root, rec),
                                   pool) is None

    def _rows_of(self, g, rec, out):
        """Append (provider, root, class id) for each class ``rec`` can
        serve on its own for ``g`` ((provider, root, None) for a
        resourceless group it matches)."""
        if not g.amounts:
            if rules.resourceless_group(g) and self.passes(g, rec):
                out.append((rec.id, rec.root, None))
            return
        inv = rec.inv
        fitting = [(rec.id, rec.root, rc) for rc, amount in g.amounts
                   if rc in inv and _serves(inv[rc], amount)]
        if fitting and self.passes(g, rec):
            out.extend(fitting)

    def _sharing_rows_for(self, g):
        """Rows of sharing providers able to serve ``g`` (any root)."""
        rows = self._sharing_rows.get(g.suffix)
        if rows is not None:
            return rows
        rows = []
        if self.sharing and not (g.tree_root is not None and not g.numbered):
            for sp in sorted(self.sharing):
                rec = self.rps[sp]
                if g.tree_root is not None and g.amounts and rules.in_tree(
                        rec.root, g.tree_root) is not None:
                    continue
                if not g.numbered and rules.member_of(
                        rec.aggs, g.member_of) is not None:
                    # The sharing provider itself must be in them.
                    continue
                self._rows_of(g, rec, rows)
        self._sharing_rows[g.suffix] = rows
        return rows

    # -- a batch of roots ------------------------------------------------

    def combine_groups(self, groups):
        """groups_for every root, for ``groups`` (see names.resolve)."""
        return self.groups_for(self.world.roots, groups)

    def groups_for(self, roots, groups=None):
        """model.Group per request group (``groups``, default the
        request's) for the trees under ``roots`` (ascending ids); None
        when some group has nothing there."""
        rps = self.rps
        batch = self.batch(roots, groups)
        per_group = []
        sharing_used = set()
        for g in self.groups if groups is None else groups:
            by_anchor = self._in_trees(g, batch)
            srows = self._sharing_rows_for(g) if self.sharing else []
            sharing_used.update(r[0] for r in srows)
            if self.debug:
                g.log_matches(by_anchor, srows,
                              '%d roots looked at' % len(roots))
            if not by_anchor and not srows:
                return None
            per_group.append((g, by_anchor, srows))
        anchors_of = self._anchors_of(sharing_used, roots)
        out = []
        for g, by_anchor, srows in per_group:
            bad_roots = set()
            if srows and g.forbidden_aggs and not g.numbered:
                for roots_ in anchors_of.values():
                    bad_roots.update(
                        r for r in roots_ if rules.forbidden_aggregates(
                            rps[r].aggs, g.forbidden_aggs) is not None)
            out.append(g.combine_group(rules.add_sharing(
                g, by_anchor, srows, anchors_of, bad_roots)))
        return out

    def batch(self, roots, groups=None):
        """The _Batch of the trees under ``roots`` that root_required
        lets anchor, as ``groups`` (default the request's) read it."""
        if self.root_required or self.root_forbidden:
            roots = [r for r in roots if self.root_ok(r)]
        return _Batch(self.world, roots, self._classes(groups))

    def _classes(self, groups):
        """The classes ``groups`` ask for (a frozenset), when each asks
        for some: a batch needs no other provider (_in_trees keeps only
        those serving one of its group's classes). None when a group asks
        for none (it reads every provider)."""
        groups = self.groups if groups is None else groups
        if all(g.amounts for g in groups):
            return frozenset(rc for g in groups for rc, _amount in g.amounts)
        return None

    def _in_trees(self, g, batch):
        """The providers of the trees of ``batch`` (a _Batch) able to
        serve ``g`` on their own, in id order per anchor root: {root:
        [ids]} for a numbered group (each serving all of it), {root:
        {class name: [ids]}} for the unnumbered one.

        What an inventory can serve is judged once per kind (providers
        alike share one, see world/store.py), and only the providers whose
        inventory serves something are looked at one by one (their
        records made): in a cloud of alike trees, a few checks and a pass
        at C speed."""
        passes = self.passes
        numbered = g.numbered
        out = {}
        if not g.amounts:
            # in_tree upstream ignores for resourceless groups.
            if rules.resourceless_group(g):
                for rec in batch.recs():
                    if passes(g, rec):
                        out.setdefault(rec.root, []).append(rec.id)
            return out
        fits = self.fitting(g, batch)
        filtered = bool(g.required or g.forbidden or g.member_of or
                        g.forbidden_aggs)
        tree_root = g.tree_root
        last = None
        # Records only where a filter reads one (a random sample's trees
        # are new each time: made later, if picked).
        if filtered:
            rows = ((rec.id, rec.root, rec) for rec in batch.recs(fits))
        else:
            rows = zip(itertools.compress(batch.ids, fits),
                       itertools.compress(batch.roots, fits),
                       itertools.repeat(None))
        for (rid, root, rec), fitting in zip(rows, filter(None, fits)):
            if tree_root is not None and root != tree_root:
                continue
            if filtered and not passes(g, rec):
                continue
            if root != last:
                # A tree's providers come one after another.
                mine = out[root] = [] if numbered else {}
                last = root
            if numbered:
                mine.append(rid)
                continue
            for name in fitting:
                per_rc = mine.get(name)
                if per_rc is None:
                    per_rc = mine[name] = []
                per_rc.append(rid)
        return out

    def fitting(self, g, batch, whole=False):
        """Per provider of ``batch``, the names of the classes of ``g``
        its inventory can serve on its own (_fitting), judged once per
        kind; ``whole``: whether it serves every class, its room as the
        combiner reads it too (rules.fits_alone)."""
        names = {rc_id: name for name, rc_id in g.rc_ids.items()}
        # Kept by the world across batches and requests (a sample looks
        # at a few roots at a time; the same kinds come again and again).
        memo = self.world.fits((whole, g.numbered, tuple(
            (rc, names[rc], amount) for rc, amount in g.amounts)))
        kinds = self.world.kinds
        for key, inv in batch.invs.items():
            if key not in memo:
                fitting = self._fitting(g, inv, names)
                memo[key] = (len(fitting) == len(g.amounts) and
                             rules.fits_alone(kinds[key].prov_inv,
                                              g.resources)
                             ) if whole else fitting
        return list(map(memo.__getitem__, batch.inv_keys))

    @staticmethod
    def _fitting(g, inv, names):
        """Names of the classes of ``g`` that ``inv`` can serve on its
        own; for a numbered group all of them or none."""
        fitting = tuple(names[rc] for rc, amount in g.amounts
                        if rc in inv and _serves(inv[rc], amount))
        if g.numbered and len(fitting) < len(g.amounts):
            return ()
        return fitting

    def _anchors_of(self, sharing_ids, roots):
        """{sharing provider id: {roots among ``roots`` whose tree has a
        provider sharing an aggregate with it}}, roots judged by
        root_required/root_forbidden."""
        if not sharing_ids:
            return {}
        rps = self.rps
        sp_aggs = {sp: rps[sp].aggs for sp in sharing_ids if rps[sp].aggs}
        out = {}
        if not sp_aggs:
            return out
        filtered = self.root_required or self.root_forbidden
        for root in roots:
            if filtered and not self.root_ok(root):
                continue
            tree_aggs = set()
            for rid in self.world.trees.get(root, ()):
                tree_aggs |= rps[rid].aggs
            if not tree_aggs:
                continue
            for sp, aggs in sp_aggs.items():
                if rules.shares_via_aggregate(aggs, tree_aggs):
                    out.setdefault(sp, set()).add(root)
        return out

    def providers(self, roots=(), rp_ids=()):
        """{id: model.Provider} for the combiner: the SQL engine's reads
        the trees under ``roots`` and of ``rp_ids``; the world's holds
        every provider, made as the combiner looks at them and kept
        until they change (world.ProviderModels)."""
        return self.world.models

    def searches(self, nested_aware):
        """world.World.searches for this request: what the combiner found
        under an anchor, kept until its tree changes. The key names all a
        search under one anchor reads of the request: the groups as
        resolved, group_policy, same_subtree, whether one provider per
        tree is asked for (old microversions, when trees exist), and
        whether the world has sharing providers (passes: where the
        unnumbered group's traits may come from).
        None when a sharing provider can serve a group: an anchor's lists
        then hold providers of other trees, whose changes do not touch
        its tree."""
        if self.sharing and any(map(self._sharing_rows_for, self.groups)):
            return None
        wide = self.wide
        groups = tuple(
            (g.suffix, g.numbered, tuple(g.resources), tuple(g.amounts),
             tuple(map(frozenset, g.required)), frozenset(g.forbidden),
             tuple(map(frozenset, g.member_of)),
             frozenset(g.forbidden_aggs), g.tree_root,
             tuple(map(frozenset, g.rg.required)),
             frozenset(g.rg.forbidden))
            for g in self.groups)
        return self.world.searches((
            groups, wide.group_policy,
            tuple(map(frozenset, wide.same_subtrees)),
            not nested_aware and self.trees, bool(self.sharing)))

    # -- which roots may anchor a candidate -----------------------------------

    @functools.cached_property
    def anchor_roots(self):
        """The roots whose trees may anchor a candidate, sorted, when the
        world's indexes tell fewer than every root (None: any may). Never
        narrower than the answer:

        * in_tree on the unnumbered group with resources: its providers
          come from the anchor's own tree (no sharing provider serves it
          then), so the anchor is that tree; without sharing providers
          the same holds for a numbered group's in_tree;
        * without sharing providers every provider of a candidate is in
          the anchor's tree, so each any-of set of a group's required
          traits and of its member_of is met by some provider of the
          tree (its own traits or aggregates, or the unnumbered group's
          root's aggregates: in the tree too).

        A walk (or a sample) over these roots alone answers as one over
        every root: the others have no candidate. None, too, when most
        trees may (World.roots_with_each)."""
        trees = None
        wanted = set()
        for g in self.groups:
            if g.tree_root is not None and g.amounts and (
                    not g.numbered or not self.sharing):
                trees = ({g.tree_root} if trees is None
                         else trees & {g.tree_root})
            if self.sharing:
                continue
            wanted.update(('trait', frozenset(any_of))
                          for any_of in g.required)
            wanted.update(('agg', frozenset(any_of))
                          for any_of in g.member_of)
        roots = self.world.roots_with_each(frozenset(wanted)) \
            if wanted else None
        if trees is None:
            return roots
        return sorted(root for root in trees
                      if roots is None or _holds(roots, root))

    # -- what the random sample needs (sample.py) ---------------------------

    def sample_roots(self):
        """The roots a sample draws from: every root, or fewer when fewer
        can serve -- the roots whose trees hold every class asked for
        (unless sharing providers may serve it), the roots with the
        root_required traits, and anchor_roots. A root that cannot serve
        only wastes the attempts drawn on it (P_r = 0 in sample.py):
        leaving it out changes nothing of the sample but its cost."""
        roots = self.world.roots
        with_class = []
        if not self.sharing:
            per_tree = self.world.per_tree()
            with_class = [per_tree.roots_with(rc) for g in self.groups
                          for rc, _amount in g.amounts]
        anchors = self.anchor_roots
        if anchors is not None:
            with_class.append(set(anchors))
        having = [self.world.by_trait.get(t, ())
                  for t in self.root_required]
        fewest = min(with_class + having, key=len, default=roots)
        if len(fewest) >= len(roots):
            return roots
        rps = self.rps
        return sorted(r for r in fewest
                      if rps[r].root == r and self.root_ok(r)
                      and all(r in s for s in with_class))

    def bound(self):
        """At least the product of the lengths of any root's lists (C in
        sample.py). A list holds providers of the root's tree, plus
        sharing providers: per class of the unnumbered group, the tree's
        providers with inventory of that class; for a numbered group,
        those with inventory of each of its classes (resourceless: any
        provider) and one trait of each required any-of set. So the most
        providers with that class (or trait) one tree has
        (per_tree.PerTree), plus the sharing providers able to serve it,
        bounds each list; their product bounds every root's."""
        per_tree = self.world.per_tree()
        total = 1
        for g in self.groups:
            srows = self._sharing_rows_for(g) if self.sharing else ()
            if g.numbered or not g.amounts:
                own = min((per_tree.most(rc) for rc, _ in g.amounts),
                          default=per_tree.most(None))
                for any_of in g.required if g.numbered else ():
                    own = min(own, sum(map(per_tree.most_with_trait,
                                           any_of)))
                total *= own + len({row[0] for row in srows})
                continue
            for rc, _amount in g.amounts:
                total *= per_tree.most(rc) + len(
                    {rp for rp, _root, rc_ in srows if rc_ == rc})
        return total

    def sharing_alone(self):
        """Whether a candidate may be made of sharing providers alone
        (and so come from several anchors): each group, each class of
        the unnumbered one, has a sharing provider able to serve it."""
        if not self.sharing:
            return False
        for g in self.groups:
            srows = self._sharing_rows_for(g)
            if g.numbered:
                served = {}
                for rp, _root, rc in srows:
                    served.setdefault(rp, set()).add(rc)
                need = {rc for rc, _ in g.amounts}
                if not any(have >= need for have in served.values()):
                    return False
            elif not {rc for rc, _ in g.amounts} <= {
                    rc for _rp, _root, rc in srows}:
                return False
        return True

    # -- the fast path ------------------------------------------------------

    @functools.cached_property
    def sole_group(self):
        """The request's only group when a tree's candidate can only be
        one provider holding the whole request, or none, wherever the
        tree has one provider with inventory of a class the group asks
        for (_sole): the unnumbered group with resources, alone, without
        sharing providers or same_subtree. None otherwise."""
        if (self.sharing or len(self.groups) != 1 or
                self.wide.same_subtrees):
            return None
        g = self.groups[0]
        if g.numbered or not g.amounts:
            return None
        return g

    @functools.cached_property
    def sole_combine_group(self):
        return self.sole_group.combine_group({})


class _Batch:
    """The providers of the trees under some roots, in the roots' order
    then by id (those with inventory of one of ``classes``, when the
    groups name some), as the groups of one batch read them: their ids, the
    index of the kind each is (world.Kind: providers alike share one, so
    what an inventory serves is judged once per kind), their roots and
    the distinct kinds' inventories. A provider's record is made only
    when a group's filter reads it (``recs``)."""

    __slots__ = ('ids', 'inv_keys', 'roots', 'invs', 'rps')

    def __init__(self, world, roots, classes=None):
        self.ids, self.inv_keys, self.roots = world.tree_rows(roots,
                                                              classes)
        kinds = world.kinds
        self.invs = {k: kinds[k].inv for k in set(self.inv_keys)}
        self.rps = world.rps

    def recs(self, which=None):
        """The records of the providers (those where ``which`` is true)."""
        ids = self.ids if which is None else itertools.compress(
            self.ids, which)
        return map(self.rps.__getitem__, ids)


def _sole(req, g, roots):
    """Seam of the fast path: the candidates of the trees under ``roots``
    (in that order) for ``g``, req.sole_group, when each tree has at most
    one provider with inventory of a class ``g`` asks for (a flat world's
    trees; or the compute node of a host whose NUMA nodes and devices
    have other classes): its candidate is then that provider holding
    every class and passing the group's rules as the only provider it
    draws on, or none. None when some tree has two (the general path
    answers the batch). One look at each tree's row, no lists by anchor,
    no search: what the general path answers
    (test_sole_fast_path_answers_as_the_general_path)."""
    batch = req.batch(roots)
    tree_roots = batch.roots
    if len(set(tree_roots)) < len(tree_roots):
        return None
    whole = req.fitting(g, batch, whole=True)
    picked = dict(zip(itertools.compress(tree_roots, whole),
                      itertools.compress(batch.ids, whole)))
    if g.tree_root is not None:
        picked = {g.tree_root: picked[g.tree_root]} \
            if g.tree_root in picked else {}
    if g.required or g.forbidden or g.member_of or g.forbidden_aggs:
        rps = req.rps
        picked = {root: rid for root, rid in picked.items()
                  if req.passes(g, rps[rid], alone=True)}
    # tree_rows gives the trees changed since the snapshot last.
    chosen = [picked[root] for root in roots if root in picked]
    return model.Candidate.wholes(req.sole_combine_group, chosen)


def _batches(roots, cap, found):
    """``roots`` (an iterator) in lists for the walk: ``_FIRST_BATCH`` at
    first; then, under a ``cap``, as many as the candidates still wanted
    need at the rate the trees looked at so far gave them (``found``: the
    walk's list), a fiftieth more (one batch more costs less than
    looking at trees for nothing), at least ``_FIRST_BATCH``; four times
    more than the last when none came yet, or without a cap. A thousand
    candidates over trees giving one each look at about 1,020 trees; over
    trees giving 24 each (same_subtree over NUMA nodes and devices), at
    about 45, not a thousand."""
    size = _FIRST_BATCH
    looked = 0
    while True:
        batch = list(itertools.islice(roots, size))
        if not batch:
            return
        yield batch
        looked += len(batch)
        if cap is not None and found:
            wanted = cap - len(found)
            size = max(_FIRST_BATCH,
                       -(-wanted * looked * 51 // (len(found) * 50)))
        else:
            size *= 4


def _walk(req, roots, cap, wide, nested_aware, strategy):
    """Candidates from the trees under ``roots``, a batch of them at a
    time (_batches; breadth-first: one batch of every root, for its
    round-robin runs across every anchor, as upstream's and the SQL
    engine's), anchor by anchor in each batch's order, up to ``cap``: by
    the fast path where it answers the batch (_sole), else gathered
    (groups_for) and combined."""
    isolate = wide.group_policy == 'isolate'
    has_trees = req.trees
    found = []
    if strategy != 'breadth-first':
        batches = _batches(iter(roots), cap, found)
    else:
        batches = iter([list(roots)])
    providers = req.providers()
    seen = set()
    sole = req.sole_group
    searches = req.searches(nested_aware)
    for batch in batches:
        gen = _sole(req, sole, batch) if sole is not None else None
        if gen is None:
            cgroups = req.groups_for(batch)
            if cgroups is None:
                continue
            viable = set(combine.viable_anchors(cgroups))
            if not viable:
                continue
            anchors = [r for r in batch if r in viable]
            gen = combine.combine(
                providers, cgroups, isolate=isolate,
                same_subtrees=wide.same_subtrees,
                one_provider_per_tree=not nested_aware and has_trees,
                strategy=strategy, anchors=anchors, seen=seen,
                shared_ids=req.sharing, searches=searches)
        if cap is None:
            found.extend(gen)
            continue
        found.extend(itertools.islice(gen, cap - len(found)))
        if len(found) >= cap:
            return found
    return found


def _look(req, roots, master):
    """Add to ``master`` (model.Group per group, lists by anchor) the
    lists of the anchors among ``roots`` that every group can use."""
    cgroups = req.groups_for(roots)
    if cgroups is None:
        return
    viable = combine.viable_anchors(cgroups)
    for whole, cg in zip(master, cgroups):
        for anchor in viable:
            whole.by_anchor[anchor] = cg.by_anchor[anchor]


def _attempts(req, roots, master, checker, bound, looked, limit):
    """sample.py's attempts over ``roots``: a root uniformly (with
    replacement), kept with probability P_r / ``bound``, then an element
    of its lists' product uniformly. Roots are drawn a batch ahead
    (``limit`` or 8 at first, then an eighth of as many as drawn so far:
    when most attempts keep a candidate, the first batch leaves only the
    few its duplicates lost to draw, and a tree looked at costs about 9 us
    at a million providers) and those not seen yet looked at together
    (``looked``: root -> (P_r, lists)).
    Once every root was looked at, ``bound`` is the largest P_r, and the
    attempts end if the products hold no more than ``limit`` elements
    (``fill`` takes them all)."""
    groups = checker.groups
    layout = sample.shape(groups)
    randrange = random.randrange
    choices = random.choices
    batch = max(_FIRST_BATCH, limit)
    done = 0
    while True:
        # random.choices: roots[floor(random() * len(roots))], off
        # uniform by less than len(roots) / 2**53 (1e-7 for a billion),
        # at a fifth of randrange's cost.
        drawn = choices(roots, k=batch)
        new = sorted(set(drawn).difference(looked))
        if new:
            _look(req, new, master)
            for root in new:
                lists = sample.lists_of(groups, root)
                looked[root] = (sample.size(lists), lists)
            if len(looked) == len(roots):
                sizes = [n for n, _lists in looked.values()]
                if sum(sizes) <= limit:
                    return
                bound = max(sizes)
        for root in drawn:
            n, lists = looked[root]
            u = randrange(bound) if bound > 1 else 0
            yield (root, sample.decode(layout, lists, u)) if u < n else None
        done += batch
        batch = max(_FIRST_BATCH, done // 8)


def _sample(req, wide, nested_aware, limit):
    """``limit`` candidates, a uniform random sample of the whole answer
    (sample.py)."""
    master = [g.combine_group({}) for g in req.groups]
    providers = req.providers()
    options = dict(isolate=wide.group_policy == 'isolate',
                   same_subtrees=wide.same_subtrees,
                   one_provider_per_tree=not nested_aware and req.trees)
    checker = combine.Checker(providers, master, **options)
    roots = req.sample_roots()
    bound = req.bound() if roots else 0
    if not bound:
        # Some class no provider has.
        return []
    looked = {}
    kept = {}
    if len(roots) * bound > limit and not req.sharing_alone():
        kept = sample.draw(
            limit, _attempts(req, roots, master, checker, bound, looked,
                             limit),
            checker, sample.budget(len(roots)))
    everything = ()
    if len(kept) < limit:
        rest = [r for r in roots if r not in looked]
        for i in range(0, len(rest), _LOOK_CHUNK):
            _look(req, rest[i:i + _LOOK_CHUNK], master)
        everything = combine.combine(
            providers, master, anchors=combine.viable_anchors(master),
            shared_ids=req.sharing, **options)
    return sample.fill(kept, limit, everything)


def find_in_world(ctx, conn, world, groups, wide, nested_aware=True,
                  max_candidates=-1, strategy='depth-first',
                  randomize=False, rendered_as=None):
    """(candidates, providers, has_trees) as engine.find answers, from
    ``world`` (refreshed by the caller, its lock held)."""
    try:
        req = _Request(ctx, conn, world, groups, wide)
    except Empty:
        return [], model.Providers(), world.children > 0
    found = _find(req, wide, nested_aware, max_candidates, strategy,
                  randomize)
    return found, world.answer(found, rendered_as), req.trees


def _find(req, wide, nested_aware, max_candidates, strategy, randomize):
    cap = max_candidates if (max_candidates is not None and
                             max_candidates >= 0) else None
    limit = wide.limit
    roots = req.anchor_roots
    if roots is None:
        roots = req.world.roots
    if randomize and limit is not None and cap is None:
        if req.bound() > 1 or req.sharing_alone():
            return _sample(req, wide, nested_aware, limit)
        # Each root is one candidate or none, and no two roots the same
        # one (each has a provider of its own tree): the first ``limit``
        # found in a uniformly random order of the roots are a uniform
        # sample of the answer, and in a uniformly random order already
        # (the walk keeps its roots' order).
        return _walk(req, _random_order(req.sample_roots()), limit, wide,
                     nested_aware, 'depth-first')
    if limit is not None and not randomize:
        cap = limit if cap is None else min(cap, limit)
    found = _walk(req, roots, cap, wide, nested_aware, strategy)
    if randomize:
        # As upstream: a sample of what max_allocation_candidates let be
        # generated, or all of it shuffled.
        if limit is not None and len(found) > limit:
            found = random.sample(found, limit)
        else:
            random.shuffle(found)
    return found
