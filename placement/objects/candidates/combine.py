"""Combine gathered providers into allocation candidates: a pure function.

Either engine (search.py over the in-memory world, sql.py) hands over,
per request group and per anchor root, the providers that can serve each
requested amount on their own and pass the group's rules (rules.py). What is
left is to pick one provider per group (one per resource class for the
unnumbered group) so that, together, the picks respect:

* capacity: several groups may draw on one provider; the summed amount per
  (provider, class) must fit ``capacity - used`` and ``max_unit``;
* traits of the unnumbered group: the providers it uses must collectively
  hold every required any-of set and none may hold a forbidden trait
  (numbered groups were filtered per provider already);
* ``group_policy=isolate``: numbered groups use distinct providers;
* ``same_subtree``: the providers of the named groups all hang below one of
  them;
* old microversions (< 1.29, trees present): one provider per tree.

The search is depth first, one group at a time, per anchor; a branch is
dropped at its first violation and the generator yields each candidate as
soon as it is complete, so a caller that wants ``limit`` candidates stops
after ``limit`` of them: the work is proportional to the output, never to
the Cartesian product of the groups' provider lists.

The order is deterministic: anchors as given (ascending by default) and
each group's providers in the order gathered, upstream's where upstream
agrees. A random sample (randomize_allocation_candidates) is not the
first candidates of some random order -- a root's would come together --
but drawn (sample.py), each drawn combination judged by ``Checker``, the
same search over one choice per step.

Identical candidates reached from two anchors (a request served wholly
by a sharing provider) are yielded once, as upstream's set does. Where
upstream 16.0.0 drops candidates that meet every documented rule, this
combiner keeps them (doc/source/candidates-engine.rst).
"""
import functools
import itertools
import operator

from placement.objects.candidates import combination
from placement.objects.candidates import model
from placement.objects.candidates import rules
from placement.objects import trait_rules

_forbidden_traits = trait_rules.forbidden_traits

