"""Concurrent allocation writers never over-commit a provider.

A real gunicorn with several worker processes (each with threads) serves a
fresh database; 20 client threads fire 240 allocation writes at providers
with room for fewer than half of them. Afterwards, over HTTP only:

* no provider's usage exceeds (total - reserved) * allocation_ratio;
* the writes that answered 204 are exactly the consumers stored, each with
  exactly what it asked for, and the refused ones left nothing behind;
* every refusal is a 409 (capacity, or concurrent update after retries),
  never a 500;
* each provider's generation moved once per successful write touching it.

On SQLite the server runs one worker (SQLite serialises writers anyway),
which keeps the harness honest; the real contention runs in CI on
PostgreSQL and MariaDB via PLACEMENT_TEST_DB_URL.
"""
import collections
import concurrent.futures
import threading
import uuid

import pytest

from placement.tests import db as test_db
from placement.tests.functional import live_server

requests = pytest.importorskip('requests')

CLIENT_THREADS = 20
WRITES = 240
PROVIDERS = 4
VCPU_TOTAL = 48          # (48 - 0) * 1.0 per provider
VCPU_PER_WRITE = 2       # 24 single-provider writes fit per provider
MEMORY_TOTAL = 100000


def _server_shape():
    if test_db.backend() == 'sqlite':
        return {'workers': 1, 'threads': 1}
    return {'workers': 4, 'threads': 4}


def _check(resp, *expected):
    assert resp.status_code in expected, (resp.status_code, resp.text)
    return resp


def _make_world(session, url, headers):
    providers = []
    for i in range(PROVIDERS):
        rp_uuid = str(uuid.uuid4())
        _check(session.post(url + '/resource_providers', headers=headers,
                            json={'name': 'conc-%d-%s' % (i, rp_uuid[:8]),
                                  'uuid': rp_uuid}), 200)
        _check(session.put(
            url + '/resource_providers/%s/inventories' % rp_uuid,
            headers=headers,
            json={'resource_provider_generation': 0,
                  'inventories': {
                      'VCPU': {'total': VCPU_TOTAL,
                               'max_unit': VCPU_TOTAL},
                      'MEMORY_MB': {'total': MEMORY_TOTAL,
                                    'max_unit': MEMORY_TOTAL}}}), 200)
        providers.append(rp_uuid)
    return providers


def _plan(providers):
    """Mostly single-provider writes, every fifth spread over two providers
    (so one transaction bumps two generations)."""
    plan = []
    for n in range(WRITES):
        first = providers[n % len(providers)]
        if n % 5 == 4:
            second = providers[(n + 1) % len(providers)]
            allocs = {first: {'VCPU': 1, 'MEMORY_MB': 128},
                      second: {'VCPU': 1}}
        else:
            allocs = {first: {'VCPU': VCPU_PER_WRITE, 'MEMORY_MB': 256}}
        plan.append((str(uuid.uuid4()), allocs))
    return plan


