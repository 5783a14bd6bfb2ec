"""A seeded generator of hostile requests for every route, and its runner.

``run(server, count, seed)`` builds a small world through the API (a
provider tree, inventories, custom classes and traits, aggregates,
allocations), snapshots every table, sends ``count`` hostile requests
spread over every (URL, method) of ``placement.handler.ROUTES`` plus
unknown methods, and snapshots again. The test (``test_fuzz.py``) and
``tools/fuzz`` (the full 100,000) assert: no 5xx, no write accepted, every
table unchanged.

Every request that could write carries at least one element that makes it
invalid whatever the schemas say: a NUL or undecodable byte in the path or
query, a body no JSON parser or database takes (NaN, NUL, lone surrogate,
nesting 40+ deep, truncation, over the size limit), a wrong content type,
an unknown method, a bad microversion; or, for field-level poisons (wrong
types, out-of-range numbers, overlong names, non-objects), a stale
generation or duplicate uuid so an accepted poison still cannot land.
Reads get the same poisons plus query-string abuse (thousands of ``in:``
members, repeated keys, garbage resource strings).
"""
import collections
import concurrent.futures
import json
import random
import threading
import time
import urllib.parse
import uuid

import requests
import sqlalchemy as sa

from placement.db import models
from placement import handler

LATEST = 'placement latest'
# Writes whose only input is the URL.
NO_BODY = {('/resource_classes/{name}', 'PUT'), ('/traits/{name}', 'PUT')}
UNKNOWN_METHODS = ['PATCH', 'FROB', 'TRACE', 'OPTIONS', 'HEAD', 'CONNECT',
                   'PROPFIND', 'M-SEARCH']

# --- poisons -----------------------------------------------------------

# Path segments: the first two are refused before dispatch; the rest must
# be a clean 400/404 from the handlers.
PATH_PREDISPATCH = ['%00', 'a%00b', '%ff%fe', 'CUSTOM_%c3%28', '%ed%a0%80',
                    '%f4%90%80%80']
PATH_GARBAGE = ['not-a-uuid', 'x' * 300, 'CUSTOM_lower', '%20', 'CUSTOM_',
                '..', '%2e%2e', "1'%20OR%20'1'='1", 'CUSTOM_%C3%89',
                '%F0%9F%98%80', '00000000-0000-0000-0000-000000000000',
                '-1', 'VCPU', 'HW_CPU_X86_AVX', 'CUSTOM_' + 'A' * 300,
                'a' * 5000, '%5Cx00', '%25ff']
QUERY_PREDISPATCH = ['%00', 'x%00', '%ff', '%fe%ff', '%ed%a0%80', '%c0%af']
BAD_VERSIONS = ['placement 1.40', 'placement 2.0', 'placement 1.999',
                'placement foo', 'placement 1.', 'placement -1.0',
                'placement 1.0.1', 'placement 99999999999999999999.1']

NUMBER_POISONS = [-1, -2 ** 31, 2 ** 31, 2 ** 63, 2 ** 64, -2 ** 63 - 1,
                  1e308, 1.5, '1', '', True, None, [], {}, [1], 10 ** 30]
# Invalid in every string field (names, uuids, ids): too long, empty,
# unstorable, or not a string.
# ('' is a valid provider name, so it is no poison.)
STRING_POISONS = ['x' * 256, 'x' * 5000, 'a\x00b', '\ud800',
                  'x\udfff', 1, None, True, [], {}, ['a'], 2 ** 63,
                  '\U0001F600' * 256]
# JSON texts refused by any parser or by extract_json's storage checks.
RAW_POISONS = ['NaN', 'Infinity', '-Infinity', '1e999', '-1e999',
               '"a\\u0000b"', '"\\ud800"', '"\\udfff\\ud800"',
               '"x\\u0000"', str(2 ** 63), str(-2 ** 63 - 1), str(2 ** 100),
               '[' * 40 + ']' * 40, '{"a":' * 40 + '1' + '}' * 40,
               '[' * 3000 + ']' * 3000, '1' + '0' * 5000]


def _q(value):
    return urllib.parse.quote(value, safe='')


