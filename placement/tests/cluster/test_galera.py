"""Several API nodes on a real 3-node MariaDB Galera cluster.

tools/galera-cluster brings the cluster up on loopback (once for this
module); three gunicorn servers (2 workers each) serve one database, each
through a different Galera node. On Galera a write that conflicts with one
committed through another node fails certification at COMMIT (deadlock
1213); the service must retry it, never answer 5xx, never over-commit a
provider and never lose an update. A read through one node must see what
the client wrote through another (``[placement_database]
galera_sync_wait``). Checked over HTTP against what the clients saw.
"""
import collections
import concurrent.futures
import contextlib
import os
import random
import statistics
import threading
import time
import uuid

import pytest
import requests
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import migration
from placement.tests.cluster import conftest
from placement.tests.functional import live_server

VERSION = '1.36'
PROJECT = uuid.uuid4().hex
USER = uuid.uuid4().hex
API_PORTS = [int(p) for p in os.environ.get(
    'GALERA_API_PORTS', '8771,8772,8773').split(',')]
THREADS = 40
WRITES_PER_THREAD = 80          # 40 x 80 = 3,200 writes
PROVIDERS = 4
VCPU = 32
SHARED = 16
RYW_CYCLES = 110                # two write-then-read pairs each


def _headers():
    return live_server.LiveServer.headers(version=VERSION)


@pytest.fixture(scope='module')
def galera():
    with conftest.script_cluster('galera-cluster') as urls:
        yield [urls['GALERA_URL%d' % n] for n in (1, 2, 3)]


@pytest.fixture(scope='module')
def database(galera):
    """One fresh database, migrated through node 1; its URL on each node."""
    name = 'ptest_' + uuid.uuid4().hex[:12]
    admin = sa.create_engine(galera[0], isolation_level='AUTOCOMMIT')
    with admin.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE %s' % name))
    urls = [sa.engine.make_url(u).set(database=name).render_as_string(
        hide_password=False) for u in galera]
    engine = sa.create_engine(urls[0])
    migration.upgrade('head', engine=engine)
    engine.dispose()
    yield urls
    with admin.connect() as conn:
        conn.execute(sa.text('DROP DATABASE IF EXISTS %s' % name))
    admin.dispose()


@pytest.fixture(scope='module')
def api_nodes(database):
    """Three API servers, server i on Galera node i."""
    servers = []
    try:
        for port, url in zip(API_PORTS, database):
            servers.append(live_server.LiveServer(
                workers=2, port=port, db_url=url, timeout=120).start())
        yield servers
    finally:
        for server in servers:
            server.stop()


def _retries_logged(servers):
    return sum(s.log_text().count(db_api.DEADLOCK_RETRY_LOG)
               for s in servers)