class _Search(combination.Checks):
    """The depth-first search over one anchor (or one after another: a
    finished search has given back everything it took); what each pick
    must respect is combination.Checks'."""

    def __init__(self, plan):
        super().__init__(plan)
        self.last = len(plan.groups) - 1
        # The picks to try, one per group position, instead of the
        # anchor's lists (Checker).
        self.forced = None

    # -- the search ----------------------------------------------------
    def run(self, anchor):
        """Yield the picks (a tuple per candidate) under ``anchor``."""
        if self.forced is None:
            if self.plan.injective:
                return self.injective(anchor)
            alone = self.plan.alone
            if alone is not None and not alone.required:
                # Nothing to judge but the class lists (a thousand
                # anchors of the plain request: no generator each).
                # (Each list holds only providers able to serve its
                # class alone: see model.Group.)
                per_rc = alone.by_anchor.get(anchor)
                if per_rc is None:
                    return iter(())
                return zip(itertools.product(*[
                    per_rc.get(rc, ()) for rc, _amount in alone.resources]))
        return iter(self._place(0, anchor))

    def injective(self, anchor):
        """The search when every group is numbered and isolated and no
        same_subtree or tree rule relates them: a candidate is one
        distinct provider per group, and as no provider serves two groups
        no amounts add up, so each provider that can serve its group alone
        will do. itertools then walks the same tree as _place, in the
        same order (lexicographic in each group's list), at C speed: 8
        groups over 8 children are 40,320 candidates."""
        providers = self.providers
        lists = [[rp for rp in g.by_anchor.get(anchor, ())
                  if rules.fits_alone(providers[rp].inventory, g.resources)]
                 for g in self.groups]
        if all(lst == lists[0] for lst in lists):
            return itertools.permutations(lists[0], len(lists))
        width = len(lists)
        return (picks for picks in itertools.product(*lists)
                if len(set(picks)) == width)

    def _place(self, idx, anchor):
        group = self.groups[idx]
        if group.same_provider:
            return self._place_numbered(idx, group, anchor)
        per_rc = group.by_anchor.get(anchor)
        if per_rc is None:
            return ()
        if self.one_per_tree:
            return self._place_unnumbered(idx, group, anchor, per_rc, 0, [])
        return self._place_classes(idx, group, anchor, per_rc)

    def _place_classes(self, idx, group, anchor, per_rc):
        """The unnumbered group's picks, one provider per class, as
        _place_unnumbered makes them (same order, same checks) when no
        tree rule couples the classes: two classes of one group are
        never the same class, so whether a provider can take one class's
        amount does not depend on the other classes' picks. Each class's
        list is filtered once (_class_lists); the picks are then the
        product of those lists (itertools: the usual request, one
        provider per class per anchor, costs a tuple per candidate), and
        only the group's traits and same_subtree are judged per
        combination."""
        held = self.held
        lists = self._class_lists(idx, group, per_rc)
        if lists is None:
            return
        combos = itertools.product(*lists)
        traits = bool(group.required)
        subtrees = bool(self.plan.subtree_checks[idx])
        narrow = bool(self.plan.narrows[idx])
        picks = self.picks
        for chosen in combos:
            if traits and not self._unnumbered_traits_ok(group, chosen):
                continue
            picks[idx] = chosen
            if narrow:
                self._narrow(idx)
            if subtrees and not self._subtrees_ok(idx):
                continue
            if idx == self.last:
                yield tuple(picks)
                continue
            befores = []
            for rp, amounts in zip(chosen, group.per_class):
                before = held.get(rp)
                befores.append((rp, before))
                if before is None:
                    held[rp] = amounts
                else:
                    self._take(rp, amounts)
            yield from self._place(idx + 1, anchor)
            for rp, before in reversed(befores):
                if before is None:
                    del held[rp]
                else:
                    held[rp] = before

    def _class_lists(self, idx, group, per_rc):
        """Per class of the unnumbered group (at ``idx``), the providers
        of ``per_rc`` (the forced pick instead, for the Checker) that can
        take its amount on top of what they hold and hold no forbidden
        trait; None if a class has none."""
        providers = self.providers
        held = self.held
        forbidden = group.forbidden
        forced = self.forced
        lists = []
        for pos, (rc, amt) in enumerate(group.resources):
            ok = []
            choices = (per_rc.get(rc, ()) if forced is None
                       else (forced[idx][pos],))
            for rp in choices:
                prov = providers[rp]
                if forbidden and _forbidden_traits(prov.traits, forbidden):
                    continue
                inv = prov.inventory.get(rc)
                before = held.get(rp)
                if before is not None:
                    wanted = amt + before.get(rc, 0)
                else:
                    wanted = amt
                if inv is None or wanted > inv.most:
                    continue
                ok.append(rp)
            if not ok:
                return None
            lists.append(ok)
        return lists

    def _place_numbered(self, idx, group, anchor):
        # The innermost loop of wide and nested requests: the usual case,
        # a provider nothing was taken from yet, is checked inline.
        held = self.held
        providers = self.providers
        isolate = self.plan.isolate
        taken = self.numbered_rps
        resources = group.resources
        amounts = group.amounts
        subtree_check = bool(self.plan.subtree_checks[idx])
        open_check = bool(self.plan.open_checks[idx])
        narrow = bool(self.plan.narrows[idx])
        pair = self.plan.pairs[idx]
        if pair is not None:
            picks = self.picks
            above = self._above
            subtree_check = False
        last = self.last
        one_per_tree = self.one_per_tree
        if self.forced is not None:
            choices = (self.forced[idx],)
        else:
            choices = group.by_anchor.get(anchor, ())
        for rp in choices:
            if isolate and rp in taken:
                continue
            before = held.get(rp)
            if before is None:
                inventory = providers[rp].inventory
                fits = True
                for rc, amt in resources:
                    inv = inventory.get(rc)
                    if inv is None or amt > inv.most:
                        fits = False
                        break
                if not fits:
                    continue
            elif not self._fits(rp, resources):
                continue
            self.picks[idx] = rp
            if narrow:
                self._narrow(idx)
            if pair is not None:
                a, b = picks[pair[0]], picks[pair[1]]
                if not (above(a, b) or above(b, a)):
                    continue
            elif subtree_check and not self._subtrees_ok(idx):
                continue
            if open_check and not self._may_complete(idx, anchor):
                continue
            if one_per_tree and not self._claim_tree(rp):
                continue
            if not resources:
                pass
            elif before is None:
                held[rp] = amounts
            else:
                self._take(rp, amounts)
            if isolate:
                taken.add(rp)
            if idx == last:
                yield tuple(self.picks)
            else:
                yield from self._place(idx + 1, anchor)
            if isolate:
                taken.discard(rp)
            if not resources:
                pass
            elif before is None:
                del held[rp]
            else:
                held[rp] = before
            if one_per_tree:
                self._release_tree(rp)

    def _place_unnumbered(self, idx, group, anchor, per_rc, pos, chosen):
        if pos == len(group.resources):
            if not self._unnumbered_traits_ok(group, chosen):
                return
            self.picks[idx] = tuple(chosen)
            if self.plan.narrows[idx]:
                self._narrow(idx)
            if self.plan.subtree_checks[idx] and not self._subtrees_ok(idx):
                return
            if idx == self.last:
                yield tuple(self.picks)
            else:
                yield from self._place(idx + 1, anchor)
            return
        rc, amt = group.resources[pos]
        one = ((rc, amt),)
        amounts = group.per_class[pos]
        forbidden = group.forbidden
        providers = self.providers
        held = self.held
        if self.forced is not None:
            choices = (self.forced[idx][pos],)
        else:
            choices = per_rc.get(rc, ())
        for rp in choices:
            if forbidden and _forbidden_traits(providers[rp].traits,
                                               forbidden):
                continue
            before = held.get(rp)
            if before is None:
                # Nothing taken from it yet: it fits alone.
                inv = providers[rp].inventory.get(rc)
                if inv is None or amt > inv.most:
                    continue
            elif not self._fits(rp, one):
                continue
            if self.one_per_tree and not self._claim_tree(rp):
                continue
            if before is None:
                held[rp] = amounts
            else:
                self._take(rp, amounts)
            chosen.append(rp)
            yield from self._place_unnumbered(idx, group, anchor, per_rc,
                                              pos + 1, chosen)
            chosen.pop()
            if before is None:
                del held[rp]
            else:
                held[rp] = before
            if self.one_per_tree:
                self._release_tree(rp)