class World:
    """What exists before the fuzz: names and uuids requests refer to."""

    def __init__(self):
        self.providers = []   # uuids; [0] root, [1] child, [2] sharing
        self.generations = {}
        self.names = {}
        self.consumers = []
        self.aggregates = []
        self.custom_classes = []
        self.custom_traits = []
        self.project = str(uuid.uuid4())
        self.user = str(uuid.uuid4())


def _ok(resp, *codes):
    if resp.status_code not in codes:
        raise RuntimeError('world building failed: %s %s -> %s %s' % (
            resp.request.method, resp.request.url, resp.status_code,
            resp.text[:500]))
    return resp


def build_world(server):
    """Providers, inventories, classes, traits, aggregates, allocations."""
    s = requests.Session()
    s.headers.update(server.headers())
    base = server.url
    w = World()
    for name in ('CUSTOM_FUZZ_GPU', 'CUSTOM_FUZZ_NIC'):  # idempotent
        _ok(s.put(base + '/resource_classes/' + name), 201, 204)
        w.custom_classes.append(name)
    for name in ('CUSTOM_FUZZ_FAST', 'CUSTOM_FUZZ_SLOW'):
        _ok(s.put(base + '/traits/' + name), 201, 204)
        w.custom_traits.append(name)
    w.aggregates = [str(uuid.uuid4()) for _ in range(3)]
    parent = None
    for i in range(4):
        rp = str(uuid.uuid4())
        body = {'uuid': rp, 'name': 'fuzz-rp-%d-%s' % (i, rp[:8])}
        if i == 1:
            body['parent_provider_uuid'] = parent
        _ok(s.post(base + '/resource_providers', json=body), 200, 201)
        w.providers.append(rp)
        w.names[rp] = body['name']
        if i == 0:
            parent = rp
    inventories = {
        'VCPU': {'total': 64, 'allocation_ratio': 4.0, 'reserved': 2},
        'MEMORY_MB': {'total': 262144, 'max_unit': 131072},
        'DISK_GB': {'total': 2000, 'step_size': 10, 'min_unit': 10},
        'CUSTOM_FUZZ_GPU': {'total': 8},
    }
    for rp in w.providers:
        gen = _ok(s.get(base + '/resource_providers/' + rp), 200).json()[
            'generation']
        gen = _ok(s.put(base + '/resource_providers/%s/inventories' % rp,
                        json={'resource_provider_generation': gen,
                              'inventories': inventories}), 200).json()[
            'resource_provider_generation']
        gen = _ok(s.put(base + '/resource_providers/%s/traits' % rp,
                        json={'resource_provider_generation': gen,
                              'traits': w.custom_traits[:1] + [
                                  'HW_CPU_X86_AVX2']}), 200).json()[
            'resource_provider_generation']
        gen = _ok(s.put(base + '/resource_providers/%s/aggregates' % rp,
                        json={'resource_provider_generation': gen,
                              'aggregates': w.aggregates[:2]}), 200).json()[
            'resource_provider_generation']
    for i in range(4):
        consumer = str(uuid.uuid4())
        rp = w.providers[i % len(w.providers)]
        _ok(s.put(base + '/allocations/' + consumer, json={
            'allocations': {rp: {'resources': {'VCPU': 2,
                                               'MEMORY_MB': 1024}}},
            'project_id': w.project, 'user_id': w.user,
            'consumer_generation': None, 'consumer_type': 'INSTANCE'}), 204)
        w.consumers.append(consumer)
    for rp in w.providers:
        w.generations[rp] = _ok(s.get(base + '/resource_providers/' + rp),
                                200).json()['generation']
    return w


# --- database snapshot --------------------------------------------------

def snapshot(engine):
    """Every row of every table, in a comparable form."""
    state = {}
    with engine.connect() as conn:
        for table in models.BASE.metadata.sorted_tables:
            rows = conn.execute(sa.select(table)).fetchall()
            state[table.name] = sorted(repr(tuple(r)) for r in rows)
    return state


def diff_snapshots(before, after):
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = set(before.get(name, [])), set(after.get(name, []))
        if a != b:
            out.append('%s: +%s -%s' % (name, sorted(a - b)[:3],
                                        sorted(b - a)[:3]))
    return out


# --- request generation -------------------------------------------------

