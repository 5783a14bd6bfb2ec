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
import urllib.parse
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
RYW_CYCLES = 70                 # three write-then-read pairs each


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
        conftest.report_server_errors(servers)
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
        self.by_node = collections.Counter()
        self.phase = 'race'
        # Consumers whose last write got a 5xx: the stored allocations
        # may be any of these.
        self.unsure = {}
        self.shared_unsure = collections.defaultdict(list)
        self.bad = []                     # (op, status, body) of non-2xx/409
        self.writes = 0
        # Own consumers: consumer -> allocations it should have (None:
        # deleted); written by one thread only.
        self.own = {}
        # Shared consumers: consumer -> [(generation sent, allocations)]
        # of each 2xx update.
        self.shared_ok = collections.defaultdict(list)

    def _count(self, op, resp):
        port = urllib.parse.urlsplit(resp.url).port
        with self.lock:
            self.writes += 1
            self.statuses[resp.status_code] += 1
            self.by_op[op, resp.status_code] += 1
            self.by_node[port, self.phase, resp.status_code] += 1
            if resp.status_code >= 300 and resp.status_code != 409:
                self.bad.append((port, self.phase, op, resp.status_code,
                                 resp.text[:300]))
        # A 5xx write may or may not have been committed (its node died
        # between COMMIT and the answer): either outcome is right.
        return resp.status_code >= 500

    def _read_ok(self, resp):
        """A read the writes depend on answered; recorded as bad if not."""
        if resp.status_code == 200:
            return True
        with self.lock:
            self.bad.append((urllib.parse.urlsplit(resp.url).port,
                             self.phase, 'read', resp.status_code,
                             resp.text[:300]))
        return False

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
                if self._count(op, r):
                    self.unsure[c] = [None, allocs]
                if r.status_code == 204:
                    self.own[c] = allocs
                    mine.append(c)
            elif op == 'batch':
                body = {}
                for _ in range(rnd.choice((2, 3))):
                    body[str(uuid.uuid4())] = _alloc_body(
                        {rnd.choice(self.rps): self._res()}, None)
                r = client.call('POST', '/allocations', json=body)
                unsure = self._count(op, r)
                for c, b in body.items():
                    allocs = {rp: v['resources']
                              for rp, v in b['allocations'].items()}
                    if unsure:
                        self.unsure[c] = [None, allocs]
                    if r.status_code == 204:
                        self.own[c] = allocs
                        mine.append(c)
            elif op == 'shared':
                c = rnd.choice(self.shared)
                got = client.call('GET', '/allocations/' + c)
                if not self._read_ok(got):
                    continue
                gen = got.json()['consumer_generation']
                allocs = {rnd.choice(self.rps): self._res()}
                r = client.call('PUT', '/allocations/' + c,
                                json=_alloc_body(allocs, gen))
                unsure = self._count(op, r)
                with self.lock:
                    if r.status_code == 204:
                        self.shared_ok[c].append((gen, allocs))
                    elif unsure:
                        self.shared_unsure[c].append((gen, allocs))
            elif op == 'delete':
                c = mine.pop(rnd.randrange(len(mine)))
                r = client.call('DELETE', '/allocations/' + c)
                if self._count(op, r):
                    self.unsure[c] = [self.own[c], None]
                elif r.status_code == 204:
                    self.own[c] = None
                else:
                    mine.append(c)
            else:
                rp = rnd.choice(self.rps)
                got = client.call(
                    'GET', '/resource_providers/%s/inventories/VCPU' % rp)
                if not self._read_ok(got):
                    continue
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
    # consumer -> the allocations it may have (one choice unless a 5xx
    # left the outcome open); {} and None both mean none.
    allowed = {c: [a] for c, a in race.own.items()}
    allowed.update(race.unsure)
    for c in race.shared:
        oks = race.shared_ok.get(c, [])
        maybe = race.shared_unsure.get(c, [])
        gens = [g for g, _ in oks]
        if len(gens) != len(set(gens)):
            found.append('lost update: consumer %s took two writes at one '
                         'generation: %s' % (c, sorted(gens)))
        got = client.call('GET', '/allocations/' + c).json()
        gen0, allocs0 = initial[c]
        if not (gen0 + len(oks) <= got['consumer_generation']
                <= gen0 + len(oks) + len(maybe)):
            found.append('consumer %s generation %s, expected %s + %d '
                         'successful updates' % (c, got['consumer_generation'],
                                                 gen0, len(oks)))
        last = max(oks, key=lambda o: o[0])[1] if oks else allocs0
        allowed[c] = [last] + [a for _, a in maybe] if maybe else [last]
    stored = _stored(client, race.rps)
    for c in set(allowed) | set(stored):
        choices = [a or None for a in allowed.get(c, [None])]
        if stored.get(c) not in choices:
            found.append('consumer %s stored %s, clients saw %s'
                         % (c, stored.get(c), choices))
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


