"""The depth-first combiner on tiny worlds written inline."""
import itertools

from placement.objects.candidates import combination
from placement.objects.candidates import combine as cb
from placement.objects.candidates import model
from placement.objects.candidates import rules
from placement.objects.candidates import sample

P = model.Provider
G = model.Group


def world(*provs):
    return {p.id: p for p in provs}


def inv(cap, used=0, max_unit=None):
    return rules.room(cap, used, cap if max_unit is None else max_unit)


def run(providers, groups, limit=None, **kw):
    gen = cb.combine(providers, groups, **kw)
    if limit is not None:
        gen = itertools.islice(gen, limit)
    return list(gen)


def alloc_set(cands):
    return {frozenset((rp, rc, amt) for rp, res in c.allocations.items()
                      for rc, amt in res.items()) for c in cands}


def wide_tree(children=8):
    provs = [P(1, 'root', None, 1)]
    for i in range(children):
        provs.append(P(10 + i, 'c%d' % i, 1, 1,
                       inventory={'CUSTOM_X': inv(1)}))
    return world(*provs)


def wide_groups(n, children=8):
    kids = list(range(10, 10 + children))
    return [G(str(i + 1), [('CUSTOM_X', 1)], {1: kids}) for i in range(n)]


def test_wide_tree_six_isolated_groups_all_permutations():
    provs = wide_tree()
    cands = run(provs, wide_groups(6), isolate=True)
    assert len(cands) == 8 * 7 * 6 * 5 * 4 * 3
    for c in cands[:50]:
        used = [c.mappings[str(i + 1)][0] for i in range(6)]
        assert len(set(used)) == 6


def test_wide_tree_limit_stops_early():
    provs = wide_tree()
    cands = run(provs, wide_groups(8), isolate=True, limit=1)
    assert len(cands) == 1


def test_wide_tree_eight_groups_count():
    cands = run(wide_tree(), wide_groups(8), isolate=True)
    assert len(cands) == 40320


def test_wide_tree_more_groups_than_children_is_empty():
    assert run(wide_tree(4), wide_groups(5, 4), isolate=True) == []


def test_capacity_shared_across_groups():
    # One provider with 3 units: two groups of 2 cannot both use it.
    provs = world(P(1, 'r', None, 1, inventory={'VCPU': inv(3)}),
                  P(2, 'c', 1, 1, inventory={'VCPU': inv(2)}))
    groups = [G('1', [('VCPU', 2)], {1: [1, 2]}),
              G('2', [('VCPU', 2)], {1: [1, 2]})]
    cands = run(provs, groups)
    maps = sorted((c.mappings['1'][0], c.mappings['2'][0]) for c in cands)
    assert maps == [(1, 2), (2, 1)]


def test_capacity_counts_existing_usage_and_max_unit():
    provs = world(P(1, 'r', None, 1, inventory={'VCPU': inv(8, used=5,
                                                             max_unit=2)}))
    groups = [G('1', [('VCPU', 2)], {1: [1]}),
              G('2', [('VCPU', 1)], {1: [1]})]
    # 3 units fit the capacity left (3) but exceed max_unit 2 combined.
    assert run(provs, groups) == []


def test_group_policy_none_allows_same_provider():
    provs = world(P(1, 'r', None, 1, inventory={'VCPU': inv(4)}))
    groups = [G('1', [('VCPU', 1)], {1: [1]}),
              G('2', [('VCPU', 1)], {1: [1]})]
    cands = run(provs, groups)
    assert len(cands) == 1
    assert cands[0].allocations == {1: {'VCPU': 2}}
    assert run(provs, groups, isolate=True) == []


def test_unnumbered_group_spreads_over_tree_and_checks_traits():
    provs = world(
        P(1, 'cn', None, 1, traits={'HW_CPU_X86_AVX'},
          inventory={'VCPU': inv(4)}),
        P(2, 'numa', 1, 1, inventory={'VCPU': inv(4),
                                      'MEMORY_MB': inv(1024)}))
    g = G('', [('VCPU', 1), ('MEMORY_MB', 256)],
          {1: {'VCPU': [1, 2], 'MEMORY_MB': [2]}},
          required=[{'HW_CPU_X86_AVX'}])
    cands = run(provs, [g])
    # Only the combination that involves cn (which holds the trait).
    assert alloc_set(cands) == {
        frozenset({(1, 'VCPU', 1), (2, 'MEMORY_MB', 256)})}
    assert sorted(cands[0].mappings['']) == [1, 2]