Request = collections.namedtuple(
    'Request', 'method path query headers body poison')


class Generator:
    """Seeded hostile requests over every route of the routes table."""

    def __init__(self, world, seed, skip=()):
        self.w = world
        self.rand = random.Random(seed)
        self.routes = [(url, method) for url, methods in
                       handler.ROUTES.items() for method in methods
                       if (url, method) not in skip]
        self.urls = list(handler.ROUTES)

    # values ---------------------------------------------------------

    def stale(self, rp=None):
        rp = rp or self.rand.choice(self.w.providers)
        return self.w.generations[rp] + self.rand.randint(1, 1000)

    def real_value(self, name):
        r = self.rand
        if name == 'uuid':
            return r.choice(self.w.providers)
        if name == 'consumer_uuid':
            # existing consumers only: a write to a new one with a
            # poisoned (null) consumer_generation could land
            return r.choice(self.w.consumers)
        if name == 'resource_class':
            return r.choice(['VCPU', 'MEMORY_MB', 'DISK_GB'] +
                            self.w.custom_classes)
        # resource class or trait name
        return r.choice(self.w.custom_classes + self.w.custom_traits +
                        ['VCPU', 'HW_CPU_X86_AVX2'])

    def fill(self, url, poison_path):
        """The URL with its placeholders filled; one poisoned if asked."""
        names = [p.split('}')[0] for p in url.split('{')[1:]]
        target = self.rand.choice(names) if (names and poison_path) else None
        path = url
        for name in names:
            if name == target:
                value = poison_path
            else:
                value = _q(self.real_value(name))
            path = path.replace('{%s}' % name, value, 1)
        return path or '/'

    def query_value(self):
        r = self.rand
        w = self.w
        pick = r.random()
        if pick < 0.15:
            return r.choice(QUERY_PREDISPATCH)
        choices = [
            lambda: _q(r.choice(w.providers)),
            lambda: 'in:' + ','.join(r.choice(w.aggregates + w.providers)
                                     for _ in range(r.randint(1, 5))),
            lambda: 'in:' + ','.join(str(uuid.uuid4()) for _ in range(
                r.choice([50, 50, 50, 2000, 5000]))),
            lambda: 'VCPU:1,MEMORY_MB:512',
            lambda: r.choice(['VCPU:-1', 'VCPU:0', 'VCPU:1e999', 'VCPU:',
                              ':', ',', 'VCPU:1,VCPU:1', 'VCPU:%s' % 2 ** 64,
                              'NOPE:1', 'VCPU%3A1', 'VCPU:1:2',
                              'vcpu:1', 'VCPU:' + '9' * 400]),
            lambda: r.choice(['!', '!!', '!CUSTOM_FUZZ_FAST',
                              'in:CUSTOM_FUZZ_FAST,!HW_CPU_X86_AVX2',
                              'CUSTOM_FUZZ_FAST,!CUSTOM_FUZZ_FAST',
                              'in:', 'in:,', 'any:', '!in:a',
                              'HW_CPU_X86_AVX2', 'CUSTOM_%C3%89']),
            lambda: r.choice(['-1', '0', '1', '10', '9' * 30, '1.5', '',
                              'true', 'yes', 'none', 'isolate', 'None']),
            lambda: 'x' * r.choice([300, 1500]),
            lambda: r.choice(['%C3%89', '%F0%9F%98%80', '%2500', '%25ff',
                              '%22%27%3B--', 'INSTANCE', 'MIGRATION',
                              'unknown', '%20']),
        ]
        return r.choice(choices)()

    def query(self, force_poison=False):
        r = self.rand
        keys = ['name', 'uuid', 'member_of', 'in_tree', 'resources',
                'required', 'limit', 'group_policy', 'root_required',
                'same_subtree', 'project_id', 'user_id', 'consumer_type',
                'associated', 'resources1', 'required1', 'member_of1',
                'in_tree1', 'resources_X', 'resources%00', 'bogus',
                'resources1' + 'x' * 60, '%ff']
        pairs = []
        for _ in range(r.randint(0, 4)):
            key = r.choice(keys)
            pairs.append('%s=%s' % (key, self.query_value()))
            if r.random() < 0.2:   # the same single-valued key again
                pairs.append('%s=%s' % (key, self.query_value()))
        if force_poison:
            pairs.insert(r.randint(0, len(pairs)), '%s=%s' % (
                r.choice(keys[:8]), r.choice(QUERY_PREDISPATCH)))
        return '&'.join(pairs)

    # bodies -----------------------------------------------------------

    def template(self, url, method, path=''):
        """A write body that is valid in shape but cannot land: a stale
        generation, a taken uuid, or a consumer generation that is off."""
        r = self.rand
        w = self.w
        rp = r.choice(w.providers)
        resources = {'VCPU': 1, 'MEMORY_MB': 128}
        alloc = {'allocations': {rp: {'resources': resources}},
                 'project_id': w.project, 'user_id': w.user,
                 'consumer_generation': r.randint(50, 1000),
                 'consumer_type': 'INSTANCE'}
        inv = {'total': 10, 'reserved': 0, 'min_unit': 1, 'max_unit': 10,
               'step_size': 1, 'allocation_ratio': 1.0}
        if url == '/resource_classes':
            return {'name': 'CUSTOM_FUZZ_GPU'}, ['name']
        if url == '/resource_providers':
            return {'name': w.names[rp], 'uuid': rp,
                    'parent_provider_uuid': w.providers[0]}, []
        if url == '/resource_providers/{uuid}':
            # Another provider's name: a 409 whichever provider the path
            # names (its own name would be a valid no-op rename).
            other = [p for p in w.providers if p not in path][0]
            return {'name': w.names[other],
                    'parent_provider_uuid': None}, []
        if url.endswith('/inventories') and method == 'POST':
            # POST ignores the generation (as upstream): a class the
            # provider already has makes an accepted poison a 409.
            return dict(inv, resource_class='VCPU',
                        resource_provider_generation=self.stale()), []
        if url.endswith('/inventories'):
            return {'resource_provider_generation': self.stale(),
                    'inventories': {'VCPU': dict(inv),
                                    'DISK_GB': {'total': 5}}}, []
        if url.endswith('/inventories/{resource_class}'):
            return dict(inv, resource_provider_generation=self.stale()), []
        if url.endswith('/aggregates'):
            return {'aggregates': list(w.aggregates),
                    'resource_provider_generation': self.stale()}, []
        if url.endswith('/traits'):
            return {'traits': ['HW_CPU_X86_SSE', 'CUSTOM_FUZZ_SLOW'],
                    'resource_provider_generation': self.stale()}, []
        if url == '/allocations':
            return {r.choice(w.consumers): alloc,
                    str(uuid.uuid4()): dict(alloc)}, []
        if url == '/allocations/{consumer_uuid}':
            return alloc, []
        if url == '/reshaper':
            return {'inventories': {rp: {
                        'resource_provider_generation': self.stale(rp),
                        'inventories': {'VCPU': dict(inv)}}},
                    'allocations': {r.choice(w.consumers): alloc}}, []
        return {'bogus': True}, []

    def _nodes(self, doc):
        """(container, key) for every value in doc."""
        out = []
        stack = [doc]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                for k, v in item.items():
                    out.append((item, k))
                    stack.append(v)
            elif isinstance(item, list):
                for i, v in enumerate(item):
                    out.append((item, i))
                    stack.append(v)
        return out

    def poison_body(self, doc, must_fields):
        """(bytes, content_type, kind): the document with one poison."""
        r = self.rand
        pick = r.random()
        nodes = self._nodes(doc)
        if must_fields:
            nodes = [(c, k) for c, k in nodes if k in must_fields]
        if pick < 0.35 and nodes:
            # field level: a value no schema should take
            container, key = r.choice(nodes)
            value = container[key]
            pool = (NUMBER_POISONS if isinstance(value, (int, float))
                    and not isinstance(value, bool) else STRING_POISONS
                    if isinstance(value, str) else
                    NUMBER_POISONS + STRING_POISONS)
            if isinstance(value, dict) and r.random() < 0.5:
                # non-object where an object is expected
                container[key] = r.choice([1, 'x', [value], None, True])
            else:
                container[key] = r.choice(pool)
            text = json.dumps(doc)
            return text.encode('utf-8', 'surrogatepass'), \
                'application/json', 'field'
        if pick < 0.75:
            # raw: a JSON text refused by the parser or storage checks,
            # spliced in place of a value or a key
            marker = '"__POISON__"'
            if nodes and r.random() < 0.8:
                container, key = r.choice(nodes)
                container[key] = '__POISON__'
                text = json.dumps(doc).replace(marker, r.choice(RAW_POISONS),
                                               1)
            else:
                text = r.choice(RAW_POISONS)
                if must_fields:
                    text = '{"%s": %s}' % (must_fields[0], text)
            if r.random() < 0.15:
                # a poisoned key as well
                text = text.replace('{', '{"k\\u0000": 1, ', 1)
            return text.encode('utf-8'), 'application/json', 'raw'
        text = json.dumps(doc)
        if pick < 0.85:
            cut = r.randint(0, max(0, len(text) - 1))
            return text[:cut].encode(), 'application/json', 'truncated'
        if pick < 0.92:
            return (text.encode('utf-8')[:-2] + b'\xff\xfe"}',
                    'application/json', 'bad-utf8')
        if pick < 0.97:
            return (r.choice([b'', b' ', b'null', b'[]', b'"x"', b'1',
                              b'\x00', b'{}}', b'{"a" 1}']),
                    'application/json', 'not-a-document')
        return (b'{"pad": "' + b'x' * (1024 * 1024 + 10) + b'"}',
                'application/json', 'oversize')

    # requests -----------------------------------------------------------

    def make(self):
        r = self.rand
        headers = {}
        if r.random() < 0.04:
            url = r.choice(self.urls)
            return Request(r.choice(UNKNOWN_METHODS),
                           self.fill(url, None), self.query(), headers,
                           None, 'method')
        url, method = r.choice(self.routes)
        if method == 'GET':
            poison = r.choice(['query', 'query', 'query', 'path', 'version',
                               'none'])
            path_poison = None
            if poison == 'path':
                path_poison = r.choice(PATH_PREDISPATCH + PATH_GARBAGE)
            path = self.fill(url, path_poison)
            if poison == 'version':
                headers['openstack-api-version'] = r.choice(BAD_VERSIONS)
            elif r.random() < 0.3:
                headers['openstack-api-version'] = 'placement 1.%d' % (
                    r.randint(0, 39))
            return Request(method, path, self.query(), headers, None, poison)
        # Writes: every one carries a poison that keeps it from landing.
        has_body = (method in ('POST', 'PUT')
                    and (url, method) not in NO_BODY)
        kinds = ['predispatch-query', 'version']
        if '{' in url:
            kinds.append('predispatch-path')
        if (url, method) in NO_BODY:
            kinds += ['garbage-path'] * 4
        elif '{' in url and method != 'DELETE':
            kinds.append('garbage-path')
        if has_body:
            kinds += ['body'] * 8 + ['content-type']
        poison = r.choice(kinds)
        path_poison = None
        if poison == 'predispatch-path':
            path_poison = r.choice(PATH_PREDISPATCH)
        elif poison == 'garbage-path':
            path_poison = r.choice(PATH_GARBAGE)
        path = self.fill(url, path_poison)
        query = self.query(force_poison=(poison == 'predispatch-query'))
        if poison == 'version':
            headers['openstack-api-version'] = r.choice(BAD_VERSIONS)
        body = None
        if has_body:
            doc, must = self.template(url, method, path)
            ctype = 'application/json'
            if poison == 'body':
                body, ctype, kind = self.poison_body(doc, must)
                poison = 'body-' + kind
            elif must:
                # The template alone would land (a new class): poison the
                # field that matters as well.
                body, ctype, _kind = self.poison_body(doc, must)
            else:
                body = json.dumps(doc).encode()
            if poison == 'content-type':
                ctype = r.choice(['text/plain', 'application/xml',
                                  'application/x-www-form-urlencoded',
                                  'multipart/form-data; boundary=x',
                                  'application/jsonx', 'json'])
            headers['content-type'] = ctype
        return Request(method, path, query, headers, body, poison)