@pytest.fixture(scope='module')
def plain_node2(database):
    """An API server on node 2 with galera_sync_wait = 0: reads there do
    not wait for node 2 to apply what the cluster committed."""
    server = live_server.LiveServer(
        workers=1, db_url=database[1], timeout=120,
        conf={'placement_database': {'galera_sync_wait': 0}}).start()
    yield server
    server.stop()


@contextlib.contextmanager
def _applier_paused(db_url):
    """Node of ``db_url`` stops applying replicated writes (FLUSH TABLES
    WITH READ LOCK) until the block ends: a lagging node, on demand."""
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        conn.execute(sa.text('FLUSH TABLES WITH READ LOCK'))
        try:
            yield
        finally:
            conn.execute(sa.text('UNLOCK TABLES'))
    engine.dispose()


def test_reads_wait_for_a_lagging_node(api_nodes, plain_node2, database):
    """Node 2 holds back replicated writes: a write through node 1 is
    missing on node 2 without the sync wait (the hazard is real), and a
    read through the API node on node 2 waits for it and sees it."""
    client = Client(api_nodes)
    rp = _make_providers(client, 1, 64, 'lag')[0]
    missed = waited = 0
    rounds = 10
    for _ in range(rounds):
        c = str(uuid.uuid4())
        with _applier_paused(database[1]):
            put = client.call('PUT', '/allocations/' + c, node=api_nodes[0],
                              json=_alloc_body({rp: {'VCPU': 1}}, None))
            assert put.status_code == 204, put.text
            got = client.call('GET', '/allocations/' + c, node=plain_node2)
            missed += rp not in got.json()['allocations']
            pool = concurrent.futures.ThreadPoolExecutor(1)
            start = time.monotonic()
            read = pool.submit(client.call, 'GET', '/allocations/' + c,
                               api_nodes[1])
            time.sleep(0.3)
        got = read.result()
        waited += time.monotonic() - start >= 0.3
        pool.shutdown()
        assert rp in got.json()['allocations'], got.text
        client.call('DELETE', '/allocations/' + c, node=api_nodes[0])
    conftest.report('galera lagging node 2: %d of %d reads without the sync '
                    'wait missed the write; with it %d of %d waited and '
                    'all saw it' % (missed, rounds, waited, rounds))
    assert missed == rounds
    assert waited == rounds


def test_sync_wait_cost(api_nodes, plain_node2):
    """What galera_sync_wait costs a read: the same GETs through node 2,
    interleaved, on a server with it and one without; idle, and with
    writes going on meanwhile (the wait is for node 2's applier)."""
    client = Client(api_nodes)
    rp = _make_providers(client, 1, 64, 'cost')[0]
    idle = _latencies(client, api_nodes[1], plain_node2, rp)
    with _background_load(api_nodes) as load:
        busy = _latencies(client, api_nodes[1], plain_node2, rp)
        stale = 0
        for i in range(50):
            c = str(uuid.uuid4())
            put = client.call('PUT', '/allocations/' + c, node=api_nodes[0],
                              json=_alloc_body({rp: {'VCPU': 1}}, None))
            assert put.status_code == 204, put.text
            got = client.call('GET', '/allocations/' + c,
                              node=plain_node2).json()
            stale += rp not in got['allocations']
            client.call('DELETE', '/allocations/' + c, node=api_nodes[0])
    for name, lat in (('idle', idle), ('under %d writes' % load.writes,
                                       busy)):
        med = {k: statistics.median(v) * 1000 for k, v in lat.items()}
        p95 = {k: _pct(v, 0.95) * 1000 for k, v in lat.items()}
        conftest.report(
            'galera sync_wait cost, %s: GET median %.2f ms with '
            'wsrep_sync_wait=1 vs %.2f ms without (p95 %.2f vs %.2f)' % (
                name, med['sync'], med['plain'], p95['sync'], p95['plain']))
    conftest.report('galera without sync_wait under load: %d of 50 reads '
                    'through node 2 right after a write through node 1 '
                    'missed it' % stale)
    med = {k: statistics.median(v) for k, v in idle.items()}
    # Idle, the wait is one round of group communication on loopback.
    assert med['sync'] < med['plain'] + 0.05


