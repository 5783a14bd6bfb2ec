"""The database goes away under load and comes back.

A private PostgreSQL (``pg_server.TempPostgres``) backs a 4-worker gunicorn
placement; client threads claim, release and resize while the test
SIGKILLs the database, waits, and restarts it. Pinned:

* no 5xx other than 503, and every request that runs entirely inside the
  outage gets 503 with upstream's JSON error body, quickly (no hang);
* once the database accepts connections again, placement answers within a
  second, without a restart;
* afterwards the stored state is what the successful writes made it (a
  write answered 503 may or may not have landed, but never half of it):
  allocations of a claim are all there or none, usages equal the sum of
  the allocations, inventories are each one whole write.

Runs on every suite run (it needs no PLACEMENT_TEST_DB_URL); skipped only
when the PostgreSQL server binaries are absent, which tools/start-test-dbs
(and so .ci/run) installs.
"""
import random
import threading
import time
import uuid

import pytest
import requests

from placement.db import api as db_api
from placement.tests import db as test_db
from placement.tests.functional import live_server
from placement.tests.functional import pg_server

pytestmark = pytest.mark.skipif(
    pg_server.find_bindir() is None,
    reason='PostgreSQL server binaries (initdb, postgres) are not installed; '
           'tools/start-test-dbs installs them')

THREADS = 8
WORKERS = 4
WARM_SECONDS = 1.5
OUTAGE_SECONDS = 2.5
AFTER_SECONDS = 2.5
RECOVERY_BOUND = 1.0
CLAIM = {'VCPU': 1, 'MEMORY_MB': 128}
SHARED_CLAIM = {'DISK_GB': 2}
RATIO = 1000  # MEMORY_MB total is always RATIO * VCPU total


def _inventories(vcpu, generation):
    return {'resource_provider_generation': generation,
            'inventories': {
                'VCPU': {'total': vcpu},
                'MEMORY_MB': {'total': vcpu * RATIO},
                'DISK_GB': {'total': 100000}}}


class Recorder:
    """Every request's outcome, with its start and end on one clock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []

    def call(self, session, method, url, **kwargs):
        start = time.monotonic()
        try:
            resp = session.request(method, url, timeout=30, **kwargs)
            status, body = resp.status_code, resp.text
        except requests.RequestException as exc:
            status, body = None, repr(exc)
        end = time.monotonic()
        with self.lock:
            self.calls.append((start, end, method, url, status, body))
        return status, body


class Client(threading.Thread):
    """One client's mixed writes over the two providers it owns."""

    def __init__(self, server, recorder, stop, seed):
        super().__init__(daemon=True)
        self.server = server
        self.rec = recorder
        self.stop_event = stop
        self.rand = random.Random(seed)
        self.session = requests.Session()
        self.session.headers.update(server.headers())
        self.rp_a = str(uuid.uuid4())
        self.rp_b = str(uuid.uuid4())
        self.vcpu = 1000
        self.generation = None
        # consumer -> list of (op, status) in order
        self.consumers = {}
        self.inventory_writes = []  # (vcpu, status)
        self.new_providers = []  # (uuid, name, status)

    def _url(self, path):
        return self.server.url + path

    def setup(self):
        for rp in (self.rp_a, self.rp_b):
            status, body = self.rec.call(
                self.session, 'POST', self._url('/resource_providers'),
                json={'uuid': rp, 'name': 'outage-' + rp})
            assert status == 200, body
            status, body = self.rec.call(
                self.session, 'PUT',
                self._url('/resource_providers/%s/inventories' % rp),
                json=_inventories(1000, 0))
            assert status == 200, body
        self.generation = 1

    def claim(self):
        consumer = str(uuid.uuid4())
        status, _ = self.rec.call(
            self.session, 'PUT', self._url('/allocations/' + consumer),
            json={'allocations': {self.rp_a: {'resources': CLAIM},
                                  self.rp_b: {'resources': SHARED_CLAIM}},
                  'project_id': str(uuid.uuid4()),
                  'user_id': str(uuid.uuid4()),
                  'consumer_generation': None,
                  'consumer_type': 'INSTANCE'})
        self.consumers[consumer] = [('claim', status)]

    def release(self):
        held = [c for c, ops in self.consumers.items()
                if ops[-1] == ('claim', 204)]
        if not held:
            return self.claim()
        consumer = self.rand.choice(held)
        status, _ = self.rec.call(
            self.session, 'DELETE', self._url('/allocations/' + consumer))
        self.consumers[consumer].append(('release', status))

    def resize(self):
        status, body = self.rec.call(
            self.session, 'GET',
            self._url('/resource_providers/%s' % self.rp_a))
        if status != 200:
            return
        generation = requests.models.complexjson.loads(body)['generation']
        vcpu = self.vcpu + 1
        status, _ = self.rec.call(
            self.session, 'PUT',
            self._url('/resource_providers/%s/inventories' % self.rp_a),
            json=_inventories(vcpu, generation))
        self.inventory_writes.append((vcpu, status))
        self.vcpu = vcpu

    def new_provider(self):
        rp = str(uuid.uuid4())
        status, _ = self.rec.call(
            self.session, 'POST', self._url('/resource_providers'),
            json={'uuid': rp, 'name': 'new-' + rp})
        self.new_providers.append((rp, status))

    def read(self):
        self.rec.call(self.session, 'GET', self._url(
            '/resource_providers/%s/usages' % self.rp_a))

    def candidates(self):
        # A flat world: the one-statement path, whose pooled connection is
        # not pinged before use (a lost one is tried again).
        self.rec.call(self.session, 'GET', self._url(
            '/allocation_candidates?resources=VCPU:1,MEMORY_MB:128'))

    def run(self):
        ops = [self.claim] * 4 + [self.release] * 2 + [
            self.resize, self.new_provider, self.read, self.candidates]
        while not self.stop_event.is_set():
            self.rand.choice(ops)()