# --- running -------------------------------------------------------------

class Result:
    def __init__(self):
        self.lock = threading.Lock()
        self.statuses = collections.Counter()
        self.by_route = collections.Counter()
        self.poisons = collections.Counter()
        self.seconds = collections.Counter()   # per poison kind
        self.method_status = collections.Counter()
        self.failures = []   # (reason, request, status, body)
        self.count = 0
        self.skipped = []

    def summary(self):
        return {'requests': self.count,
                'statuses': dict(sorted(self.statuses.items(),
                                        key=lambda kv: str(kv[0]))),
                'poisons': dict(self.poisons),
                'by_method': dict(sorted(self.method_status.items())),
                'routes': len(self.by_route),
                'skipped_stub_routes': self.skipped,
                'failures': len(self.failures)}


def _send(session, base, req, result):
    url = base + req.path + ('?' + req.query if req.query else '')
    start = time.monotonic()
    try:
        resp = session.request(req.method, url, headers=req.headers,
                               data=req.body, timeout=120,
                               allow_redirects=False)
        status, text = resp.status_code, resp.text
    except requests.RequestException as exc:
        status, text = None, repr(exc)
    with result.lock:
        result.seconds[req.poison] += time.monotonic() - start
        result.count += 1
        result.statuses[status] += 1
        result.method_status['%s %s' % (req.method, status)] += 1
        result.poisons[req.poison] += 1
        result.by_route[(req.method, req.path.split('?')[0][:40])] += 1
        if status is None or status >= 500:
            result.failures.append(('5xx', req, status, text[:300]))
        elif (200 <= status < 300 and req.method not in ('GET',)
              and req.method not in UNKNOWN_METHODS):
            result.failures.append(('write accepted', req, status,
                                    text[:300]))
        elif status >= 400 and req.method != 'HEAD' and (
                not text.startswith('{"errors"')):
            result.failures.append(('not a JSON error', req, status,
                                    text[:300]))