def test_unnumbered_forbidden_trait_on_any_used_provider():
    # The engines list no provider with a forbidden trait (model.Group);
    # a search of several groups judges them again all the same.
    provs = world(
        P(1, 'cn', None, 1, inventory={'VCPU': inv(4)}),
        P(2, 'numa', 1, 1, traits={'CUSTOM_BAD'},
          inventory={'VCPU': inv(4), 'MEMORY_MB': inv(1024)}))
    g = G('', [('VCPU', 1), ('MEMORY_MB', 256)],
          {1: {'VCPU': [1, 2], 'MEMORY_MB': [2]}}, forbidden={'CUSTOM_BAD'})
    g1 = G('1', [('VCPU', 1)], {1: [1]})
    assert run(provs, [g, g1]) == []
    g.forbidden = frozenset()
    assert len(run(provs, [g, g1])) == 2


def test_any_of_traits_collectively():
    provs = world(
        P(1, 'cn', None, 1, traits={'CUSTOM_B'}, inventory={'VCPU': inv(4)}))
    g = G('', [('VCPU', 1)], {1: {'VCPU': [1]}},
          required=[{'CUSTOM_A', 'CUSTOM_B'}])
    assert len(run(provs, [g])) == 1
    g.required = [frozenset({'CUSTOM_A', 'CUSTOM_C'})]
    assert run(provs, [g]) == []


def test_same_subtree():
    #      r
    #    /   \
    #   n0    n1
    #   |      |
    #  pf0    pf1
    provs = world(
        P(1, 'r', None, 1),
        P(2, 'n0', 1, 1, inventory={'VCPU': inv(4)}),
        P(3, 'n1', 1, 1, inventory={'VCPU': inv(4)}),
        P(4, 'pf0', 2, 1, inventory={'VF': inv(4)}),
        P(5, 'pf1', 3, 1, inventory={'VF': inv(4)}))
    groups = [G('C', [('VCPU', 1)], {1: [2, 3]}),
              G('N', [('VF', 1)], {1: [4, 5]})]
    all_c = run(provs, groups)
    assert len(all_c) == 4
    sub = run(provs, groups, same_subtrees=[{'C', 'N'}])
    assert sorted((c.mappings['C'][0], c.mappings['N'][0])
                  for c in sub) == [(2, 4), (3, 5)]


def test_same_subtree_of_three_groups_drops_a_branch_early(monkeypatch):
    """A NUMA node, a GPU and a NIC under it (nova's): a GPU and a NIC
    under two NUMA nodes cannot be completed, since no NUMA node is above
    both, and are dropped before any NUMA node is tried. The answer is
    the same; the checks of complete sets are half as many."""
    provs = [P(1, 'r', None, 1)]
    for n in (0, 1):
        numa = 10 + n
        provs.append(P(numa, 'n%d' % n, 1, 1, traits={'CUSTOM_NUMA'}))
        for d in (0, 1):
            provs.append(P(100 + 10 * n + d, 'gpu', numa, 1,
                           inventory={'VGPU': inv(1)}))
            provs.append(P(200 + 10 * n + d, 'nic', numa, 1,
                           inventory={'VF': inv(1)}))
    provs = world(*provs)
    groups = [G('_GPU', [('VGPU', 1)], {1: [100, 101, 110, 111]}),
              G('_NIC', [('VF', 1)], {1: [200, 201, 210, 211]}),
              G('_NUMA', [], {1: [10, 11]})]
    complete = []
    real = cb._Search._subtrees_ok

    def counting(search, idx):
        complete.append(tuple(search.picks))
        return real(search, idx)

    monkeypatch.setattr(cb._Search, '_subtrees_ok', counting)
    sub = run(provs, groups, same_subtrees=[{'_GPU', '_NIC', '_NUMA'}])
    assert sorted(c.picks for c in sub) == [
        (gpu, nic, numa) for numa in (10, 11)
        for gpu in (100 + 10 * (numa - 10), 101 + 10 * (numa - 10))
        for nic in (200 + 10 * (numa - 10), 201 + 10 * (numa - 10))]
    # 8 GPU and NIC pairs under one NUMA node, each with both NUMA nodes
    # (16 checks), not all 16 pairs with both (32).
    assert len(complete) == 16


def test_same_subtree_resourceless_group():
    provs = world(
        P(1, 'r', None, 1),
        P(2, 'n0', 1, 1, traits={'CUSTOM_NUMA'}),
        P(3, 'n1', 1, 1, traits={'CUSTOM_NUMA'}),
        P(4, 'pf0', 2, 1, inventory={'VF': inv(4)}),
        P(5, 'pf1', 3, 1, inventory={'VF': inv(4)}))
    groups = [G('N', [], {1: [2, 3]}), G('V', [('VF', 1)], {1: [4, 5]})]
    sub = run(provs, groups, same_subtrees=[{'N', 'V'}])
    assert sorted((c.mappings['N'][0], c.mappings['V'][0])
                  for c in sub) == [(2, 4), (3, 5)]
    assert all(c.allocations == {c.mappings['V'][0]: {'VF': 1}}
               for c in sub)


