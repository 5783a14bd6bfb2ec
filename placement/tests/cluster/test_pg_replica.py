"""A PostgreSQL primary and a hot standby (tools/pg-replica) under gunicorn
with ``[placement_database] slave_connection`` set (issue 17 item 5).

The CPU of each PostgreSQL server is read from /proc: the postmaster's
own and its exited children's time (cutime/cstime: a backend's CPU is
added there when it exits) plus that of the children still running. Two
servers run side by side on the same database, one without the replica
(as upstream: everything on the primary) and one with it, and the loads
alternate between them in one run.
"""
import concurrent.futures
import os
import random
import subprocess
import threading
import time
from unittest import mock
import uuid

import pytest
import requests
import sqlalchemy as sa

from placement.tests import db as test_db
from placement.tests.functional import live_server

REPO = live_server.REPO_ROOT
SCRIPT = os.path.join(REPO, 'tools', 'pg-replica')
BASE = os.environ.get('PG_REPLICA_DIR', '/tmp/replica')
PORTS = (8781, 8782)
CANDIDATES = ('/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,'
              'DISK_GB:10&limit=20')


def _script(*args):
    out = subprocess.run([SCRIPT, *args], check=True, capture_output=True,
                         text=True, timeout=600)
    return dict(line.split('=', 1) for line in out.stdout.splitlines()
                if '=' in line)


@pytest.fixture(scope='module')
def cluster():
    urls = _script('up')
    try:
        yield urls
    finally:
        _script('down')


@pytest.fixture
def db(cluster):
    with mock.patch.dict(os.environ,
                         {test_db.ENV_VAR: cluster['PRIMARY_URL']}):
        database = test_db.TestDatabase(migrate=True)
    try:
        yield database
    finally:
        database.drop()


def _replica_url(db):
    return sa.engine.make_url(db.url).set(
        port=int(os.environ.get('PG_STANDBY_PORT', 5434))).render_as_string(
            hide_password=False)


class Server(live_server.LiveServer):
    """gunicorn (2 workers) over an existing database, which outlives it."""

    def __init__(self, db, port, replica=False):
        conf = {'placement_database': {'max_retries': 1}}
        if replica:
            conf['placement_database']['slave_connection'] = _replica_url(db)
        super().__init__(workers=2, port=port, conf=conf)
        self._shared = db

    def start(self):
        with mock.patch.object(live_server.test_db, 'TestDatabase',
                               lambda migrate: self._shared):
            return super().start()

    def stop(self):
        self.db = None
        super().stop()


@pytest.fixture
def servers(db):
    with Server(db, PORTS[0]) as primary_only, \
            Server(db, PORTS[1], replica=True) as with_replica:
        yield primary_only, with_replica


# --- measuring --------------------------------------------------------------

_TICK = os.sysconf('SC_CLK_TCK')


def cluster_cpu(name):
    """CPU seconds the PostgreSQL server in BASE/name has used so far."""
    with open(os.path.join(BASE, name, 'postmaster.pid')) as f:
        pid = int(f.readline())
    total = 0
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    total += sum(int(x) for x in fields[11:15])   # utime stime cutime cstime
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def cpu_now():
    return {name: cluster_cpu(name) for name in ('primary', 'standby')}


# --- clients ----------------------------------------------------------------

class Client:
    """One thread's HTTP session and what it saw."""

    def __init__(self, server):
        self.url = server.url
        self.session = requests.Session()
        self.session.headers.update(server.headers(
            **{'content-type': 'application/json'}))
        self.codes = {}

    def call(self, method, path, **kwargs):
        resp = self.session.request(method, self.url + path, timeout=60,
                                    **kwargs)
        self.codes[resp.status_code] = self.codes.get(resp.status_code,
                                                      0) + 1
        return resp


def _claim_body(resources_by_rp):
    return {'allocations': {rp: {'resources': res}
                            for rp, res in resources_by_rp.items()},
            'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4()),
            'consumer_generation': None, 'consumer_type': 'INSTANCE'}


