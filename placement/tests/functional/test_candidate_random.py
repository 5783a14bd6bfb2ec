"""``[placement] randomize_allocation_candidates``: which candidates a
``limit`` keeps.

Without randomization the same query answers the same candidates in the
same order every time; with it, ``limit`` samples from every candidate, so
repeated queries over identical providers land on different ones (as
upstream: spreading claims from many schedulers).
"""
import json

import pytest
import webob

from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits

PROVIDERS = 8
QUERY = '/allocation_candidates?resources=VCPU:1&limit=1'


def _world():
    w = cw.WorldBuilder()
    for i in range(PROVIDERS):
        w.provider('cn%d' % i)
        w.inventory('cn%d' % i, 'VCPU', 8)
    return w


@pytest.fixture(params=[False, True], ids=['ordered', 'randomized'])
def served(request):
    overrides = {('placement', 'randomize_allocation_candidates'):
                 request.param}
    with gabbits.app_over_world(_world(), overrides) as app:
        yield request.param, app


def _picked(app, path):
    resp = webob.Request.blank(path, headers={
        'x-auth-token': 'admin',
        'openstack-api-version': 'placement 1.39'}).get_response(app)
    assert resp.status_int == 200
    body = json.loads(resp.body)
    return [tuple(sorted(ar['allocations']))
            for ar in body['allocation_requests']]


def test_limit_picks(served):
    randomize, app = served
    seen = {tuple(_picked(app, QUERY)) for _ in range(25)}
    if randomize:
        # 25 draws of 1 among 8 all alike: (1/8)**24 odds of a false alarm
        assert len(seen) > 1
    else:
        assert len(seen) == 1
    whole = _picked(app, QUERY.replace('&limit=1', ''))
    assert len(whole) == PROVIDERS
    assert all(pick[0] in whole for pick in seen)


def _wide_and_nested():
    """A wide tree (one root, 8 one-unit children) and 4 trees of the
    nested perfload shape (compute node, NUMA nodes, FPGAs)."""
    w = cw.WorldBuilder()
    w.provider('root')
    for i in range(8):
        w.provider('c%d' % i, parent='root')
        w.inventory('c%d' % i, 'CUSTOM_X', 1)
    for t in range(4):
        cn = 'cn%d' % t
        w.provider(cn)
        w.inventory(cn, 'DISK_GB', 1000)
        for n in range(2):
            numa = '%s_numa%d' % (cn, n)
            w.provider(numa, parent=cn)
            w.inventory(numa, 'VCPU', 4)
            for f in range(2):
                fpga = '%s_fpga%d' % (numa, f)
                w.provider(fpga, parent=numa)
                w.inventory(fpga, 'FPGA', 1)
    return w


WIDE = ('/allocation_candidates?resources1=CUSTOM_X:1&resources2=CUSTOM_X:1'
        '&resources3=CUSTOM_X:1&group_policy=isolate')
NESTED = ('/allocation_candidates?resources=DISK_GB:10'
          '&resources_COMPUTE=VCPU:1&resources_FPGA=FPGA:1'
          '&group_policy=none&same_subtree=_COMPUTE,_FPGA')


@pytest.fixture(scope='module')
def randomized_trees():
    overrides = {('placement', 'randomize_allocation_candidates'): True}
    with gabbits.app_over_world(_wide_and_nested(), overrides) as app:
        yield app


def _answers(app, path):
    resp = webob.Request.blank(path, headers={
        'x-auth-token': 'admin',
        'openstack-api-version': 'placement 1.39'}).get_response(app)
    assert resp.status_int == 200
    return [json.dumps(ar, sort_keys=True)
            for ar in json.loads(resp.body)['allocation_requests']]


@pytest.mark.parametrize('path,total', [(WIDE, 8 * 7 * 6), (NESTED, 16)],
                         ids=['wide', 'nested'])
def test_limit_samples_the_whole_answer(randomized_trees, path, total):
    """limit with randomize draws from every candidate without building
    them all: over many requests each candidate of a small answer shows
    up, and every one drawn belongs to the whole answer."""
    whole = set(_answers(randomized_trees, path))
    assert len(whole) == total
    draws = [_answers(randomized_trees, path + '&limit=1')
             for _ in range(120 if total > 100 else 200)]
    assert all(len(d) == 1 and d[0] in whole for d in draws)
    seen = {d[0] for d in draws}
    if total < 20:
        # 200 draws of 16: one missed with odds 16 * (15/16)**200 < 1e-4
        assert seen == whole
    else:
        # 120 draws of 336: ~101 distinct expected (sd ~5)
        assert len(seen) > 70
    two = _answers(randomized_trees, path + '&limit=2')
    assert len(two) == 2 and set(two) <= whole


def test_limit_with_randomize_stops_early(randomized_trees, monkeypatch):
    """The sample is drawn, not cut from the whole answer: a limit of 2
    checks a few drawn combinations (3 isolated groups over 8 children:
    336 candidates among 512 combinations) and never enumerates."""
    from placement.objects.candidates import combine
    enumerated = []
    checked = []
    real_combine = combine.combine
    real_ok = combine.Checker.ok

    def counting(*args, **kwargs):
        for cand in real_combine(*args, **kwargs):
            enumerated.append(cand)
            yield cand

    def ok(self, anchor, picks):
        checked.append(picks)
        return real_ok(self, anchor, picks)
    monkeypatch.setattr(combine, 'combine', counting)
    monkeypatch.setattr(combine.Checker, 'ok', ok)
    assert len(_answers(randomized_trees, WIDE + '&limit=2')) == 2
    assert enumerated == []
    # 2 kept; each draw keeps with odds 336/512: 40 checks have odds
    # below 1e-15.
    assert 2 <= len(checked) < 40