def test_sharing_provider_serves_several_anchors_once_each():
    provs = world(
        P(1, 'cn1', None, 1, inventory={'VCPU': inv(4)}),
        P(2, 'cn2', None, 2, inventory={'VCPU': inv(4)}),
        P(3, 'ss', None, 3, traits={'MISC_SHARES_VIA_AGGREGATE'},
          inventory={'DISK_GB': inv(100)}))
    g = G('', [('VCPU', 1), ('DISK_GB', 10)],
          {1: {'VCPU': [1], 'DISK_GB': [3]},
           2: {'VCPU': [2], 'DISK_GB': [3]}})
    assert alloc_set(run(provs, [g])) == {
        frozenset({(1, 'VCPU', 1), (3, 'DISK_GB', 10)}),
        frozenset({(2, 'VCPU', 1), (3, 'DISK_GB', 10)})}


def test_sharing_only_request_deduplicated_across_anchors():
    provs = world(
        P(1, 'cn1', None, 1), P(2, 'cn2', None, 2),
        P(3, 'ss', None, 3, inventory={'DISK_GB': inv(100)}))
    g = G('', [('DISK_GB', 10)], {a: {'DISK_GB': [3]} for a in (1, 2, 3)})
    assert len(run(provs, [g])) == 1


def test_nested_unnumbered_and_numbered_share_capacity():
    provs = world(
        P(1, 'cn', None, 1, inventory={'VCPU': inv(2)}),
        P(2, 'numa', 1, 1, inventory={'VCPU': inv(1)}))
    groups = [G('', [('VCPU', 1)], {1: {'VCPU': [1, 2]}}),
              G('1', [('VCPU', 2)], {1: [1]})]
    cands = run(provs, groups)
    assert alloc_set(cands) == {frozenset({(2, 'VCPU', 1),
                                           (1, 'VCPU', 2)})}


def test_one_provider_per_tree_for_old_microversions():
    provs = world(
        P(1, 'cn', None, 1, inventory={'VCPU': inv(2)}),
        P(2, 'numa', 1, 1, inventory={'MEMORY_MB': inv(100)}),
        P(3, 'cn2', None, 3, inventory={'VCPU': inv(2),
                                        'MEMORY_MB': inv(100)}))
    g = G('', [('VCPU', 1), ('MEMORY_MB', 10)],
          {1: {'VCPU': [1], 'MEMORY_MB': [2]},
           3: {'VCPU': [3], 'MEMORY_MB': [3]}})
    assert len(run(provs, [g])) == 2
    cands = run(provs, [g], one_provider_per_tree=True)
    assert alloc_set(cands) == {frozenset({(3, 'VCPU', 1),
                                           (3, 'MEMORY_MB', 10)})}


def test_anchor_needs_every_group():
    provs = world(P(1, 'a', None, 1, inventory={'VCPU': inv(2)}),
                  P(2, 'b', None, 2, inventory={'VCPU': inv(2),
                                                'VF': inv(2)}))
    groups = [G('1', [('VCPU', 1)], {1: [1], 2: [2]}),
              G('2', [('VF', 1)], {2: [2]})]
    assert cb.viable_anchors(groups) == [2]
    assert len(run(provs, groups)) == 1


def test_breadth_first_interleaves_anchors():
    provs = world(*[P(i, str(i), None, i, inventory={'VCPU': inv(4)})
                    for i in (1, 2)])
    provs[10] = P(10, 'c', 1, 1, inventory={'VCPU': inv(4)})
    provs[20] = P(20, 'd', 2, 2, inventory={'VCPU': inv(4)})
    g = G('1', [('VCPU', 1)], {1: [1, 10], 2: [2, 20]})
    first_two = run(provs, [g], limit=2, strategy='breadth-first')
    assert {c.mappings['1'][0] for c in first_two} == {1, 2}
    first_two = run(provs, [g], limit=2)
    assert {c.mappings['1'][0] for c in first_two} == {1, 10}