def claim(client, query, attempts=40, shuffle=True):
    """Claim the way a scheduler does: candidates (maybe from a lagging
    replica), then PUT one; on 409 the next candidate, and when the list
    is used up, candidates again. Returns (consumer, 409s seen)."""
    conflicts = 0
    consumer = str(uuid.uuid4())
    while attempts > 0:
        resp = client.call('GET', query)
        assert resp.status_code == 200, resp.text
        reqs = resp.json()['allocation_requests']
        if shuffle:
            random.shuffle(reqs)
        for areq in reqs:
            attempts -= 1
            resources = {rp: a['resources']
                         for rp, a in areq['allocations'].items()}
            put = client.call('PUT', '/allocations/%s' % consumer,
                              json=_claim_body(resources))
            if put.status_code == 204:
                return consumer, conflicts
            assert put.status_code == 409, put.text
            conflicts += 1
            if attempts <= 0:
                break
        time.sleep(0.05)
    raise AssertionError('claim failed after %d conflicts' % conflicts)


def make_world(server, count, vcpu=8, memory=16384, disk=500):
    client = Client(server)

    def one(i):
        rp = str(uuid.uuid4())
        resp = client.session.post(server.url + '/resource_providers',
                                   json={'name': 'cn%04d' % i, 'uuid': rp})
        assert resp.status_code == 200, resp.text
        resp = client.session.put(
            server.url + '/resource_providers/%s/inventories' % rp,
            json={'resource_provider_generation': 0, 'inventories': {
                'VCPU': {'total': vcpu},
                'MEMORY_MB': {'total': memory},
                'DISK_GB': {'total': disk}}})
        assert resp.status_code == 200, resp.text
        return rp

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(count)))


def wait_replayed(cluster):
    """Until the standby has replayed everything the primary wrote."""
    primary = sa.create_engine(cluster['PRIMARY_URL'])
    standby = sa.create_engine(cluster['REPLICA_URL'])
    try:
        with primary.connect() as conn:
            lsn = conn.execute(sa.text(
                'SELECT pg_current_wal_lsn()')).scalar()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with standby.connect() as conn:
                if conn.execute(sa.text(
                        'SELECT pg_last_wal_replay_lsn() >= :l'),
                        {'l': lsn}).scalar():
                    return
            time.sleep(0.1)
        raise AssertionError('standby did not catch up')
    finally:
        primary.dispose()
        standby.dispose()


def run_load(server, seconds, candidate_threads, claim_threads):
    """Candidate readers and claim-then-release writers for ``seconds``;
    (candidate requests, claims, codes seen)."""
    stop = threading.Event()
    clients = [Client(server) for _ in range(candidate_threads +
                                             claim_threads)]
    counts = {'candidates': 0, 'claims': 0, 'conflicts': 0}
    lock = threading.Lock()

    def reader(client):
        while not stop.is_set():
            resp = client.call('GET', CANDIDATES)
            assert resp.status_code == 200, resp.text
            with lock:
                counts['candidates'] += 1

    def writer(client):
        while not stop.is_set():
            consumer, conflicts = claim(client, CANDIDATES)
            resp = client.call('DELETE', '/allocations/%s' % consumer)
            assert resp.status_code == 204, resp.text
            with lock:
                counts['claims'] += 1
                counts['conflicts'] += conflicts

    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        futures = [pool.submit(reader, c)
                   for c in clients[:candidate_threads]]
        futures += [pool.submit(writer, c)
                    for c in clients[candidate_threads:]]
        time.sleep(seconds)
        stop.set()
        for f in futures:
            f.result()
    codes = {}
    for c in clients:
        for code, n in c.codes.items():
            codes[code] = codes.get(code, 0) + n
    return counts, codes


# --- the tests --------------------------------------------------------------