def _get(session, url):
    resp = session.get(url, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _check_consistency(server, clients):
    session = requests.Session()
    session.headers.update(server.headers())
    for client in clients:
        held = {'a': 0, 'b': 0}
        for consumer, ops in client.consumers.items():
            got = _get(session, server.url + '/allocations/' + consumer)
            allocs = {rp: a['resources']
                      for rp, a in got['allocations'].items()}
            whole = {client.rp_a: CLAIM, client.rp_b: SHARED_CLAIM}
            assert allocs in ({}, whole), (
                'half-applied claim %s: %s' % (consumer, allocs))
            statuses = [s for _op, s in ops]
            if all(s in (200, 204) for s in statuses):
                # Only acknowledged writes: their result must be exact.
                expect = whole if ops[-1][0] == 'claim' else {}
                assert allocs == expect, (consumer, ops, allocs)
            elif ops[0][1] not in (200, 204, 503, None):
                assert allocs == {}, (consumer, ops, allocs)
            if allocs:
                held['a'] += 1
                held['b'] += 1
        usages_a = _get(session, server.url + '/resource_providers/%s/usages'
                        % client.rp_a)['usages']
        usages_b = _get(session, server.url + '/resource_providers/%s/usages'
                        % client.rp_b)['usages']
        assert usages_a.get('VCPU', 0) == held['a'] * CLAIM['VCPU']
        assert usages_a.get('MEMORY_MB', 0) == (
            held['a'] * CLAIM['MEMORY_MB'])
        assert usages_b.get('DISK_GB', 0) == (
            held['b'] * SHARED_CLAIM['DISK_GB'])
        inv = _get(session, server.url + '/resource_providers/%s/inventories'
                   % client.rp_a)['inventories']
        vcpu = inv['VCPU']['total']
        assert inv['MEMORY_MB']['total'] == vcpu * RATIO, (
            'half-applied inventory write: %s' % inv)
        acked = [v for v, s in client.inventory_writes if s == 200]
        tried = [v for v, s in client.inventory_writes
                 if s in (200, 503, None)]
        assert vcpu >= max(acked, default=1000)
        assert vcpu <= max(tried, default=1000)
        for rp, status in client.new_providers:
            resp = session.get(server.url + '/resource_providers/' + rp,
                               timeout=30)
            if status == 200:
                assert resp.status_code == 200, (rp, resp.text)
            elif status not in (503, None):
                assert resp.status_code == 404, (rp, status, resp.text)


def test_database_outage_is_503_then_recovers_consistently(monkeypatch):
    with pg_server.TempPostgres() as pg:
        monkeypatch.setenv(test_db.ENV_VAR, pg.url)
        with live_server.LiveServer(workers=WORKERS) as server:
            recorder = Recorder()
            stop = threading.Event()
            clients = [Client(server, recorder, stop, seed)
                       for seed in range(THREADS)]
            for client in clients:
                client.setup()
            for client in clients:
                client.start()
            time.sleep(WARM_SECONDS)
            t_kill = time.monotonic()
            pg.kill()
            t_down = time.monotonic()
            time.sleep(OUTAGE_SECONDS)
            t_restart = time.monotonic()
            pg.start()
            t_up = time.monotonic()
            time.sleep(AFTER_SECONDS)
            stop.set()
            for client in clients:
                client.join(timeout=60)
            calls = sorted(recorder.calls)
            log = server.log_text()

            # 1. Nothing but 503 among 5xx; no dropped connections.
            bad = [c for c in calls if c[4] is None
                   or (c[4] >= 500 and c[4] != 503)]
            at = log.find('Unhandled error')
            if bad:
                with open('/tmp/placement-outage-server.log', 'w') as f:
                    f.write(log)
            assert not bad, (bad[:5], 'server log: '
                             '/tmp/placement-outage-server.log',
                             log[at:at + 6000] if at >= 0 else log[-3000:])

            # 2. Entirely inside the outage: 503 in JSON, and fast.
            inside = [c for c in calls if c[0] >= t_down and c[1] <= t_restart]
            assert len(inside) > 20, len(inside)
            for start, end, method, url, status, body in inside:
                assert status == 503, (method, url, status, body)
                assert 'placement database is unavailable' in body, body
                assert '"status": 503' in body, body
            slowest = max(end - start for start, end, *_ in inside)
            assert slowest < db_api.CONNECT_TIMEOUT, slowest

            # 3. Back within a second of the database.
            after = [c for c in calls if c[0] >= t_up]
            first_ok = min((c[1] for c in after if c[4] < 500), default=None)
            assert first_ok is not None, after[:5]
            assert first_ok - t_up < RECOVERY_BOUND, first_ok - t_up
            late_503 = [c for c in after
                        if c[0] >= t_up + RECOVERY_BOUND and c[4] == 503]
            assert not late_503, late_503[:5]

            # 4. Stored state equals what the successful writes made it.
            _check_consistency(server, clients)

            ok = sum(1 for c in calls if c[4] < 500)
            print('outage: %d requests, %d ok, %d answered 503 inside the '
                  'outage (slowest %.3fs); kill took %.3fs, restart %.3fs; '
                  'first success %.3fs after the database was back'
                  % (len(calls), ok, len(inside), slowest, t_down - t_kill,
                     t_up - t_restart, first_ok - t_up))
