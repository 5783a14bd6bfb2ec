"""``limit`` walks root providers a part at a time; check it cannot
change what is found.

With a limit, GET /allocation_candidates gathers candidates part by part
and stops once it has enough: the world walks batches of roots (a few,
then as many as the candidates still wanted need), the SQL engine
gathers rows for a first window of roots, then the rest, and reads trees
in growing batches; both engines answer here. Whatever the parts, a
limited answer must hold exactly
``min(limit, total)`` distinct candidates, each one of those the unlimited
answer holds, with summaries for every provider used. The world here is
built so that matches are sparse (many windows are needed), some trees
have a child whose id is lower than its root's (a provider re-parented
under a newer root), and a sharing provider serves roots in several
windows (its candidates must not repeat across windows).
"""
import json

import pytest
import webob

from placement.objects.candidates import engine
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits

AGG = 'cccccccc-0000-0000-0000-000000000001'
ROOTS = 700


def _world():
    w = cw.WorldBuilder()
    # Children created before their roots: ids lower than the root's.
    for i in range(0, ROOTS, 49):
        w.provider('early%d' % i)
        w.inventory('early%d' % i, 'CUSTOM_X', 2)
    for i in range(ROOTS):
        name = 'cn%d' % i
        w.provider(name)
        w.inventory(name, 'VCPU', 4)
        if i % 7 != 0:
            w.usage(name, 'VCPU', 4)         # full: no candidate here
        if i % 13 == 0:
            w.provider(name + '_child', parent=name)
            w.inventory(name + '_child', 'CUSTOM_X', 1)
        if i % 49 == 0:
            early = w.by_name['early%d' % i]
            early['parent_provider_id'] = w.by_name[name]['id']
            early['root_provider_id'] = w.by_name[name]['id']
        if i % 5 == 0:
            w.aggregate(name, AGG)
    w.provider('shared')
    w.trait('shared', cw.SHARES)
    w.aggregate('shared', AGG)
    w.inventory('shared', 'DISK_GB', 1000)
    return w


@pytest.fixture(scope='module', params=['world', 'sql'])
def app(request):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(engine, 'USE_WORLD', request.param == 'world')
        with gabbits.app_over_world(_world()) as app:
            yield app


def _get(app, qs):
    resp = webob.Request.blank('/allocation_candidates?' + qs, headers={
        'x-auth-token': 'admin',
        'openstack-api-version': 'placement 1.39'}).get_response(app)
    assert resp.status_int == 200, resp.body
    body = json.loads(resp.body)
    keys = [json.dumps([ar['allocations'], ar['mappings']], sort_keys=True)
            for ar in body['allocation_requests']]
    used = {rp for ar in body['allocation_requests']
            for rp in ar['allocations']}
    assert used <= set(body['provider_summaries'])
    return keys


QUERIES = [
    'resources=VCPU:1',
    'resources=VCPU:1,DISK_GB:10',
    'resources=VCPU:1&resources1=CUSTOM_X:1&group_policy=none',
    'resources1=VCPU:1&resources2=CUSTOM_X:1&group_policy=isolate',
    'resources=VCPU:1&member_of=' + AGG,
]


@pytest.mark.parametrize('qs', QUERIES,
                         ids=['q%d' % i for i in range(len(QUERIES))])
def test_limited_answers_are_part_of_the_whole(app, qs):
    whole = _get(app, qs)
    assert len(whole) == len(set(whole))
    assert len(whole) > 3, 'the world should offer several candidates'
    for limit in (1, 2, 5, len(whole) - 1, len(whole), len(whole) + 10):
        part = _get(app, qs + '&limit=%d' % limit)
        assert len(part) == min(limit, len(whole)), limit
        assert len(part) == len(set(part)), limit
        assert set(part) <= set(whole), limit


def test_sharing_candidates_do_not_repeat_across_windows(app):
    # The disk comes from one sharing provider whatever the root: the
    # candidates differ by root only, and every aggregate member with
    # free VCPU is found once.
    whole = _get(app, 'resources=VCPU:1,DISK_GB:10')
    expected = len([i for i in range(ROOTS) if i % 7 == 0 and i % 5 == 0])
    assert len(whole) == expected