def _latencies(client, synced, plain, rp, rounds=60):
    """Interleaved GET latency (seconds a request) through both servers."""
    lat = {'sync': [], 'plain': []}
    paths = ['/resource_providers/' + rp,
             '/resource_providers/%s/usages' % rp,
             '/allocation_candidates?resources=VCPU:1&in_tree=' + rp]
    for _ in range(3):   # warm both
        for node in (synced, plain):
            for p in paths:
                client.call('GET', p, node=node)
    for i in range(rounds):
        for name, node in (('sync', synced), ('plain', plain))[
                ::1 if i % 2 else -1]:
            t = time.perf_counter()
            for p in paths:
                assert client.call('GET', p, node=node).ok
            lat[name].append((time.perf_counter() - t) / len(paths))
    return lat


def test_node_dies_under_load(api_nodes):
    """SIGKILL Galera node 3 in the middle of the racing writes and bring
    it back: the API nodes on nodes 1 and 2 keep answering (never 5xx),
    the one on node 3 answers 503 (never 500) and serves again once its
    node has rejoined; consistency as after the race."""
    setup = Client(api_nodes[:2])
    rps = _make_providers(setup, PROVIDERS, VCPU, 'kill')
    shared = []
    initial = {}
    for _ in range(8):
        c = str(uuid.uuid4())
        allocs = {random.choice(rps): {'VCPU': 1, 'MEMORY_MB': 128}}
        r = setup.call('PUT', '/allocations/' + c,
                       json=_alloc_body(allocs, None))
        assert r.status_code == 204, r.text
        shared.append(c)
        initial[c] = (1, allocs)
    race = Race(api_nodes, rps, shared)
    race.phase = 'before'
    stop = threading.Event()
    dead = api_nodes[2]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        futures = [pool.submit(race.worker, 2000 + i, 10 ** 6, stop)
                   for i in range(20)]
        try:
            time.sleep(5)
            conftest.run_script('galera-cluster', 'kill', '3')
            race.phase = 'down'
            time.sleep(8)
            race.phase = 'rejoin'
            conftest.run_script('galera-cluster', 'start', '3')
            synced = time.monotonic()
            while True:
                r = setup.call('GET', '/resource_providers/' + rps[0],
                               node=dead)
                if r.status_code == 200:
                    break
                assert time.monotonic() - synced < 60, r.text
                time.sleep(0.1)
            back = time.monotonic() - synced
            race.phase = 'after'
            time.sleep(5)
        finally:
            stop.set()
            for f in futures:
                f.result()
    took = time.monotonic() - start
    violations = _violations(setup, race, initial)
    ports = [n.port for n in api_nodes]
    for port in ports:
        counts = collections.Counter()
        for (p, phase, status), n in race.by_node.items():
            if p == port:
                counts['%s %s' % (phase, status)] += n
        conftest.report('galera node death, API node :%d: %s' % (
            port, ', '.join('%s: %d' % kv for kv in sorted(counts.items()))))
    s = race.statuses
    conftest.report(
        'galera node death: %d writes in %.1fs, 2xx %d, 409 %d, 503 %d, '
        'other 5xx %d; API node on node 3 back %.1fs after its node '
        'synced; violations %d' % (
            race.writes, took, sum(v for k, v in s.items() if k < 300),
            s[409], s[503], sum(v for k, v in s.items()
                                if k >= 500 and k != 503),
            back, len(violations)))
    survivors = [b for b in race.bad if b[0] != dead.port]
    assert not survivors, survivors[:5]
    assert all(b[3] == 503 for b in race.bad), race.bad[:5]
    assert not violations, violations[:10]
    # The survivors served writes while node 3 was down.
    assert sum(n for (p, phase, st), n in race.by_node.items()
               if p != dead.port and phase == 'down' and st < 300) > 0
