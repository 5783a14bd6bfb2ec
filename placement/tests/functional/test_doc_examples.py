"""The examples of doc/source/api/extensions.rst, checked against the
service: each documented response body must have the shape (keys and
value types, recursively) of what the service answers to the documented
request over the world the page describes. A renamed or added key in a
body, or a documented one that is gone, fails here.

Examples are the page's ``.. code-block:: json`` (or ``text``) blocks
whose ``:caption:`` is the request, e.g. ``GET /ops/capacity?...``."""
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


def capacity_world():
    """The page's capacity world: two compute nodes drawing disk from a
    shared Ceph pool in their aggregate, one instance on compute-1."""
    w = candidate_worlds.WorldBuilder()
    for name in ('compute-1', 'compute-2'):
        w.provider(name)
        w.inventory(name, 'VCPU', 32, allocation_ratio=4.0)
        w.inventory(name, 'MEMORY_MB', 131072, reserved=512)
        w.aggregate(name, POOL_AGG)
    w.provider('ceph')
    w.inventory('ceph', 'DISK_GB', 900)
    w.trait('ceph', 'MISC_SHARES_VIA_AGGREGATE')
    w.aggregate('ceph', POOL_AGG)
    w.usage('compute-1', 'VCPU', 4)
    w.usage('compute-1', 'MEMORY_MB', 16384)
    w.usage('ceph', 'DISK_GB', 80)
    return w


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
    needs one served."""
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
                assert_same_shape(item, served[0], where + '[]')
    else:
        assert shape(documented) == shape(served), (
            '%s: documented %r, served %r' % (where, documented, served))


with open(PAGE) as f:
    EXAMPLES = examples(f.read())


def test_page_has_examples():
    """Each extension route has at least one example checked here."""
    paths = {request.split()[1].split('?')[0] for _, request, _ in EXAMPLES}
    assert {'/ops/capacity', '/ops/explain/allocation_candidates',
            '/metrics', '/ui/'} <= paths


@pytest.mark.parametrize('lang,request_line,body', EXAMPLES,
                         ids=['example%d' % i for i in range(len(EXAMPLES))])
def test_example_matches_service(lang, request_line, body):
    method, path = request_line.split(' ', 1)
    overrides = {('metrics', 'enabled'): True}
    with gabbits.app_over_world(world_for(path), overrides) as app:
        headers = dict(H) if lang == 'json' else {'x-auth-token': 'admin'}
        resp = webob.Request.blank(path, method=method,
                                   headers=headers).get_response(app)
    assert resp.status_int == 200, resp.text
    if lang == 'json':
        assert_same_shape(json.loads(body), resp.json)
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