def test_candidates_move_to_the_standby(cluster, servers):
    """Same load, alternately on a server without and one with
    slave_connection: the primary's CPU per candidates request falls to
    near zero, the standby's takes it."""
    primary_only, with_replica = servers
    make_world(primary_only, 150)
    wait_replayed(cluster)
    results = {}
    for _round in range(2):
        for label, server in (('primary only', primary_only),
                              ('with replica', with_replica)):
            for kind, cand_t, claim_t in (('candidates', 3, 0),
                                          ('mixed', 3, 1)):
                before = cpu_now()
                counts, codes = run_load(server, 6, cand_t, claim_t)
                after = cpu_now()
                assert all(code < 500 for code in codes), codes
                acc = results.setdefault((label, kind), {
                    'primary': 0.0, 'standby': 0.0, 'candidates': 0,
                    'claims': 0, 'conflicts': 0})
                for name in ('primary', 'standby'):
                    acc[name] += after[name] - before[name]
                for key in ('candidates', 'claims', 'conflicts'):
                    acc[key] += counts[key]
    for (label, kind), r in sorted(results.items()):
        print('%-12s %-10s %5d candidates %4d claims (%d 409): '
              'primary %.2f s (%.2f ms/candidates req), standby %.2f s '
              '(%.2f ms/req)' % (
                  label, kind, r['candidates'], r['claims'], r['conflicts'],
                  r['primary'], 1000 * r['primary'] / r['candidates'],
                  r['standby'], 1000 * r['standby'] / r['candidates']))
    before = results[('primary only', 'candidates')]
    after = results[('with replica', 'candidates')]
    per_req_before = before['primary'] / before['candidates']
    per_req_after = after['primary'] / after['candidates']
    # Near zero: what is left is the primary's own background work
    # (WAL sender, checkpointer, statistics), not candidate queries. CPU
    # is counted in clock ticks (10 ms): a few of them over the run are
    # that background, whatever the requests.
    assert (per_req_after < 0.1 * per_req_before or
            after['primary'] <= 5.0 / _TICK), results
    assert after['standby'] > 5 * after['primary'], results
    # Mixed: the claims still write on the primary; the candidates the
    # claims are built from come from the standby. (Each process answers
    # candidates from its in-memory world, so what moves is the world's
    # refresh after every claim: the change counters, the log and the
    # providers written. The claims themselves stay the primary's.)
    mixed = results[('with replica', 'mixed')]
    mixed_before = results[('primary only', 'mixed')]
    assert mixed['claims'] > 0
    assert mixed['standby'] > 5 * max(mixed_before['standby'], 0.01), \
        results
    assert (mixed['primary'] / mixed['candidates'] <
            0.75 * mixed_before['primary'] / mixed_before['candidates']), \
        results


def _standby_sql(sql):
    """As the superuser (tools/pg-replica runs the servers as postgres
    when started by root, else as the caller)."""
    as_pg = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
    port = os.environ.get('PG_STANDBY_PORT', '5434')
    subprocess.run(
        as_pg + ['psql', '-X', '-q', '-h', os.path.join(BASE, 'sock'),
                 '-p', port, '-U', 'postgres', '-d', 'postgres', '-c', sql],
        check=True, capture_output=True)


def test_claims_from_a_lagging_standby_never_overcommit(cluster, servers):
    """The standby applies commits 1 s late: claims built from its
    answers hit providers already full; each such claim gets 409 and the
    client's next try succeeds; nothing is over capacity."""
    primary_only, with_replica = servers
    rps = make_world(primary_only, 8, vcpu=4)
    wait_replayed(cluster)
    _standby_sql("ALTER SYSTEM SET recovery_min_apply_delay = '1s'")
    _standby_sql('SELECT pg_reload_conf()')
    try:
        total = 8 * 4
        wanted = total - 1
        clients = [Client(with_replica) for _ in range(6)]
        done = []
        lock = threading.Lock()

        def work(client):
            while True:
                with lock:
                    if len(done) >= wanted:
                        return
                    done.append(None)
                consumer, conflicts = claim(
                    client, '/allocation_candidates?resources=VCPU:1')
                with lock:
                    done[done.index(None)] = (consumer, conflicts)

        with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
            for f in [pool.submit(work, c) for c in clients]:
                f.result()
    finally:
        _standby_sql('ALTER SYSTEM RESET recovery_min_apply_delay')
        _standby_sql('SELECT pg_reload_conf()')
    conflicts = sum(c for _consumer, c in done)
    codes = {}
    for c in clients:
        for code, n in c.codes.items():
            codes[code] = codes.get(code, 0) + n
    print('lagging standby: %d claims, %d answered 409 first and then '
          'succeeded on a retry; codes %s' % (len(done), conflicts, codes))
    assert all(code in (200, 204, 409) for code in codes), codes
    # The lag was seen: some claims were built from a stale answer.
    assert conflicts > 0
    used = 0
    client = Client(primary_only)
    for rp in rps:
        usage = client.call(
            'GET', '/resource_providers/%s/usages' % rp).json()['usages']
        assert usage.get('VCPU', 0) <= 4, (rp, usage)
        used += usage.get('VCPU', 0)
    assert used == wanted


