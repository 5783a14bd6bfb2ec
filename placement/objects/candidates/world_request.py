"""What each request group may use in the in-memory world (world/), for
the walk (walk.py) over the world (search.py): names resolved (names.py), per anchor root the
providers of a batch of trees that pass the group's rules (rules.py) and
can serve its amounts alone, the sharing providers anchored to a root by
an aggregate, which trees to look at (anchor_roots), and what the random
sample needs (its bound, sample.py).
"""
import bisect
import functools
import itertools
import operator

from oslo_log import log as logging
import os_traits

from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects import aggregate_rules
from placement.objects.candidates import names
from placement.objects.candidates import rules
from placement.objects import trait as trait_obj
from placement.objects import trait_rules

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE

Empty = names.Empty
_INV = operator.attrgetter('inv')
_serves = rules.serves


def _holds(ascending, item):
    """Whether ``item`` is in the sorted sequence ``ascending``."""
    i = bisect.bisect_left(ascending, item)
    return i < len(ascending) and ascending[i] == item


class Request:
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
        return rec is not None and trait_rules.root_required(
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
                if not g.numbered and aggregate_rules.member_of(
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
                        r for r in roots_ if aggregate_rules.forbidden_aggregates(
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
                if aggregate_rules.shares_via_aggregate(aggs, tree_aggs):
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
