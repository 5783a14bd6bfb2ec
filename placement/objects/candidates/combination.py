"""What a combination of picks must respect, in one place: the groups'
search order and same_subtree sets (``Plan``), and the checks of the
search's state as it places one group after another (``Checks``):
amounts summed per provider fit its capacity, one provider per tree
(before 1.29), same_subtree, the unnumbered group's traits; isolate is
one set the search keeps. The search itself, and the random sample's
``Checker``, are combine.py's; what one provider may serve alone is
rules.py's.
"""
from placement.objects.candidates import model
from placement.objects.candidates import rules
from placement.objects import trait_rules


def _ancestors(providers, rp_id):
    seen = []
    while rp_id is not None:
        seen.append(rp_id)
        prov = providers.get(rp_id)
        rp_id = prov.parent_id if prov is not None else None
    return seen


def ancestors_of(providers):
    """rp -> frozenset of its ancestors-or-self, made on first use."""
    return model.OnFirstUse(lambda rp: frozenset(_ancestors(providers, rp)))


class Pair(tuple):
    """The positions of a same_subtree set of two numbered groups."""


class Plan:
    """What every anchor's search shares: the groups in search order and,
    after each one is placed, the same_subtree sets it completes."""

    def __init__(self, providers, groups, isolate, same_subtrees,
                 one_provider_per_tree):
        self.providers = providers
        self.isolate = isolate
        self.one_per_tree = one_provider_per_tree
        # Place the unnumbered group first (it has the most freedom and its
        # traits prune early), then the same_subtree groups together so the
        # subtree check fires as early as possible, then the others.
        in_subtree = [s for sub in same_subtrees for s in sorted(sub)]
        order = {s: i for i, s in enumerate(dict.fromkeys(in_subtree))}
        self.groups = sorted(
            groups, key=lambda g: (g.same_provider,
                                   order.get(g.suffix, len(order))))
        # The same_subtree sets by index, each the positions of its groups
        # (Pair: two numbered groups, checked by their parents).
        sets = []
        for sub in same_subtrees:
            positions = tuple(pos for pos, g in enumerate(self.groups)
                              if g.suffix in sub)
            if len(positions) == 2 and all(
                    self.groups[pos].same_provider for pos in positions):
                positions = Pair(positions)
            sets.append(positions)
        # subtree_checks[i]: the sets complete once group i is placed, as
        # (index, positions). open_checks[i]: those still open with two
        # of their groups or more placed, as (index, the positions of the
        # others), see Checks._may_complete. (The unnumbered group is
        # placed first: only numbered ones have any.) narrows[i]: the
        # sets but pairs group i is in, as (index, the position of the
        # set's group placed before it, None if none), see
        # Checks._narrow.
        self.subtree_checks = []
        self.open_checks = []
        self.narrows = []
        for pos in range(len(self.groups)):
            mine = [(k, positions) for k, positions in enumerate(sets)
                    if pos in positions]
            self.subtree_checks.append(
                [(k, positions) for k, positions in mine
                 if positions[-1] == pos])
            self.open_checks.append(
                [(k, tuple(p for p in positions if p > pos))
                 for k, positions in mine
                 if positions[-1] != pos and positions[1] <= pos])
            self.narrows.append(
                [(k, max((p for p in positions if p < pos), default=None))
                 for k, positions in mine if type(positions) is not Pair])
        # pairs[i]: the positions of the one same_subtree pair of two
        # numbered groups complete once group i is placed, when that is
        # its only check (nova's NUMA node and device), checked inline.
        self.pairs = [checks[0][1] if len(checks) == 1 and
                      type(checks[0][1]) is Pair else None
                      for checks in self.subtree_checks]
        # The usual request, one unnumbered group and no other rule: its
        # picks are its class lists' product, judged for its traits only.
        only = self.groups[0] if len(self.groups) == 1 else None
        self.alone = (only if only is not None and not only.same_provider
                      and not self.subtree_checks[0]
                      and not one_provider_per_tree else None)
        # A wide request: see combine._Search.injective.
        self.injective = (isolate and not one_provider_per_tree
                          and all(g.same_provider for g in self.groups)
                          and not any(self.subtree_checks))
        # Ancestors-or-self of each provider, on first use (same_subtree
        # sets of more than two groups or with the unnumbered group).
        self.ancestors = ancestors_of(providers)