class Checker:
    """Whether given picks are a candidate under an anchor: the search's
    own rules (capacity summed over groups, isolate, unnumbered traits,
    same_subtree, one provider per tree) applied to one choice per step.
    The random sample (sample.py) draws picks and asks this.

    ``groups`` is the search order (combination.Plan's, a function of the request
    alone): picks are given in it, and candidates made of them
    (``candidate``) are alike position by position with combine's."""

    def __init__(self, providers, groups, isolate=False, same_subtrees=(),
                 one_provider_per_tree=False):
        plan = combination.Plan(providers, groups, isolate, same_subtrees,
                     one_provider_per_tree)
        self.groups = plan.groups
        self._search = _Search(plan)
        # The usual request (Plan.alone): judged by its class lists and
        # traits, no search.
        self._alone = plan.alone
        # Isolated numbered groups use distinct providers: most drawn
        # picks of a wide request fail that, told before any search.
        self._distinct = (operator.itemgetter(*[
            pos for pos, g in enumerate(plan.groups) if g.same_provider])
            if isolate and sum(g.same_provider for g in plan.groups) > 1
            else None)

    def ok(self, anchor, picks):
        """``picks`` (per group in ``groups`` order: a provider id, or a
        tuple of them per class for the unnumbered group) are a candidate
        under ``anchor``, each drawn from that anchor's lists."""
        if self._distinct is not None:
            numbered = self._distinct(picks)
            if len(set(numbered)) < len(numbered):
                return False
        search = self._search
        search.forced = picks
        group = self._alone
        if group is not None:
            # Drawn from its class lists, which the engines filled with
            # providers able to serve the class alone (model.Group).
            return search._unnumbered_traits_ok(group, picks[0])
        # Run to the end (at most one result): the search gives back what
        # it took only when it finishes.
        return sum(1 for _ in search.run(anchor)) > 0

    def candidate(self, picks):
        return model.Candidate(self.groups, picks)


