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

from placement.db import api as db_api
from placement import deploy
from placement.tests import db as test_db
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional import fixtures

PROVIDERS = 8
QUERY = '/allocation_candidates?resources=VCPU:1&limit=1'


def _app(randomize):
    db = test_db.TestDatabase()
    w = cw.WorldBuilder()
    for i in range(PROVIDERS):
        w.provider('cn%d' % i)
        w.inventory('cn%d' % i, 'VCPU', 8)
    w.write(db.engine)
    conf = fixtures.build_test_conf(db.url, {
        ('placement', 'randomize_allocation_candidates'): randomize})
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)
    return deploy.loadapp(conf), conf, undo, db


@pytest.fixture(params=[False, True], ids=['ordered', 'randomized'])
def served(request):
    app, conf, undo, db = _app(request.param)
    try:
        yield request.param, app
    finally:
        conf.clear_override('randomize_allocation_candidates',
                            group='placement')
        for group, name in [('api', 'auth_strategy'),
                            ('placement_database', 'connection')]:
            conf.clear_override(name, group=group)
        undo()
        db.drop()


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