class Client:
    """One client thread's view: what it wrote and what it got back."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.http = requests.Session()

    def call(self, method, path, node=None, json=None):
        node = node if node is not None else random.choice(self.nodes)
        resp = self.http.request(method, node.url + path, json=json,
                                 headers=_headers(), timeout=120)
        return resp


def _alloc_body(allocs, generation):
    return {'allocations': {rp: {'resources': res}
                            for rp, res in allocs.items()},
            'project_id': PROJECT, 'user_id': USER,
            'consumer_generation': generation}


def _make_providers(client, n, vcpu, prefix):
    rps = []
    for i in range(n):
        rp = str(uuid.uuid4())
        r = client.call('POST', '/resource_providers',
                        json={'name': '%s-%d-%s' % (prefix, i, rp[:8]),
                              'uuid': rp})
        assert r.status_code == 200, r.text
        r = client.call('PUT', '/resource_providers/%s/inventories' % rp,
                        json={'resource_provider_generation': 0,
                              'inventories': {
                                  'VCPU': {'total': vcpu, 'max_unit': 8},
                                  'MEMORY_MB': {'total': 8192,
                                                'max_unit': 8192}}})
        assert r.status_code == 200, r.text
        rps.append(rp)
    return rps


class Race:
    """The mixed write load of item 2 and the record of what it saw."""

    def __init__(self, nodes, rps, shared):
        self.nodes = nodes
        self.rps = rps
        self.shared = shared
        self.lock = threading.Lock()
        self.statuses = collections.Counter()
        self.by_op = collections.Counter()
        self.bad = []                     # (op, status, body) of non-2xx/409
        self.writes = 0
        # Own consumers: consumer -> allocations it should have (None:
        # deleted); written by one thread only.
        self.own = {}
        # Shared consumers: consumer -> [(generation sent, allocations)]
        # of each 2xx update.
        self.shared_ok = collections.defaultdict(list)

    def _count(self, op, resp):
        with self.lock:
            self.writes += 1
            self.statuses[resp.status_code] += 1
            self.by_op[op, resp.status_code] += 1
            if resp.status_code >= 300 and resp.status_code != 409:
                self.bad.append((op, resp.status_code, resp.text[:300]))

    def _res(self):
        return {'VCPU': random.choice((1, 1, 2)),
                'MEMORY_MB': random.choice((128, 256))}

    def worker(self, seed, writes=WRITES_PER_THREAD, stop=None):
        rnd = random.Random(seed)
        client = Client(self.nodes)
        mine = []
        for _ in range(writes):
            if stop is not None and stop.is_set():
                break
            op = rnd.choices(
                ('one', 'two', 'batch', 'shared', 'delete', 'inventory'),
                weights=(20, 15, 12, 23, 20, 10))[0]
            if (op == 'delete' and not mine) or (
                    op == 'shared' and not self.shared):
                op = 'one'
            if op in ('one', 'two'):
                c = str(uuid.uuid4())
                allocs = {rp: self._res()
                          for rp in rnd.sample(self.rps, 1 if op == 'one'
                                               else 2)}
                r = client.call('PUT', '/allocations/' + c,
                                json=_alloc_body(allocs, None))
                self._count(op, r)
                if r.status_code == 204:
                    self.own[c] = allocs
                    mine.append(c)
            elif op == 'batch':
                body = {}
                for _ in range(rnd.choice((2, 3))):
                    body[str(uuid.uuid4())] = _alloc_body(
                        {rnd.choice(self.rps): self._res()}, None)
                r = client.call('POST', '/allocations', json=body)
                self._count(op, r)
                if r.status_code == 204:
                    for c, b in body.items():
                        self.own[c] = {
                            rp: v['resources']
                            for rp, v in b['allocations'].items()}
                        mine.append(c)
            elif op == 'shared':
                c = rnd.choice(self.shared)
                got = client.call('GET', '/allocations/' + c)
                assert got.status_code == 200, got.text
                gen = got.json()['consumer_generation']
                allocs = {rnd.choice(self.rps): self._res()}
                r = client.call('PUT', '/allocations/' + c,
                                json=_alloc_body(allocs, gen))
                self._count(op, r)
                if r.status_code == 204:
                    with self.lock:
                        self.shared_ok[c].append((gen, allocs))
            elif op == 'delete':
                c = mine.pop(rnd.randrange(len(mine)))
                r = client.call('DELETE', '/allocations/' + c)
                self._count(op, r)
                if r.status_code == 204:
                    self.own[c] = None
                else:
                    mine.append(c)
            else:
                rp = rnd.choice(self.rps)
                got = client.call(
                    'GET', '/resource_providers/%s/inventories/VCPU' % rp)
                assert got.status_code == 200, got.text
                inv = got.json()
                r = client.call(
                    'PUT', '/resource_providers/%s/inventories/VCPU' % rp,
                    json={'resource_provider_generation':
                          inv['resource_provider_generation'],
                          'total': inv['total'],
                          'max_unit': 8 if inv['max_unit'] == 4 else 4})
                self._count(op, r)


@contextlib.contextmanager
def _background_load(nodes, threads=6):
    """The race's writes going on meanwhile (its own providers), so that
    the nodes' appliers have a queue a read could overtake."""
    client = Client(nodes)
    rps = _make_providers(client, 2, 1000, 'load')
    race = Race(nodes, rps, [])
    stop = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(threads)
    futures = [pool.submit(race.worker, 1000 + i, 10 ** 6, stop)
               for i in range(threads)]
    try:
        yield race
    finally:
        stop.set()
        for f in futures:
            f.result()
        pool.shutdown()


def _stored(client, rps):
    """consumer -> {rp: resources} as the service has it now."""
    stored = collections.defaultdict(dict)
    for rp in rps:
        r = client.call('GET', '/resource_providers/%s/allocations' % rp)
        assert r.status_code == 200, r.text
        for c, a in r.json()['allocations'].items():
            stored[c][rp] = a['resources']
    return stored