def test_concurrent_writers_never_over_commit():
    shape = _server_shape()
    with live_server.LiveServer(**shape) as server:
        url = server.url
        headers = server.headers(version='1.38')
        setup = requests.Session()
        providers = _make_world(setup, url, headers)
        start_generation = {
            p: setup.get(url + '/resource_providers/' + p,
                         headers=headers).json()['generation']
            for p in providers}
        plan = _plan(providers)
        project, user = str(uuid.uuid4()), str(uuid.uuid4())
        local = threading.local()

        def write(item):
            consumer, allocs = item
            session = getattr(local, 'session', None)
            if session is None:
                session = local.session = requests.Session()
            body = {'allocations': {rp: {'resources': res}
                                    for rp, res in allocs.items()},
                    'project_id': project, 'user_id': user,
                    'consumer_generation': None,
                    'consumer_type': 'INSTANCE'}
            resp = session.put(url + '/allocations/' + consumer,
                               headers=headers, json=body, timeout=120)
            return consumer, allocs, resp.status_code, resp.text

        with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
            results = list(pool.map(write, plan))

        statuses = collections.Counter(r[2] for r in results)
        bad = [r for r in results if r[2] not in (204, 409)]
        assert not bad, 'unexpected answers %s\n%s' % (
            bad[:3], server.log_text()[-3000:])
        for _c, _a, status, text in results:
            if status == 409:
                assert ('exceed the capacity' in text
                        or 'placement.concurrent_update' in text), text
        succeeded = {c: a for c, a, s, _t in results if s == 204}
        refused = {c for c, _a, s, _t in results if s == 409}
        # The world has room for fewer than half of the writes.
        assert 0 < len(succeeded) < WRITES / 2, statuses
        assert refused

        # Usage never over capacity, and stored consumers == successes.
        stored = {}
        for rp in providers:
            body = setup.get(url + '/resource_providers/%s/allocations' % rp,
                             headers=headers).json()
            used = collections.Counter()
            for consumer, alloc in body['allocations'].items():
                used.update(alloc['resources'])
                stored.setdefault(consumer, {})[rp] = alloc['resources']
            assert used['VCPU'] <= VCPU_TOTAL, (rp, used)
            assert used['MEMORY_MB'] <= MEMORY_TOTAL, (rp, used)
            touched = sum(1 for a in succeeded.values() if rp in a)
            assert body['resource_provider_generation'] == (
                start_generation[rp] + touched), rp
        assert stored == succeeded

        # Refused consumers were not left behind.
        for consumer in list(refused)[:25]:
            body = setup.get(url + '/allocations/' + consumer,
                             headers=headers).json()
            assert body == {'allocations': {}}, consumer
        # Each successful consumer is whole, at generation 1.
        for consumer, allocs in list(succeeded.items())[:25]:
            body = setup.get(url + '/allocations/' + consumer,
                             headers=headers).json()
            assert body['consumer_generation'] == 1
            assert {rp: a['resources'] for rp, a in
                    body['allocations'].items()} == allocs

        _same_consumer_races(url, server, setup, providers, local)


def _same_consumer_races(url, server, setup, providers, local):
    """Many threads replacing the same few consumers at once, before 1.28
    (no consumer generation, so creates and replaces race) and with
    POST /allocations moving them around: every answer is 204 or 409,
    and each consumer ends up holding exactly one of the sets asked for."""
    # Make room: drop every allocation written so far.
    for rp in providers:
        body = setup.get(url + '/resource_providers/%s/allocations' % rp,
                         headers=server.headers()).json()
        for consumer in body['allocations']:
            setup.delete(url + '/allocations/' + consumer,
                         headers=server.headers())
    consumers = [str(uuid.uuid4()) for _ in range(3)]
    old = server.headers(version='1.27')
    post = server.headers(version='1.27')
    asked = collections.defaultdict(list)
    jobs = []
    for n in range(60):
        consumer = consumers[n % len(consumers)]
        rp = providers[n % len(providers)]
        allocs = {rp: {'VCPU': 1 + n % 3}}
        asked[consumer].append(allocs)
        jobs.append((n, consumer, allocs))

    def race(job):
        n, consumer, allocs = job
        session = getattr(local, 'session', None)
        if session is None:
            session = local.session = requests.Session()
        body = {'allocations': {rp: {'resources': res}
                                for rp, res in allocs.items()},
                'project_id': 'p', 'user_id': 'u'}
        if n % 4 == 3:
            resp = session.post(url + '/allocations', headers=post,
                                json={consumer: body}, timeout=120)
        else:
            resp = session.put(url + '/allocations/' + consumer,
                               headers=old, json=body, timeout=120)
        return resp.status_code, resp.text

    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        results = list(pool.map(race, jobs))
    bad = [r for r in results if r[0] not in (204, 409)]
    assert not bad, 'unexpected answers %s\n%s' % (
        bad[:3], server.log_text()[-3000:])
    assert any(r[0] == 204 for r in results)
    for consumer in consumers:
        body = setup.get(url + '/allocations/' + consumer,
                         headers=server.headers()).json()
        held = {rp: a['resources'] for rp, a in body['allocations'].items()}
        assert held in asked[consumer], (consumer, held)