class Checks:
    """The search's state under one anchor, and what each pick must
    respect given the picks before it."""

    def __init__(self, plan):
        self.plan = plan
        self.providers = plan.providers
        self.groups = plan.groups
        # rp -> {rc: amount} the groups placed so far take from it; a
        # value is replaced, never changed (it may be a group's own
        # amounts), so giving back restores the one before (or deletes
        # the entry: the usual case, a provider that held nothing, is
        # handled inline by the _place methods).
        self.held = {}
        self.picks = [None] * len(self.groups)
        self.numbered_rps = set()
        self.root_owner = {}      # root -> rp (old microversions only)
        self.root_count = {}
        self.one_per_tree = plan.one_per_tree
        # What the groups at some positions may pick under one anchor
        # (_could_pick), kept while the search is under it.
        self._could = {}
        self._could_anchor = None
        # Per group position, {set index: (common ancestors, picks)} of
        # the same_subtree sets it is in, as of its pick (_narrow).
        self.narrowed = [{} for _ in plan.groups]

    # -- capacity, summed over the groups --------------------------------
    def _fits(self, rp, resources):
        """``rp`` can take ``resources`` ((rc, amount) pairs) on top of
        what it holds."""
        inventory = self.providers[rp].inventory
        held = self.held.get(rp)
        for rc, amount in resources:
            inv = inventory.get(rc)
            if inv is None:
                return False
            total = amount + held.get(rc, 0) if held else amount
            if total > inv.most:
                return False
        return True

    def _take(self, rp, amounts):
        """Add ``amounts`` ({rc: amount}) to what ``rp`` already holds,
        in a new dict."""
        total = dict(self.held[rp])
        for rc, amount in amounts.items():
            total[rc] = total.get(rc, 0) + amount
        self.held[rp] = total

    def _claim_tree(self, rp):
        """Old microversions (one_per_tree): a tree may contribute one
        provider only."""
        root = self.providers[rp].root_id
        owner = self.root_owner.get(root)
        if owner is not None and owner != rp:
            return False
        self.root_owner[root] = rp
        self.root_count[root] = self.root_count.get(root, 0) + 1
        return True

    def _release_tree(self, rp):
        root = self.providers[rp].root_id
        self.root_count[root] -= 1
        if not self.root_count[root]:
            del self.root_count[root]
            del self.root_owner[root]

    # -- same_subtree -----------------------------------------------------
    def _narrow(self, idx):
        """For each same_subtree set (but pairs) group ``idx`` is in, now
        that it is placed: the common ancestors of the set's picks so far
        and those picks, from those of the set's group placed before it
        (one intersection a pick, not one per group a check)."""
        pick = self.picks[idx]
        rps = (pick,) if self.groups[idx].same_provider else pick
        narrowed = self.narrowed
        mine = narrowed[idx]
        for k, before in self.plan.narrows[idx]:
            if before is None:
                common, members = None, ()
            else:
                common, members = narrowed[before][k]
            mine[k] = (rules.common_ancestors(self.plan.ancestors, rps,
                                              common), members + rps)

    def _subtrees_ok(self, idx):
        picks = self.picks
        narrowed = self.narrowed[idx]
        for k, positions in self.plan.subtree_checks[idx]:
            if type(positions) is Pair:
                # Two numbered groups (nova's NUMA node and device): one
                # pick is the other's ancestor-or-self.
                a, b = picks[positions[0]], picks[positions[1]]
                if not (self._above(a, b) or self._above(b, a)):
                    return False
                continue
            if not rules.subtree_met(*narrowed[k]):
                return False
        return True

    def _may_complete(self, idx, anchor):
        """Whether the same_subtree sets still open once group ``idx`` is
        placed may yet be met. One of a set's picks must be an ancestor
        (or self) of all of them: when none of those placed is, one of
        the others' picks must be a common ancestor of those placed, so
        the anchor's lists of the others must hold one (a device and a
        NIC under two NUMA nodes are dropped before a NUMA node is
        tried)."""
        narrowed = self.narrowed[idx]
        for k, rest in self.plan.open_checks[idx]:
            common, placed = narrowed[k]
            if not rules.subtree_met(common, placed) and common.isdisjoint(
                    self._could_pick(rest, anchor)):
                return False
        return True

    def _could_pick(self, positions, anchor):
        """The providers in the lists of the groups at ``positions`` under
        ``anchor``."""
        if self._could_anchor != anchor:
            self._could = {}
            self._could_anchor = anchor
        found = self._could.get(positions)
        if found is None:
            found = self._could[positions] = set()
            for pos in positions:
                lists = self.groups[pos].by_anchor.get(anchor, ())
                if self.groups[pos].same_provider:
                    found.update(lists)
                else:
                    for lst in lists.values():
                        found.update(lst)
        return found

    def _above(self, top, rp):
        """Whether ``top`` is ``rp`` or one of its ancestors."""
        providers = self.providers
        while rp is not None:
            if rp == top:
                return True
            prov = providers.get(rp)
            rp = prov.parent_id if prov is not None else None
        return False

    # -- the unnumbered group's traits ------------------------------------
    def _unnumbered_traits_ok(self, group, chosen):
        if not (group.forbidden or group.required):
            return True
        providers = self.providers
        held = [providers[rp].traits for rp in set(chosen)]
        if group.forbidden and any(
                trait_rules.forbidden_traits(traits, group.forbidden)
                for traits in held):
            return False
        return trait_rules.required_traits_among(held, group.required) is None