def unimplemented_routes(server, world):
    """(url, method) pairs still answering 501 (stubs), found with
    requests that cannot write: an empty JSON object as the body of
    writes, fresh uuids and names in paths."""
    session = requests.Session()
    session.headers.update(server.headers())
    stubs = []
    for url, methods in handler.ROUTES.items():
        path = url
        for name in [p.split('}')[0] for p in url.split('{')[1:]]:
            value = (str(uuid.uuid4()) if 'uuid' in name
                     else 'CUSTOM_NO_SUCH_' + uuid.uuid4().hex.upper())
            if name == 'uuid':
                value = world.providers[0]
            path = path.replace('{%s}' % name, value)
        for method in methods:
            kwargs = {}
            if method in ('POST', 'PUT') and (url, method) not in NO_BODY:
                kwargs = {'data': b'{}',
                          'headers': {'content-type': 'application/json'}}
            elif method != 'GET':
                continue
            resp = session.request(method, server.url + (path or '/'),
                                   timeout=60, **kwargs)
            if resp.status_code == 501:
                stubs.append((url, method))
    return stubs


def run(server, count, seed=0, threads=8, engine=None):
    """Build the world, fuzz, and return (result, table differences).

    Routes whose handler is still a 501 stub are left out and listed in
    ``result.skipped``.
    """
    world = build_world(server)
    engine = engine if engine is not None else server.db.engine
    skipped = unimplemented_routes(server, world)
    before = snapshot(engine)
    gen = Generator(world, seed, skip=skipped)
    result = Result()
    result.skipped = skipped
    local = threading.local()

    def session():
        if not hasattr(local, 's'):
            local.s = requests.Session()
            local.s.headers.update(server.headers())
        return local.s

    def work(batch):
        for req in batch:
            _send(session(), server.url, req, result)

    batch_size = 200
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = []
        made = 0
        while made < count:
            n = min(batch_size, count - made)
            futures.append(pool.submit(work, [gen.make() for _ in range(n)]))
            made += n
            if len(futures) > threads * 4:
                futures.pop(0).result()
        for f in futures:
            f.result()
    after = snapshot(engine)
    return result, diff_snapshots(before, after)


def describe(failure):
    reason, req, status, text = failure
    return '%s: %s %s?%s [%s] %r -> %s %s' % (
        reason, req.method, req.path[:120], req.query[:120], req.poison,
        (req.body or b'')[:120], status, text)
