"""Write a ``candidate_worlds.WorldBuilder`` world through the REST API.

``WorldBuilder.write`` inserts rows with SQL, which is quick but proves
nothing about the API a deployer's agents use. Benchmarks that must build
their worlds the way nova does (one provider at a time: create, then
inventories, traits and aggregates) come through here. The API has no
batch call for creating providers or setting traits and aggregates, so
the speed comes from many concurrent clients, each keeping its HTTP
connection alive; inventories go in POST /reshaper batches.
"""
import collections
import concurrent.futures
import http.client
import json
import threading
import time
import uuid as uuidlib

VERSION = '1.39'


class ApiError(RuntimeError):
    """A write the world needs was refused."""


class Client:
    """A placement endpoint; one keep-alive connection per thread."""

    def __init__(self, port, host='127.0.0.1', version=VERSION,
                 timeout=600):
        self.host, self.port = host, port
        self.version = version
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self.requests = 0

    def _conn(self, fresh=False):
        conn = getattr(self._local, 'conn', None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            conn = self._local.conn = http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout)
        return conn

    def call(self, method, path, body=None, expect=(200, 201, 204),
             headers=None):
        """(status, raw body); raises ApiError on a status not expected.
        A connection the server closed (gunicorn's keep-alive limit) is
        reopened once."""
        headers = dict(headers or {}, **{
            'x-auth-token': 'admin', 'accept': 'application/json',
            'openstack-api-version': 'placement %s' % self.version})
        data = None
        if body is not None:
            headers['content-type'] = 'application/json'
            data = json.dumps(body)
        for attempt in (0, 1):
            conn = self._conn(fresh=attempt > 0)
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.HTTPException, ConnectionError):
                if attempt:
                    raise
        with self._lock:
            self.requests += 1
        if expect and resp.status not in expect:
            raise ApiError('%s %s answered %d: %s' % (
                method, path, resp.status, raw[:500]))
        return resp.status, raw


def _inventory(row):
    return {k: row[k] for k in ('total', 'reserved', 'min_unit', 'max_unit',
                                'step_size', 'allocation_ratio')}


def load(world, client, threads=16, batch=100):
    """Write ``world`` through ``client``; (seconds, requests) taken.

    Custom resource classes and traits first; then, by ``threads``
    concurrent clients: each provider tree (POST, parents first); the
    inventories in POST /reshaper calls of ``batch`` providers each (the
    one call of the API that writes many providers' inventories; 0 means
    a PUT per provider); each provider's traits and aggregates; last the
    usages, each as one new consumer."""
    start = time.perf_counter()
    before = client.requests
    inv = collections.defaultdict(dict)
    for row in world.inv:
        inv[row['resource_provider_id']][row['resource_class']] = (
            _inventory(row))
    traits = collections.defaultdict(list)
    for rp_id, name in world.rpt:
        traits[rp_id].append(name)
    aggs = collections.defaultdict(list)
    for rp_id, agg in world.rpa:
        aggs[rp_id].append(agg)
    usages = collections.defaultdict(list)
    for rp_id, rc, used in world.alloc:
        usages[rp_id].append((rc, used))
    for rc in sorted({r['resource_class'] for r in world.inv
                      if r['resource_class'].startswith('CUSTOM_')}):
        client.call('PUT', '/resource_classes/%s' % rc)
    for name in sorted({t for _, t in world.rpt if t.startswith('CUSTOM_')}):
        client.call('PUT', '/traits/%s' % name)

    by_id = {row['id']: row for row in world.rps}
    trees = collections.defaultdict(list)
    for row in world.rps:    # parents are built before their children
        trees[row['root_provider_id']].append(row)

    def create_tree(rows):
        for row in rows:
            body = {'uuid': row['uuid'], 'name': row['name']}
            if row['parent_provider_id'] is not None:
                body['parent_provider_uuid'] = (
                    by_id[row['parent_provider_id']]['uuid'])
            client.call('POST', '/resource_providers', body)

    def reshape(rows):
        client.call('POST', '/reshaper', {'allocations': {}, 'inventories': {
            row['uuid']: {'resource_provider_generation': 0,
                          'inventories': inv[row['id']]} for row in rows}},
            headers={'x-roles': 'admin,service'})   # a service's call

    def put_inventories(rows):
        for row in rows:
            client.call('PUT', '/resource_providers/%s/inventories'
                        % row['uuid'], {'resource_provider_generation': 0,
                                        'inventories': inv[row['id']]})

    def links(row):
        rp = row['uuid']
        # The reshaper writes an interim and a final inventory (as
        # upstream's does): two generations.
        gen = (2 if batch else 1) if inv.get(row['id']) else 0
        base = '/resource_providers/%s' % rp
        if traits.get(row['id']):
            client.call('PUT', base + '/traits', {
                'resource_provider_generation': gen,
                'traits': sorted(set(traits[row['id']]))})
            gen += 1
        if aggs.get(row['id']):
            client.call('PUT', base + '/aggregates', {
                'resource_provider_generation': gen,
                'aggregates': sorted(set(aggs[row['id']]))})
        for rc, used in usages.get(row['id'], ()):
            client.call('PUT', '/allocations/%s' % uuidlib.uuid4(), {
                'allocations': {rp: {'resources': {rc: used}}},
                'project_id': str(uuidlib.uuid4()),
                'user_id': str(uuidlib.uuid4()),
                'consumer_generation': None,
                'consumer_type': 'INSTANCE'})

    with_inv = [row for row in world.rps if inv.get(row['id'])]
    size = batch or 1
    chunks = [with_inv[i:i + size] for i in range(0, len(with_inv), size)]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for step, items in ((create_tree, trees.values()),
                            (reshape if batch else put_inventories, chunks),
                            (links, world.rps)):
            for _ in pool.map(step, items):
                pass
    return time.perf_counter() - start, client.requests - before
