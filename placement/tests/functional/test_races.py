"""Races between every kind of allocation write, on a multi-worker server.

Extends test_concurrency (one kind of write) to the mix clients make: 40
client threads against 4 gunicorn workers send at least 2,000 writes:

* claims for new consumers, on one provider or spread over two;
* POST /allocations batches of new consumers (all or nothing);
* consumer-generation updates of a few *shared* consumers that every
  thread rewrites (read generation, write with it);
* deletes of a thread's own earlier consumers.

Providers have room for only part of what is asked. Asserted afterwards,
over HTTP: no 5xx and nothing but 204 or 409; no provider over capacity;
the stored allocations are exactly what the acknowledged writes leave
(private consumers: their thread's last acknowledged write; batches: all
or none; shared consumers: the acknowledged write with the highest base
generation, each base generation acknowledged at most once, and the
stored generation one past it).

On SQLite (which serialises writers) the run is smaller; CI runs the full
one on PostgreSQL and MariaDB via PLACEMENT_TEST_DB_URL.
"""
import collections
import http.client
import json
import random
import threading
import time
import urllib.parse
import uuid

import pytest

from placement.tests import db as test_db
from placement.tests.functional import live_server

requests = pytest.importorskip('requests')

if test_db.backend() == 'sqlite':
    WORKERS, THREADS, WRITES = 2, 10, 400
else:
    WORKERS, THREADS, WRITES = 4, 40, 2000
PROVIDERS = 6
VCPU_TOTAL = 40
SHARED = 6
VERSION = '1.38'


class Model:
    """What acknowledged writes say the database should hold."""

    def __init__(self):
        self.lock = threading.Lock()
        self.private = {}        # consumer -> allocs ({} when deleted)
        self.shared = collections.defaultdict(list)  # c -> [(gen, allocs)]
        self.statuses = collections.Counter()
        self.bad = []
        self.writes = 0

    def record(self, kind, status, text):
        with self.lock:
            self.writes += 1
            self.statuses[(kind, status)] += 1
            if status not in (204, 409):
                self.bad.append((kind, status, text[:500]))


def _body(allocs, project, user, generation):
    return {'allocations': {rp: {'resources': res}
                            for rp, res in allocs.items()},
            'project_id': project, 'user_id': user,
            'consumer_generation': generation,
            'consumer_type': 'INSTANCE'}


class Response:
    """What the race looks at in an answer."""

    def __init__(self, status_code, text):
        self.status_code = status_code
        self.text = text

    def json(self):
        return json.loads(self.text)


class Http:
    """A thin HTTP/1.1 client over http.client, for the racing threads.

    The 40 threads share the CPUs with the servers they race (two in
    tools/bench-writes): ``requests`` spends about a millisecond of CPU
    per call on sessions, hooks and adapters, which is CPU the servers
    then lack, for ours and upstream's alike. The connection is opened
    again when the server closed it (gunicorn's sync workers close every
    one)."""

    def __init__(self, url, headers, timeout=120):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.prefix = parts.path.rstrip('/')
        self.headers = dict(headers)
        self.timeout = timeout
        self.conn = None

    def _send(self, method, path, body, headers):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout)
        self.conn.request(method, self.prefix + path, body=body,
                          headers=headers)
        resp = self.conn.getresponse()
        text = resp.read().decode('utf-8')
        if resp.will_close:
            self.conn.close()
            self.conn = None
        return Response(resp.status, text)

    def request(self, method, path, json_body=None):
        headers = self.headers
        body = None
        if json_body is not None:
            headers = dict(headers, **{'content-type': 'application/json'})
            body = json.dumps(json_body).encode('utf-8')
        reused = self.conn is not None
        try:
            return self._send(method, path, body, headers)
        except (http.client.RemoteDisconnected, ConnectionResetError,
                BrokenPipeError):
            self.conn.close()
            self.conn = None
            if not reused:
                raise
            # A kept-alive connection the server closed while idle: the
            # request never reached it; send it again on a new one.
            return self._send(method, path, body, headers)

    def get(self, path):
        return self.request('GET', path)

    def put(self, path, json):
        return self.request('PUT', path, json)

    def post(self, path, json):
        return self.request('POST', path, json)

    def delete(self, path):
        return self.request('DELETE', path)


