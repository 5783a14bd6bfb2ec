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