def _violations(client, race, initial):
    """What the service holds that contradicts what the clients saw."""
    found = []
    for rp in race.rps:
        inv = client.call(
            'GET', '/resource_providers/%s/inventories' % rp).json()
        use = client.call(
            'GET', '/resource_providers/%s/usages' % rp).json()['usages']
        for rc, i in inv['inventories'].items():
            cap = (i['total'] - i['reserved']) * i['allocation_ratio']
            if use.get(rc, 0) > cap:
                found.append('over capacity: %s %s %s of %s'
                             % (rp, rc, use[rc], cap))
    expected = {c: a for c, a in race.own.items() if a}
    for c in race.shared:
        oks = race.shared_ok.get(c, [])
        gens = [g for g, _ in oks]
        if len(gens) != len(set(gens)):
            found.append('lost update: consumer %s took two writes at one '
                         'generation: %s' % (c, sorted(gens)))
        got = client.call('GET', '/allocations/' + c).json()
        gen0, allocs0 = initial[c]
        if got['consumer_generation'] != gen0 + len(oks):
            found.append('consumer %s generation %s, expected %s + %d '
                         'successful updates' % (c, got['consumer_generation'],
                                                 gen0, len(oks)))
        expected[c] = max(oks, key=lambda o: o[0])[1] if oks else allocs0
    expected = {c: a for c, a in expected.items() if a}
    stored = _stored(client, race.rps)
    for c in set(expected) | set(stored):
        if expected.get(c) != stored.get(c):
            found.append('consumer %s stored %s, clients saw %s'
                         % (c, stored.get(c), expected.get(c)))
    return found


def test_racing_writes_through_three_nodes(api_nodes):
    """≥ 3,000 racing writes spread over the three nodes: only 2xx and
    409, nothing over capacity, no lost update, the stored allocations
    exactly the successful writes."""
    setup = Client(api_nodes)
    rps = _make_providers(setup, PROVIDERS, VCPU, 'race')
    shared = []
    for _ in range(SHARED):
        c = str(uuid.uuid4())
        r = setup.call('PUT', '/allocations/' + c, json=_alloc_body(
            {random.choice(rps): {'VCPU': 1, 'MEMORY_MB': 128}}, None))
        assert r.status_code == 204, r.text
        shared.append(c)
    initial = {}
    for c in shared:
        got = setup.call('GET', '/allocations/' + c).json()
        initial[c] = (got['consumer_generation'],
                      {rp: a['resources']
                       for rp, a in got['allocations'].items()})
    race = Race(api_nodes, rps, shared)
    retries_before = _retries_logged(api_nodes)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        for f in [pool.submit(race.worker, seed) for seed in range(THREADS)]:
            f.result()
    took = time.monotonic() - start
    retries = _retries_logged(api_nodes) - retries_before
    violations = _violations(setup, race, initial)
    s = race.statuses
    conftest.report(
        'galera race: %d writes in %.1fs, 2xx %d, 409 %d, 5xx %d, other '
        '%d; certification/deadlock retries %d; violations %d' % (
            race.writes, took, sum(v for k, v in s.items() if k < 300),
            s[409], sum(v for k, v in s.items() if k >= 500),
            sum(v for k, v in s.items()
                if 300 <= k < 500 and k != 409), retries, len(violations)))
    conftest.report('galera race by operation: %s' % ', '.join(
        '%s %s: %d' % (op, st, n) for (op, st), n in sorted(
            race.by_op.items())))
    assert race.writes >= 3000
    assert not race.bad, race.bad[:5]
    # A delete has nothing to refuse: a 409 there would be a deadlock or
    # certification failure that was not retried.
    assert race.by_op['delete', 409] == 0, race.by_op
    assert not violations, violations[:10]
    # The load must have raced: refusals and successes both.
    assert s[409] > 0 and s[204] + s[200] > 1000, s


def _pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def test_read_your_writes_across_nodes(api_nodes, database):
    """Write through one node, read through another at once: the
    provider's generation, the allocations, the usages and the
    candidates show the write, every time."""
    client = Client(api_nodes)
    rps = _make_providers(client, 3, 4, 'ryw')
    stale = []
    pairs = 0
    with _background_load(api_nodes) as load:
        pairs = _ryw_pairs(client, api_nodes, rps, stale)
    conftest.report('galera read-your-writes: %d write-then-read-elsewhere '
                    'pairs, %d stale (under a load of %d writes meanwhile)'
                    % (pairs, len(stale), load.writes))
    assert pairs >= 200
    assert not stale, stale[:5]


