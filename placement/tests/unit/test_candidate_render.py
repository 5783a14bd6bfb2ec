"""The allocation_requests JSON, rendered from picks
(allocation_candidate_json's _Renderer), says what each candidate's own allocations and mappings say:
for providers serving one group, several groups (amounts summed), groups
without resources, and the older shapes."""
import json
import os

import pytest

from placement.handlers import allocation_candidate_json as ac
from placement import microversion
from placement.objects.candidates import model
from placement.tests.unit import test_combine as tc

P = model.Provider
G = model.Group


def want(version):
    ver = microversion.parse(version)
    ver.min_version = microversion.parse('1.0')
    ver.max_version = microversion.parse('1.39')
    return ver


def rendered(cands, provs, version='1.39', isolate=False):
    out = ac.allocation_requests(cands, provs, want(version), isolate)
    if not isinstance(out, list):
        out = json.loads(out)
    return out


def expected(cands, provs, with_mappings=True):
    uuid = {rp: p.uuid for rp, p in provs.items()}
    out = []
    for c in cands:
        body = {'allocations': {uuid[rp]: {'resources': res}
                                for rp, res in c.allocations.items()}}
        if with_mappings:
            body['mappings'] = {s: [uuid[rp] for rp in rps]
                                for s, rps in c.mappings.items()}
        out.append(body)
    return out


def _tree():
    return tc.world(
        P(1, 'cn', None, 1, traits={'HW_CPU_X86_AVX'},
          inventory={'VCPU': tc.inv(8), 'DISK_GB': tc.inv(100)}),
        P(2, 'numa0', 1, 1, inventory={'VCPU': tc.inv(8),
                                       'MEMORY_MB': tc.inv(4096)}),
        P(3, 'numa1', 1, 1, inventory={'VCPU': tc.inv(8),
                                       'MEMORY_MB': tc.inv(4096)}),
        P(4, 'pf', 2, 1, traits={'CUSTOM_PHYSNET'},
          inventory={'VF': tc.inv(4)}))


def _worlds():
    tree = _tree()
    yield 'unnumbered over a tree', tree, [G(
        '', [('VCPU', 1), ('MEMORY_MB', 256), ('DISK_GB', 10)],
        {1: {'VCPU': [1, 2, 3], 'MEMORY_MB': [2, 3], 'DISK_GB': [1]}})], {}
    yield 'numbered and unnumbered share providers', tree, [
        G('', [('VCPU', 1), ('DISK_GB', 10)],
          {1: {'VCPU': [1, 2, 3], 'DISK_GB': [1]}}),
        G('_A', [('VCPU', 2), ('MEMORY_MB', 512)], {1: [2, 3]}),
        G('_B', [('VCPU', 1)], {1: [1, 2, 3]})], {}
    yield 'resourceless group', tree, [
        G('_A', [('VCPU', 2)], {1: [2, 3]}),
        G('_T', [], {1: [4, 1]}),
        G('_V', [('VF', 1)], {1: [4]})], {'same_subtrees': [{'_A', '_V'}]}
    yield 'wide, isolate', tc.wide_tree(4), tc.wide_groups(3, 4), {
        'isolate': True}
    yield 'wide, none', tc.wide_tree(3), tc.wide_groups(2, 3), {}


WORLDS = list(_worlds())


@pytest.mark.parametrize('name,provs,groups,kw', WORLDS,
                         ids=[w[0] for w in WORLDS])
@pytest.mark.parametrize('version', ['1.39', '1.33', '1.11'])
def test_rendered_as_candidates_say(name, provs, groups, kw, version):
    cands = tc.run(provs, groups, **kw)
    assert cands
    got = rendered(cands, provs, version, kw.get('isolate', False))
    if version == '1.11':
        uuid = {rp: p.uuid for rp, p in provs.items()}
        assert got == [{'allocations': [
            {'resource_provider': {'uuid': uuid[rp]}, 'resources': res}
            for rp, res in c.allocations.items()]} for c in cands]
        return
    assert got == expected(cands, provs, with_mappings=version == '1.39')


def test_summed_amounts_rendered():
    # Two groups on one provider (group_policy=none): one entry, summed.
    provs = tc.world(P(1, 'r', None, 1, inventory={'VCPU': tc.inv(4)}))
    groups = [G('1', [('VCPU', 1)], {1: [1]}),
              G('2', [('VCPU', 2)], {1: [1]})]
    got = rendered(tc.run(provs, groups), provs)
    assert got == [{'allocations': {'r': {'resources': {'VCPU': 3}}},
                    'mappings': {'1': ['r'], '2': ['r']}}]


def test_candidates_of_several_batches_keep_their_order():
    # The search combines batches of anchors separately: each batch has
    # its own group list; the answer keeps the candidates' order.
    provs = tc.world(*[P(i, 'u%d' % i, None, i,
                         inventory={'VCPU': tc.inv(4)}) for i in (1, 2, 3)])
    g = [G('1', [('VCPU', 1)], {1: [1], 2: [2], 3: [3]}),
         G('2', [('VCPU', 1)], {1: [1], 2: [2], 3: [3]})]
    first = tc.run(provs, g, anchors=[1, 3])
    second = tc.run(provs, g, anchors=[2])
    cands = [first[0], second[0], first[1]]
    assert rendered(cands, provs) == expected(cands, provs)


def test_uuids_needing_escapes_still_valid_json():
    provs = tc.world(P(1, 'a"b\\c', None, 1, inventory={'VCPU': tc.inv(4)}),
                     P(2, 'plain', None, 2, inventory={'VCPU': tc.inv(4)}))
    groups = [G('1', [('VCPU', 1)], {1: [1], 2: [2]})]
    cands = tc.run(provs, groups)
    assert rendered(cands, provs) == expected(cands, provs)


def test_the_node_rendering_is_named_alike_in_every_process():
    """The trees a snapshot file holds rendered are copied by the processes
    whose key (a digest of the rendering code) is the writer's: the same
    whatever a process's hash seed (marshal's bytes would differ)."""
    import subprocess
    import sys
    keys = set()
    for seed in ('1', '2'):
        keys.add(subprocess.run(
            [sys.executable, '-c', 'from placement.handlers import '
             'allocation_candidate_json as h; print(h.NODE_KEY)'],
            env=dict(os.environ, PYTHONHASHSEED=seed), check=True,
            capture_output=True, text=True).stdout)
    assert len(keys) == 1 and ac.NODE_KEY[2] in keys.pop()