def test_same_subtree_over_the_combiners_ancestors():
    provs = world(P(1, 'r', None, 1), P(2, 'a', 1, 1), P(3, 'b', 2, 1),
                  P(4, 'c', 1, 1))
    ancestors = combination.ancestors_of(provs)
    assert rules.same_subtree(ancestors, {2, 3})
    assert rules.same_subtree(ancestors, {1, 3, 4})
    assert not rules.same_subtree(ancestors, {3, 4})
    assert rules.same_subtree(ancestors, {4})


def test_amounts_shared_between_candidates_are_never_changed():
    # Candidates share each group's amounts dict while a provider serves
    # one group; where two groups land on one provider the sum goes into a
    # copy, so the other candidates keep their own amounts.
    provs = world(P(1, 'a', None, 1, inventory={'VCPU': inv(8)}),
                  P(2, 'b', None, 1, inventory={'VCPU': inv(8)}))
    groups = [G('1', [('VCPU', 1)], {1: [1, 2]}),
              G('2', [('VCPU', 2)], {1: [1, 2]})]
    cands = run(provs, groups)
    got = sorted(sorted((rp, res['VCPU']) for rp, res in c.allocations.items())
                 for c in cands)
    assert got == [[(1, 1), (2, 2)], [(1, 2), (2, 1)], [(1, 3)], [(2, 3)]]
    assert groups[0].amounts == {'VCPU': 1}
    assert groups[1].amounts == {'VCPU': 2}
    assert model.allocated_providers(cands) == {1, 2}


def _checker_agrees(provs, groups, **kw):
    """The Checker accepts, under each anchor, exactly the combinations of
    the anchor's lists that the search yields."""
    checker = cb.Checker(provs, groups, **kw)
    layout = sample.shape(checker.groups)
    total = 0
    for anchor in cb.viable_anchors(groups):
        lists = sample.lists_of(checker.groups, anchor)
        drawn = {sample.decode(layout, lists, u)
                 for u in range(sample.size(lists))}
        assert len(drawn) == sample.size(lists)
        accepted = {picks for picks in drawn if checker.ok(anchor, picks)}
        searched = {c.picks for c in cb.combine(provs, groups,
                                                anchors=[anchor], **kw)}
        assert accepted == searched, anchor
        total += len(accepted)
    return total


def test_checker_judges_as_the_search():
    assert _checker_agrees(wide_tree(), wide_groups(4),
                           isolate=True) == 8 * 7 * 6 * 5
    # not isolated: one unit per child keeps them apart all the same
    assert _checker_agrees(wide_tree(), wide_groups(3)) == 8 * 7 * 6
    # capacity summed over groups, traits of the unnumbered group,
    # same_subtree, one provider per tree
    provs = world(
        P(1, 'cn', None, 1, traits={'A'}, inventory={'VCPU': inv(2)}),
        P(2, 'numa0', 1, 1, traits={'B'}, inventory={'VCPU': inv(1)}),
        P(3, 'numa1', 1, 1, inventory={'VCPU': inv(3),
                                       'MEMORY_MB': inv(64)}),
        P(4, 'dev', 3, 1, inventory={'VF': inv(2)}),
        P(5, 'dev2', 2, 1, inventory={'VF': inv(1)}))
    groups = [G('', [('VCPU', 1), ('MEMORY_MB', 8)],
                {1: {'VCPU': [1, 2, 3], 'MEMORY_MB': [3]}},
                required=[{'A', 'B'}], forbidden={'C'}),
              G('1', [('VCPU', 2)], {1: [1, 3]}),
              G('2', [('VF', 1)], {1: [4, 5]})]
    assert _checker_agrees(provs, groups) > 0
    assert _checker_agrees(provs, groups, isolate=True) > 0
    assert _checker_agrees(provs, groups, same_subtrees=[{'1', '2'}]) > 0
    assert _checker_agrees(provs, groups, one_provider_per_tree=True) == 0


def test_checker_leaves_no_trace():
    # What a judged combination took is given back, kept or refused: the
    # next one is judged alone.
    provs = world(P(1, 'cn', None, 1, inventory={'VCPU': inv(3)}),
                  P(2, 'cn2', None, 2, inventory={'VCPU': inv(2)}))
    groups = [G('1', [('VCPU', 2)], {1: [1], 2: [2]}),
              G('2', [('VCPU', 1)], {1: [1], 2: [2]})]
    checker = cb.Checker(provs, groups)
    for _ in range(3):
        assert checker.ok(1, (1, 1))
        assert not checker.ok(2, (2, 2))


