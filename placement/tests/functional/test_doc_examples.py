"""The examples of doc/source/api/extensions.rst, checked against the
service: each documented response body must have the shape (keys and
value types, recursively) of what the service answers to the documented
request over the world the page describes. A renamed or added key in a
body, or a documented one that is gone, fails here.

Examples are the page's ``.. code-block:: json`` (or ``text``) blocks
whose ``:caption:`` is the request, e.g. ``GET /ops/capacity?...``; in a
``since=<token>`` the token of the answer before the page's write."""
import json
import os
import re

import pytest
import webob

from placement.tests.functional import candidate_worlds
from placement.tests.functional.fixtures import gabbits

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PAGE = os.path.join(REPO, 'doc', 'source', 'api', 'extensions.rst')
H = {'x-auth-token': 'admin', 'accept': 'application/json',
     'openstack-api-version': 'placement latest'}
POOL_AGG = '7a3c1c4e-5b1e-4f55-9d8e-2f6f3f1b0a01'
COMPUTE_1 = '1791310c-c4b3-4973-9a13-fea9beb70fa7'
COMPUTE_2 = '439f718c-7459-4d00-a891-06dc1c6f81cb'
CEPH = 'c2a0e5f4-3d5c-4a4e-8b8e-6f0b7f5d2c11'
INSTANCE = '6d6b2b6e-2f0a-4e6f-9a43-3f5f6c1a8e21'
MAINTENANCE_AGG = '4b1c6f0e-9a55-4d2c-8e8e-3f1a2b7c9d10'

_BLOCK = re.compile(
    r'^\.\. code-block:: (json|text)\n'
    r'   :caption: (GET \S+)\n\n'
    r'((?:(?:   .*)?\n)+)', re.M)


def examples(text):
    """[(language, request, body text)] of the page's examples."""
    found = []
    for lang, request, body in _BLOCK.findall(text):
        lines = [line[3:] for line in body.split('\n')]
        found.append((lang, request, '\n'.join(lines).strip()))
    return found


def capacity_world(usage=True):
    """The page's capacity world: two compute nodes drawing disk from a
    shared Ceph pool in their aggregate, one instance on compute-1
    (written through the API instead when not ``usage``)."""
    w = candidate_worlds.WorldBuilder()
    for name, uuid in (('compute-1', COMPUTE_1), ('compute-2', COMPUTE_2)):
        w.provider(name, uuid=uuid)
        w.inventory(name, 'VCPU', 32, allocation_ratio=4.0)
        w.inventory(name, 'MEMORY_MB', 131072, reserved=512)
        w.aggregate(name, POOL_AGG)
    w.provider('ceph', uuid=CEPH)
    w.inventory('ceph', 'DISK_GB', 900)
    w.trait('ceph', 'MISC_SHARES_VIA_AGGREGATE')
    w.aggregate('ceph', POOL_AGG)
    if usage:
        w.usage('compute-1', 'VCPU', 4)
        w.usage('compute-1', 'MEMORY_MB', 16384)
        w.usage('ceph', 'DISK_GB', 80)
    return w


def call(app, method, path, body=None):
    req = webob.Request.blank(path, method=method, headers=H)
    if body is not None:
        req.content_type = 'application/json'
        req.json = body
    resp = req.get_response(app)
    assert resp.status_int < 400, resp.text
    return resp


def put_instance(app, consumer, allocations):
    call(app, 'PUT', '/allocations/' + consumer, {
        'allocations': {rp: {'resources': res}
                        for rp, res in allocations.items()},
        'project_id': 'demo-project', 'user_id': 'demo-user',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})


def ui_world(app, path):
    """The capacity world's instance, written through the API as nova
    does (with its project, user and type); for ``since=<token>``, the
    token before the page's write (a second instance, on compute-2)."""
    put_instance(app, INSTANCE, {
        COMPUTE_1: {'VCPU': 4, 'MEMORY_MB': 16384}, CEPH: {'DISK_GB': 80}})
    if '<token>' not in path:
        return path
    token = call(app, 'GET', '/ops/ui/providers').json['token']
    assert token, 'the test database counts no changes'
    put_instance(app, '0f3e9a54-8a1c-4b7e-b2d5-7c9e4a1f6b30',
                 {COMPUTE_2: {'VCPU': 2, 'MEMORY_MB': 4096}})
    return path.replace('<token>', token)