def _ryw_pairs(client, api_nodes, rps, stale):
    pairs = 0
    for i in range(RYW_CYCLES):
        w, r = random.sample(api_nodes, 2)
        rp = rps[i % len(rps)]
        c = str(uuid.uuid4())
        # Claim all of the provider's VCPU through w ...
        put = client.call('PUT', '/allocations/' + c, node=w,
                          json=_alloc_body({rp: {'VCPU': 4}}, None))
        assert put.status_code == 204, put.text
        # ... and read through r: allocations, usages, no candidate left.
        got = client.call('GET', '/allocations/' + c, node=r).json()
        use = client.call('GET', '/resource_providers/%s/usages' % rp,
                          node=r).json()['usages']
        cands = client.call(
            'GET', '/allocation_candidates?resources=VCPU:1&in_tree=' + rp,
            node=r).json()['allocation_requests']
        pairs += 1
        if (rp not in got['allocations'] or use['VCPU'] != 4 or cands):
            stale.append(('claim', i, got, use, len(cands)))
        # An inventory write through r, read back through w: generation.
        inv = client.call('GET', '/resource_providers/%s/inventories/'
                          'MEMORY_MB' % rp, node=r).json()
        upd = client.call(
            'PUT', '/resource_providers/%s/inventories/MEMORY_MB' % rp,
            node=r, json={'resource_provider_generation':
                          inv['resource_provider_generation'],
                          'total': inv['total'] + 1,
                          'max_unit': inv['max_unit']})
        assert upd.status_code == 200, upd.text
        gen = upd.json()['resource_provider_generation']
        seen = client.call('GET', '/resource_providers/' + rp,
                           node=w).json()['generation']
        pairs += 1
        if seen != gen:
            stale.append(('generation', i, seen, gen))
        # Free it through r, then candidates through w show it again.
        d = client.call('DELETE', '/allocations/' + c, node=r)
        assert d.status_code == 204, d.text
        cands = client.call(
            'GET', '/allocation_candidates?resources=VCPU:1&in_tree=' + rp,
            node=w).json()['allocation_requests']
        pairs += 1
        if len(cands) != 1:
            stale.append(('release', i, len(cands)))
    return pairs


def test_sync_wait_cost(api_nodes, database):
    """What galera_sync_wait costs a read: the same GETs through node 2,
    interleaved, on a server with it (1) and one without (0); and how
    often a read without it misses a write made through node 1."""
    client = Client(api_nodes)
    rp = _make_providers(client, 1, 64, 'cost')[0]
    plain = live_server.LiveServer(
        workers=1, db_url=database[1], timeout=120,
        conf={'placement_database': {'galera_sync_wait': 0}}).start()
    try:
        with _background_load(api_nodes) as load:
            lat, stale = _cost(client, api_nodes, plain, rp)
    finally:
        plain.stop()
    med = {k: statistics.median(v) * 1000 for k, v in lat.items()}
    p95 = {k: _pct(v, 0.95) * 1000 for k, v in lat.items()}
    conftest.report(
        'galera sync_wait cost (under a load of %d writes): GET median '
        '%.2f ms with wsrep_sync_wait=1 vs %.2f ms without (p95 %.2f vs '
        '%.2f); without it %d of 100 reads through another node missed '
        'the write' % (load.writes, med['sync'], med['plain'], p95['sync'],
                       p95['plain'], stale))
    # Both answered; the figures are the point. A sync wait that cost more
    # than a few round trips would show a misconfigured cluster.
    assert med['sync'] < med['plain'] + 50


def _cost(client, api_nodes, plain, rp):
    """Interleaved GET latency through node 2 with and without the sync
    wait; reads without it that missed a write made through node 1."""
    synced = api_nodes[1]
    lat = {'sync': [], 'plain': []}
    paths = ['/resource_providers/' + rp,
             '/resource_providers/%s/usages' % rp,
             '/allocation_candidates?resources=VCPU:1&in_tree=' + rp]
    for _ in range(3):   # warm both
        for node in (synced, plain):
            for p in paths:
                client.call('GET', p, node=node)
    for i in range(150):
        for name, node in (('sync', synced), ('plain', plain))[
                ::1 if i % 2 else -1]:
            t = time.perf_counter()
            for p in paths:
                assert client.call('GET', p, node=node).ok
            lat[name].append((time.perf_counter() - t) / len(paths))
    # Staleness without sync_wait: write through node 1, read at once
    # through the plain server on node 2.
    stale = 0
    for i in range(100):
        c = str(uuid.uuid4())
        put = client.call('PUT', '/allocations/' + c, node=api_nodes[0],
                          json=_alloc_body({rp: {'VCPU': 1}}, None))
        assert put.status_code == 204, put.text
        got = client.call('GET', '/allocations/' + c, node=plain).json()
        stale += rp not in got['allocations']
        client.call('DELETE', '/allocations/' + c, node=api_nodes[0])
    return lat, stale