class Client(threading.Thread):

    def __init__(self, server, providers, shared, model, seed, quota):
        super().__init__(daemon=True)
        self.session = Http(server.url, server.headers(version=VERSION))
        self.providers = providers
        self.shared = shared
        self.model = model
        self.rand = random.Random(seed)
        self.quota = quota
        self.mine = {}           # consumer -> allocs it holds (acked)
        self.project = str(uuid.uuid4())
        self.user = str(uuid.uuid4())

    def allocs(self):
        first, second = self.rand.sample(self.providers, 2)
        if self.rand.random() < 0.4:
            return {first: {'VCPU': 1, 'MEMORY_MB': 64},
                    second: {'VCPU': 1}}
        return {first: {'VCPU': self.rand.choice([1, 2, 3]),
                        'MEMORY_MB': 128}}

    def claim(self):
        consumer, allocs = str(uuid.uuid4()), self.allocs()
        resp = self.session.put(
            '/allocations/' + consumer,
            json=_body(allocs, self.project, self.user, None))
        self.model.record('claim', resp.status_code, resp.text)
        if resp.status_code == 204:
            self.mine[consumer] = allocs
        with self.model.lock:
            self.model.private[consumer] = (
                allocs if resp.status_code == 204 else {})

    def batch(self):
        batch = {str(uuid.uuid4()): self.allocs()
                 for _ in range(self.rand.choice([2, 3]))}
        resp = self.session.post(
            '/allocations',
            json={c: _body(a, self.project, self.user, None)
                  for c, a in batch.items()})
        self.model.record('batch', resp.status_code, resp.text)
        with self.model.lock:
            for consumer, allocs in batch.items():
                ok = resp.status_code == 204
                self.model.private[consumer] = allocs if ok else {}
                if ok:
                    self.mine[consumer] = allocs

    def update_shared(self):
        consumer = self.rand.choice(self.shared)
        current = self.session.get('/allocations/' + consumer)
        if current.status_code != 200:
            self.model.record('shared-read', current.status_code,
                              current.text)
            return
        generation = current.json()['consumer_generation']
        allocs = self.allocs()
        resp = self.session.put(
            '/allocations/' + consumer,
            json=_body(allocs, self.project, self.user, generation))
        self.model.record('shared', resp.status_code, resp.text)
        if resp.status_code == 204:
            with self.model.lock:
                self.model.shared[consumer].append((generation, allocs))

    def delete(self):
        if not self.mine:
            return self.claim()
        consumer = self.rand.choice(sorted(self.mine))
        resp = self.session.delete('/allocations/' + consumer)
        self.model.record('delete', resp.status_code, resp.text)
        if resp.status_code == 204:
            del self.mine[consumer]
            with self.model.lock:
                self.model.private[consumer] = {}

    def run(self):
        ops = ([self.claim] * 4 + [self.batch] * 2 + [self.update_shared] * 3
               + [self.delete] * 2)
        for _ in range(self.quota):
            self.rand.choice(ops)()


def _check(resp, *codes):
    assert resp.status_code in codes, (resp.status_code, resp.text)
    return resp


def build_world(url, session):
    """Providers with room for only part of what the clients ask, and the
    shared consumers (one VCPU each); (providers, shared)."""
    providers = []
    for i in range(PROVIDERS):
        rp = str(uuid.uuid4())
        _check(session.post(url + '/resource_providers', json={
            'uuid': rp, 'name': 'race-%d-%s' % (i, rp[:8])}), 200)
        _check(session.put(url + '/resource_providers/%s/inventories'
                           % rp, json={
            'resource_provider_generation': 0,
            'inventories': {'VCPU': {'total': VCPU_TOTAL},
                            'MEMORY_MB': {'total': 1000000}}}), 200)
        providers.append(rp)
    shared = []
    owner = (str(uuid.uuid4()), str(uuid.uuid4()))
    for i in range(SHARED):
        consumer = str(uuid.uuid4())
        _check(session.put(url + '/allocations/' + consumer, json=_body(
            {providers[i % PROVIDERS]: {'VCPU': 1}}, owner[0], owner[1],
            None)), 204)
        shared.append(consumer)
    return providers, shared