def explain_world():
    """The page's explain world: three compute nodes, two with
    CUSTOM_GOLD, one in a maintenance aggregate, cn1 nearly full."""
    w = candidate_worlds.WorldBuilder()
    for name in ('cn1', 'cn2', 'cn3'):
        w.provider(name)
        w.inventory(name, 'VCPU', 8)
        w.inventory(name, 'MEMORY_MB', 8192, reserved=512)
    w.trait('cn1', 'CUSTOM_GOLD')
    w.trait('cn3', 'CUSTOM_GOLD')
    w.aggregate('cn3', MAINTENANCE_AGG)
    w.usage('cn1', 'MEMORY_MB', 7296)
    return w


WORLDS = {'/ops/capacity': capacity_world,
          '/ops/ui/': lambda: capacity_world(usage=False),
          '/ops/explain/': explain_world,
          '/metrics': capacity_world,
          '/ui': capacity_world}


def world_for(path):
    for prefix, build in WORLDS.items():
        if path.startswith(prefix):
            return build()
    raise AssertionError('no world for the documented request %s' % path)


def shape(value):
    """The JSON shape: dict keys and value types, lists by their first
    element (numbers are numbers, int or float)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return 'bool'
    if isinstance(value, (int, float)):
        return 'number'
    if value is None:
        return 'null'
    return type(value).__name__


def assert_same_shape(documented, served, where='body'):
    """``documented`` (a doc example) has the shape of ``served``. A list
    the page shows empty matches any list; one it shows with an element
    needs one served. A documented item with a ``uuid`` (or
    ``consumer_uuid``) that a served item has is compared with that one
    (maps keyed by resource class differ between providers), any other
    with the first served."""
    if isinstance(documented, dict):
        assert isinstance(served, dict), where
        assert sorted(documented) == sorted(served), (
            '%s: documented keys %s, served %s'
            % (where, sorted(documented), sorted(served)))
        for key in documented:
            assert_same_shape(documented[key], served[key],
                              '%s.%s' % (where, key))
    elif isinstance(documented, list):
        assert isinstance(served, list), where
        if documented:
            assert served, '%s: documented items, served none' % where
            for item in documented:
                assert_same_shape(item, _same_item(item, served),
                                  where + '[]')
    else:
        assert shape(documented) == shape(served), (
            '%s: documented %r, served %r' % (where, documented, served))


def _same_item(item, served):
    for key in ('uuid', 'consumer_uuid'):
        if isinstance(item, dict) and key in item:
            for other in served:
                if isinstance(other, dict) and other.get(key) == item[key]:
                    return other
    return served[0]


with open(PAGE) as f:
    EXAMPLES = examples(f.read())


def test_page_has_examples():
    """Each extension route has at least one example checked here."""
    paths = {request.split()[1].split('?')[0] for _, request, _ in EXAMPLES}
    assert {'/ops/capacity', '/ops/explain/allocation_candidates',
            '/metrics', '/ui/', '/ui/settings.json', '/ops/ui/providers',
            '/ops/ui/providers/%s/consumers' % COMPUTE_1} <= paths


@pytest.mark.parametrize('lang,request_line,body', EXAMPLES,
                         ids=['example%d' % i for i in range(len(EXAMPLES))])
def test_example_matches_service(lang, request_line, body):
    method, path = request_line.split(' ', 1)
    overrides = {('metrics', 'enabled'): True}
    with gabbits.app_over_world(world_for(path), overrides) as app:
        if path.startswith('/ops/ui/'):
            path = ui_world(app, path)
        headers = dict(H) if lang == 'json' else {'x-auth-token': 'admin'}
        resp = webob.Request.blank(path, method=method,
                                   headers=headers).get_response(app)
    assert resp.status_int == 200, resp.text
    if lang == 'json':
        assert_same_shape(json.loads(body), resp.json)
        if 'since=' in path:
            # The page says what an answer since its token holds.
            doc = json.loads(body)
            assert ((doc['full'], [p['uuid'] for p in doc['providers']])
                    == (resp.json['full'],
                        [p['uuid'] for p in resp.json['providers']]))
    elif path == '/metrics':
        # Every documented sample's family and label names are served.
        def families(text):
            return {re.sub(r'="[^"]*"', '', line.split(' ')[0])
                    for line in text.splitlines()
                    if line and not line.startswith(('#', '...'))}
        missing = families(body) - families(resp.text)
        assert not missing, missing
    else:
        assert resp.content_type == 'text/html'
        for line in body.splitlines():
            assert line == '...' or line in resp.text, line