def viable_anchors(groups):
    """Anchors that every group can use, in ascending id order."""
    anchors = None
    for g in groups:
        keys = set(g.by_anchor)
        if not g.same_provider:
            keys = {a for a, per_rc in g.by_anchor.items()
                    if all(per_rc.get(rc) for rc, _ in g.resources)}
        anchors = keys if anchors is None else anchors & keys
    return sorted(anchors or ())


def _roundrobin(generators):
    active = list(generators)
    while active:
        still = []
        for gen in active:
            try:
                yield next(gen)
            except StopIteration:
                continue
            still.append(gen)
        active = still


def _kept(search, searches, anchor):
    """``search.run(anchor)``, as ``searches`` (world.World.searches)
    kept it when it has, else kept there once run to its end."""
    picks = searches.get(anchor)
    if picks is not None:
        return picks
    return _keeping(search.run(anchor), searches, anchor)


def _keeping(run, searches, anchor):
    got = []
    for picks in run:
        got.append(picks)
        yield picks
    searches.put(anchor, got)


def combine(providers, groups, isolate=False, same_subtrees=(),
            one_provider_per_tree=False, strategy='depth-first',
            anchors=None, seen=None, shared_ids=None, searches=None):
    """Yield Candidates, one per distinct allocation request.

    :param providers: {id: Provider} for every provider a group may use.
    :param groups: list of Group.
    :param isolate: group_policy=isolate.
    :param same_subtrees: list of sets of suffixes.
    :param one_provider_per_tree: drop candidates using two providers of
        one tree (microversions before 1.29 when trees exist).
    :param strategy: 'depth-first' (anchor after anchor) or
        'breadth-first' (round-robin across anchors).
    :param anchors: the anchor roots to try, in order; default all viable.
    :param seen: a set shared across calls to drop duplicates.
    :param shared_ids: ids of providers usable under several anchors
        (sharing providers) when the caller combines in several batches;
        default: worked out from ``groups``.
    :param searches: depth-first, where the picks under an anchor are
        kept between requests (world.World.searches): only when they
        depend on the anchor's tree alone (no sharing provider).
    """
    if not groups:
        return
    if anchors is None:
        anchors = viable_anchors(groups)
    if seen is None:
        seen = set()

    # Only a candidate made wholly of providers that several anchors can
    # use (sharing providers) can come out twice; key only those.
    if shared_ids is not None:
        multi = set(shared_ids)
    else:
        seen_under = {}
        for g in groups:
            for anchor, rps in g.by_anchor.items():
                if not g.same_provider:
                    rps = [rp for lst in rps.values() for rp in lst]
                for rp in rps:
                    seen_under.setdefault(rp, set()).add(anchor)
        multi = {rp for rp, anc in seen_under.items() if len(anc) > 1}
    plan = combination.Plan(providers, groups, isolate, same_subtrees,
                 one_provider_per_tree)
    search_groups = plan.groups

    if strategy == 'breadth-first':
        stream = _roundrobin(_Search(plan).run(a) for a in anchors)
    else:
        # Anchor after anchor: one search serves them all.
        search = _Search(plan)
        run = search.run if searches is None else functools.partial(
            _kept, search, searches)
        stream = itertools.chain.from_iterable(map(run, anchors))
    if not multi:
        # No candidate can come out twice: made at C speed.
        make = functools.partial(model.Candidate, search_groups)
        yield from map(make, stream)
        return
    for picks in stream:
        cand = model.Candidate(search_groups, picks)
        if cand.provider_ids() <= multi:
            key = cand.key()
            if key in seen:
                continue
            seen.add(key)
        yield cand