def test_standby_down_reads_fall_back(cluster, servers):
    """The standby stops under load and comes back: no 5xx, no request
    waits long; afterwards candidates are read from the standby again."""
    _primary_only, with_replica = servers
    make_world(with_replica, 30)
    wait_replayed(cluster)
    stop = threading.Event()
    slowest = [0.0]
    results = {}

    def load():
        results['load'] = run_load_until(with_replica, stop, slowest)

    thread = threading.Thread(target=load)
    thread.start()
    try:
        time.sleep(2)
        _script('stop-standby')
        stopped = time.monotonic()
        time.sleep(5)
        _script('start-standby')
        restarted = time.monotonic()
        time.sleep(2)
    finally:
        stop.set()
        thread.join()
    counts, codes = results['load']
    print('standby down %.1f s under load: %s requests by status, %d '
          'candidates, %d claims; slowest request %.2f s' % (
              restarted - stopped, codes, counts['candidates'],
              counts['claims'], slowest[0]))
    assert all(code < 500 for code in codes), codes
    assert counts['candidates'] > 0 and counts['claims'] > 0
    # The standby's loss was seen, and answered by the primary.
    assert 'reading from the primary' in with_replica.log_text()
    # No long TCP waits: refused connections fail at once.
    assert slowest[0] < 5, slowest
    # Back on the standby once the pause after the failure is over.
    time.sleep(11)
    before = cpu_now()
    counts, codes = run_load(with_replica, 3, 2, 0)
    after = cpu_now()
    assert all(code == 200 for code in codes), codes
    primary = after['primary'] - before['primary']
    standby = after['standby'] - before['standby']
    print('after recovery: %d candidates, primary %.2f s, standby %.2f s' % (
        counts['candidates'], primary, standby))
    assert standby > primary


def run_load_until(server, stop, slowest):
    """run_load, until ``stop`` is set, keeping the slowest request."""
    clients = [Client(server) for _ in range(3)]
    counts = {'candidates': 0, 'claims': 0}
    lock = threading.Lock()

    def timed(client, method, path, **kwargs):
        start = time.monotonic()
        resp = client.call(method, path, **kwargs)
        with lock:
            slowest[0] = max(slowest[0], time.monotonic() - start)
        return resp

    def reader(client):
        while not stop.is_set():
            resp = timed(client, 'GET', CANDIDATES)
            assert resp.status_code == 200, resp.text
            with lock:
                counts['candidates'] += 1

    def writer(client):
        while not stop.is_set():
            resp = timed(client, 'GET', CANDIDATES)
            assert resp.status_code == 200, resp.text
            areq = resp.json()['allocation_requests'][0]
            consumer = str(uuid.uuid4())
            resp = timed(client, 'PUT', '/allocations/%s' % consumer,
                         json=_claim_body({
                             rp: a['resources'] for rp, a in
                             areq['allocations'].items()}))
            assert resp.status_code in (204, 409), resp.text
            if resp.status_code == 204:
                resp = timed(client, 'DELETE', '/allocations/%s' % consumer)
                assert resp.status_code == 204, resp.text
                with lock:
                    counts['claims'] += 1

    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        futures = [pool.submit(reader, c) for c in clients[:2]]
        futures.append(pool.submit(writer, clients[2]))
        for f in futures:
            f.result()
    codes = {}
    for c in clients:
        for code, n in c.codes.items():
            codes[code] = codes.get(code, 0) + n
    return counts, codes