def race(server, threads=THREADS, writes=WRITES):
    """Run the client mix against ``server`` (anything with ``url`` and
    ``headers()``); (model, seconds the clients took). Also what
    tools/bench-writes times, against ours and upstream alike."""
    session = requests.Session()
    session.headers.update(server.headers(version=VERSION))
    providers, shared = build_world(server.url, session)
    model = Model()
    model.providers, model.shared_consumers = providers, shared
    quota = -(-writes // threads)
    clients = [Client(server, providers, shared, model, seed, quota)
               for seed in range(threads)]
    start = time.monotonic()
    for client in clients:
        client.start()
    for client in clients:
        client.join(timeout=900)
    elapsed = time.monotonic() - start
    assert not any(c.is_alive() for c in clients)
    return model, elapsed


def violations(server, model):
    """What the database holds that the acknowledged writes do not
    explain: a list of messages (empty when all is well). Over capacity,
    lost or phantom allocations, a generation acknowledged twice."""
    session = requests.Session()
    session.headers.update(server.headers(version=VERSION))
    url, providers = server.url, model.providers
    shared = model.shared_consumers
    found = []
    expected = {c: a for c, a in model.private.items() if a}
    for consumer in shared:
        wins = model.shared[consumer]
        gens = [g for g, _a in wins]
        if len(gens) != len(set(gens)):
            found.append('two writes acknowledged on one generation: %s %s'
                         % (consumer, gens))
        body = _check(session.get(url + '/allocations/' + consumer),
                      200).json()
        if wins:
            gen, allocs = max(wins, key=lambda w: w[0])
            if body['consumer_generation'] != gen + 1:
                found.append('consumer %s at generation %s, not %s' % (
                    consumer, body['consumer_generation'], gen + 1))
            expected[consumer] = allocs
        else:
            if body['consumer_generation'] != 1:
                found.append('untouched consumer %s at generation %s' % (
                    consumer, body['consumer_generation']))
            expected[consumer] = {providers[shared.index(consumer)
                                            % PROVIDERS]: {'VCPU': 1}}
    stored = {}
    for rp in providers:
        body = _check(session.get(
            url + '/resource_providers/%s/allocations' % rp), 200).json()
        used = collections.Counter()
        for consumer, alloc in body['allocations'].items():
            used.update(alloc['resources'])
            stored.setdefault(consumer, {})[rp] = alloc['resources']
        if used['VCPU'] > VCPU_TOTAL:
            found.append('over capacity: %s %s' % (rp, dict(used)))
        usages = _check(session.get(
            url + '/resource_providers/%s/usages' % rp), 200).json()
        if usages['usages'].get('VCPU', 0) != used['VCPU']:
            found.append('usages of %s disagree with its allocations' % rp)
    missing = {c: a for c, a in expected.items() if stored.get(c) != a}
    extra = {c: a for c, a in stored.items() if c not in expected}
    if missing or extra:
        found.append('stored state differs from the acknowledged writes: '
                     'missing %s, extra %s' % (list(missing.items())[:3],
                                              list(extra.items())[:3]))
    return found


def test_mixed_allocation_writers_race_safely():
    with live_server.LiveServer(workers=WORKERS) as server:
        model, elapsed = race(server)
        assert not model.bad, 'unexpected answers %s\n%s' % (
            model.bad[:5], server.log_text()[-3000:])
        assert model.writes >= WRITES
        acked = sum(n for (kind, status), n in model.statuses.items()
                    if status == 204)
        refused = sum(n for (kind, status), n in model.statuses.items()
                      if status == 409)
        assert acked and refused, model.statuses
        found = violations(server, model)
        assert not found, found
        print('races: %d writes from %d threads on %d workers in %.1f s '
              '(%.0f writes/s); %s'
              % (model.writes, THREADS, WORKERS, elapsed,
                 model.writes / elapsed, dict(model.statuses)))
