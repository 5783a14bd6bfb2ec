"""Inventories only SQL by hand writes (step_size 0 or negative, min_unit
above max_unit, reserved above total) and a ratio MySQL's FLOAT column
rounds are answered alike by every place that judges capacity: the world
engine, the SQL engine, explain, the capacity report, GET
/resource_providers?resources=, the claim check and the audit. What they
answer is capacity_rules': such a row admits no amount, and never is a
database error.

The database is SQLite unless ``PLACEMENT_TEST_DB_URL`` names a server.
"""
import json
import uuid

import pytest
import sqlalchemy as sa
import webob

from placement import context as placement_context
from placement.db import api as db_api
from placement.db import models
from placement.objects import audit
from placement.objects import capacity_rules as cr
from placement.objects.candidates import engine
from placement.objects.candidates import search
from placement.tests.functional import candidate_worlds
from placement.tests.functional.fixtures import gabbits

H = {'x-auth-token': 'admin', 'accept': 'application/json',
     'openstack-api-version': 'placement latest'}
# name: (total, reserved, ratio, min_unit, max_unit, step_size)
INVENTORIES = {
    'ok': (8, 0, 1.0, 1, 8, 1),
    'step2': (8, 0, 1.0, 1, 8, 2),
    'step0': (8, 0, 1.0, 1, 8, 0),
    'step-2': (8, 0, 1.0, 1, 8, -2),
    'min-above-max': (8, 0, 1.0, 6, 2, 1),
    'reserved-above-total': (4, 6, 1.0, 1, 4, 1),
    'float-ratio': (10, 0, 0.9, 1, 10, 1),
}
# Usage planted on these (the audit's findings).
USAGE = {'step0': 2, 'step-2': 2, 'reserved-above-total': 1}
AMOUNTS = (1, 2, 3, 4, 9)


def _world():
    w = candidate_worlds.WorldBuilder()
    for name, (total, reserved, ratio, lo, hi, step) in INVENTORIES.items():
        w.provider(name)
        w.inventory(name, 'VCPU', total, reserved=reserved, min_unit=lo,
                    max_unit=hi, step_size=step, allocation_ratio=ratio)
    for name, used in USAGE.items():
        w.usage(name, 'VCPU', used)
    return w


def _request(app, path, method='GET', body=None):
    req = webob.Request.blank(path, method=method, headers=dict(
        H, **({'content-type': 'application/json'} if body else {})))
    if body is not None:
        req.body = json.dumps(body).encode()
    return req.get_response(app)


def _get(app, path):
    """The body, or the status when it is not 200 (a judge that errs
    disagrees; the test goes on to the others)."""
    resp = _request(app, path)
    return resp.json if resp.status_int == 200 else resp.status_int


def _candidates(app, amount):
    body = _get(app, '/allocation_candidates?resources=VCPU:%d' % amount)
    if isinstance(body, int):
        return body
    return {u for ar in body['allocation_requests']
            for u in ar['allocations']}


def _expected(names, amount, mysql):
    """Providers capacity_rules lets take ``amount``, as a statement
    computes (MySQL's FLOAT ratio)."""
    out = set()
    for name, (total, reserved, ratio, lo, hi, step) in INVENTORIES.items():
        used = USAGE.get(name, 0)
        cap = cr.capacity(total, reserved, cr.stored_ratio(ratio, mysql))
        if cr.has_room(used, amount, cap) and cr.units_allow(amount, lo, hi,
                                                             step):
            out.add(names[name])
    return out


@pytest.fixture
def odd():
    world = _world()
    with gabbits.app_and_engine_over_world(world) as (app, db_engine):
        names = {r['name']: r['uuid'] for r in world.rps}
        yield app, names, db_engine.dialect.name == 'mysql'


def test_every_judge_answers_alike(odd, monkeypatch):
    app, names, mysql = odd
    by_uuid = {u: n for n, u in names.items()}
    world_answers = []
    real = search.find_in_world
    monkeypatch.setattr(search, 'find_in_world', lambda *a, **k: (
        world_answers.append(1), real(*a, **k))[1])
    wrong = []
    for amount in AMOUNTS:
        want = _expected(names, amount, mysql)
        query = 'resources=VCPU:%d' % amount
        got = {'world': _candidates(app, amount)}
        with monkeypatch.context() as m:
            m.setattr(engine, 'USE_WORLD', False)
            got['sql'] = _candidates(app, amount)
        explained = _get(app, '/ops/explain/allocation_candidates?%s'
                         '&explain_sample=1000' % query)
        got['explain'] = explained if isinstance(explained, int) else {
            p['uuid'] for p in explained['explained'] if p['kept']}
        report = _get(app, '/ops/capacity?' + query)
        got['capacity'] = report if isinstance(report, int) else {
            t['root_provider_uuid'] for t in report['trees'] if t['fits']}
        rps = _get(app, '/resource_providers?' + query)
        got['resource_providers'] = rps if isinstance(rps, int) else {
            p['uuid'] for p in rps['resource_providers']}
        for judge, uuids in got.items():
            if uuids != want:
                wrong.append((amount, judge, uuids if isinstance(
                    uuids, int) else sorted(by_uuid[u] for u in uuids ^ want)))
    assert not wrong, '\n'.join(map(str, wrong))
    assert world_answers, 'the world engine never answered'


def test_claims_refuse_what_units_refuse(odd):
    """A claim is refused (400 or 409), never a server error (step_size
    0 was a ZeroDivisionError), on a row that admits nothing; a claim the
    rules allow is made. (The claim
    reads the ratio as its driver gives it, as upstream: on MySQL it may
    take 9 of 10 * 0.9 that no candidate offers.)"""
    app, names, _mysql = odd
    for name, (total, reserved, ratio, lo, hi, step) in INVENTORIES.items():
        for amount in AMOUNTS:
            consumer = str(uuid.uuid4())
            resp = _request(app, '/allocations/' + consumer, 'PUT', {
                'allocations': {names[name]: {'resources': {
                    'VCPU': amount}}},
                'project_id': 'p', 'user_id': 'u',
                'consumer_generation': None, 'consumer_type': 'INSTANCE'})
            allowed = cr.units_allow(amount, lo, hi, step) and cr.has_room(
                USAGE.get(name, 0), amount, cr.capacity(total, reserved,
                                                        ratio))
            assert resp.status_int in ((204,) if allowed else (400, 409)), (
                name, amount, resp.text)
            if allowed:
                _request(app, '/allocations/' + consumer, 'DELETE')


def test_audit_finds_usage_odd_rows_cannot_hold(odd):
    app, names, _mysql = odd
    findings = audit.find(placement_context.admin_context(), 'x', 'x')
    bad_units = {f['provider'] for f in findings
                 if f['kind'] == audit.BAD_UNIT}
    over = {f['provider'] for f in findings
            if f['kind'] == audit.OVER_CAPACITY}
    assert bad_units == {names['step0'], names['step-2']}
    assert over == {names['reserved-above-total']}


def test_the_rows_are_as_written(odd):
    """The odd rows really are in the database (no constraint refused
    them), so the answers above are about them."""
    _app, _names, _mysql = odd
    ctx = placement_context.admin_context()

    @db_api.reader
    def steps(ctx):
        return sorted(r[0] for r in ctx.session.execute(
            sa.select(models.INV.c.step_size)))
    assert steps(ctx) == [-2, 0, 1, 1, 1, 1, 2]