def _by_the_rules(provs, groups, picks, isolate, same_subtrees,
                  one_per_tree):
    """Whether ``picks`` (per group of ``groups``) is a candidate, each
    rule of combine.py's docstring checked on its own."""
    taken = {}
    used = set()
    for g, pick in zip(groups, picks):
        chosen = [pick] * len(g.resources) if g.same_provider else pick
        for rp, (rc, amt) in zip(chosen, g.resources):
            taken[rp, rc] = taken.get((rp, rc), 0) + amt
        used.update(chosen)
        if not g.same_provider:
            have = set().union(*(provs[rp].traits for rp in chosen))
            if any(g.forbidden & provs[rp].traits for rp in chosen):
                return False
            if not all(any_of & have for any_of in g.required):
                return False
    for (rp, rc), amt in taken.items():
        room = provs[rp].inventory.get(rc)
        if room is None or amt > room.most:
            return False
    numbered = [pick for g, pick in zip(groups, picks) if g.same_provider]
    if isolate and len(set(numbered)) < len(numbered):
        return False

    def above(top, rp):
        while rp is not None:
            if rp == top:
                return True
            rp = provs[rp].parent_id
        return False
    for suffixes in same_subtrees:
        rps = set()
        for g, pick in zip(groups, picks):
            if g.suffix in suffixes:
                rps.update([pick] if g.same_provider else pick)
        if not any(all(above(top, rp) for rp in rps) for top in rps):
            return False
    return not (one_per_tree and len(used) > 1)


def test_search_and_checker_follow_the_rules_on_random_trees():
    # Random trees, amounts, traits, isolate, same_subtree and one
    # provider per tree: the search yields exactly the combinations of
    # the anchor's lists that meet every rule, each once, and the Checker
    # accepts exactly those.
    import random
    rnd = random.Random(7)
    classes = ['VCPU', 'MEMORY_MB', 'VF']
    kept = triples = 0
    for _ in range(1000):
        provs = [P(1, 'r', None, 1,
                   traits=set(rnd.sample('AB', rnd.randint(0, 2))),
                   inventory={rc: inv(rnd.randint(1, 3), rnd.randint(0, 1))
                              for rc in rnd.sample(classes, 2)})]
        for i in range(2, rnd.randint(3, 6)):
            provs.append(P(i, 'p%d' % i, rnd.randint(1, i - 1), 1,
                           traits=set(rnd.sample('ABC', rnd.randint(0, 2))),
                           inventory={rc: inv(rnd.randint(1, 3))
                                      for rc in rnd.sample(
                                          classes, rnd.randint(0, 2))}))
        provs = world(*provs)
        # The lists as the engines gather them (model.Group): providers
        # able to serve the amount alone, with no forbidden trait.
        wanted = rnd.sample(classes, rnd.randint(1, 3))
        amounts = [(rc, rnd.randint(1, 2)) for rc in wanted]
        forbidden = set('C' * rnd.randint(0, 1))
        groups = [G('', amounts,
                    {1: {rc: [p.id for p in provs.values()
                              if rules.fits_alone(p.inventory, [(rc, amt)])
                              and forbidden.isdisjoint(p.traits)]
                         for rc, amt in amounts}},
                    required=[set(rnd.sample('AB', 1))] * rnd.randint(0, 1),
                    forbidden=forbidden)]
        for suffix in '123'[:rnd.randint(0, 3)]:
            rc = rnd.choice(classes)
            groups.append(G(suffix, [(rc, 1)], {1: [
                p.id for p in provs.values()
                if rules.fits_alone(p.inventory, [(rc, 1)])]}))
        suffixes = [g.suffix for g in groups]
        options = dict(
            isolate=rnd.random() < 0.5,
            # Sets of two groups, and of three (checked before the last
            # is placed: _Search._may_complete).
            same_subtrees=([set(rnd.sample(suffixes, rnd.randint(
                2, min(3, len(suffixes)))))] if len(groups) > 1 and
                rnd.random() < 0.6 else []),
            one_provider_per_tree=rnd.random() < 0.2)
        if not cb.viable_anchors(groups):
            continue
        checker = cb.Checker(provs, groups, **options)
        lists = sample.lists_of(checker.groups, 1)
        layout = sample.shape(checker.groups)
        every = [sample.decode(layout, lists, u)
                 for u in range(sample.size(lists))]
        expected = [picks for picks in every if _by_the_rules(
            provs, checker.groups, picks, options['isolate'],
            options['same_subtrees'], options['one_provider_per_tree'])]
        searched = [c.picks for c in run(provs, groups, **options)]
        assert sorted(searched) == sorted(expected)
        assert len(set(searched)) == len(searched)
        assert [p for p in every if checker.ok(1, p)] == expected
        kept += len(expected)
        triples += bool(expected) and any(
            len(sub) == 3 for sub in options['same_subtrees'])
    assert kept > 200
    assert triples > 10
