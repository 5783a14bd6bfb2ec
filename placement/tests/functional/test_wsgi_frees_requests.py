"""A request through the WSGI application is freed as soon as the server
lets it go: nothing of it waits for the cyclic collector.

What waits for the collector keeps its memory until a collection runs
(every few requests: placement.wsgi.api.tune_gc): a large candidates
answer's megabytes then pile up, and each next answer takes fresh pages
from the system (a page fault per 4 KB: ~1.5 ms per limit=1000 answer at a
million providers).
"""
import gc
import io
import json
import sys
import uuid

import pytest
import webob

from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits


@pytest.fixture(scope='module')
def application():
    # An empty world: the requests below build what they use.
    with gabbits.app_over_world(cw.WorldBuilder()) as app:
        yield app


def _send(application, method, path, body=None):
    """What a WSGI server does: an environ, the app called, its body read
    and closed; (status, body)."""
    path, _, query = path.partition('?')
    data = b'' if body is None else json.dumps(body).encode()
    environ = {
        'REQUEST_METHOD': method, 'SCRIPT_NAME': '', 'PATH_INFO': path,
        'QUERY_STRING': query, 'SERVER_NAME': 'localhost',
        'SERVER_PORT': '80', 'SERVER_PROTOCOL': 'HTTP/1.1',
        'HTTP_HOST': 'localhost', 'HTTP_X_AUTH_TOKEN': 'admin',
        'HTTP_OPENSTACK_API_VERSION': 'placement 1.39',
        'HTTP_ACCEPT': 'application/json',
        'CONTENT_TYPE': 'application/json',
        'CONTENT_LENGTH': str(len(data)),
        'wsgi.input': io.BytesIO(data), 'wsgi.errors': sys.stderr,
        'wsgi.version': (1, 0), 'wsgi.url_scheme': 'http',
        'wsgi.multithread': False, 'wsgi.multiprocess': True,
        'wsgi.run_once': False,
    }
    status = []
    app_iter = application(environ, lambda s, headers, exc=None:
                           status.append(s))
    try:
        out = b''.join(app_iter)
    finally:
        if hasattr(app_iter, 'close'):
            app_iter.close()
    return int(status[0].split()[0]), out


def _left_for_the_collector(application, method, path, body=None):
    """(status, the names of the types of what of the request only the
    cyclic collector frees: its environ, its webob Request or Response,
    bytes -- a body)."""
    gc.collect()
    gc.disable()
    try:
        status, _out = _send(application, method, path, body)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return status, sorted({type(o).__name__ for o in left if _of_request(o)})


def _of_request(obj):
    # (SQLAlchemy leaves a few small cycles of its own per expanding IN
    # parameter, freed with the next collection: not the request's.)
    return (isinstance(obj, (webob.Request, webob.Response, bytes)) or
            isinstance(obj, dict) and 'wsgi.input' in obj)


RP = str(uuid.uuid4())
CONSUMER = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())


REQUESTS = [
    ('provider created', 'POST', '/resource_providers',
     {'name': 'cn1', 'uuid': RP}, 200),
    ('inventories set', 'PUT', '/resource_providers/%s/inventories' % RP, {
        'resource_provider_generation': 0,
        'inventories': {'VCPU': {'total': 8},
                        'MEMORY_MB': {'total': 4096}}}, 200),
    ('candidates', 'GET', '/allocation_candidates?'
     'resources=VCPU:1,MEMORY_MB:64&limit=5', None, 200),
    ('providers listed', 'GET', '/resource_providers?resources=VCPU:1',
     None, 200),
    ('allocations written', 'PUT', '/allocations/%s' % CONSUMER, {
        'allocations': {RP: {'resources': {'VCPU': 1}}},
        'project_id': PROJECT, 'user_id': PROJECT,
        'consumer_generation': None, 'consumer_type': 'INSTANCE'}, 204),
    ('allocations read', 'GET', '/allocations/%s' % CONSUMER, None, 200),
    ('usages', 'GET', '/usages?project_id=%s' % PROJECT, None, 200),
    # Errors too: from the schema, not found, a conflict.
    ('bad query', 'GET', '/allocation_candidates?resources=VCPU:x', None,
     400),
    ('no such provider', 'GET', '/resource_providers/%s' % uuid.uuid4(),
     None, 404),
    ('name taken', 'POST', '/resource_providers', {'name': 'cn1'}, 409),
    ('allocations deleted', 'DELETE', '/allocations/%s' % CONSUMER, None,
     204),
]


@pytest.mark.parametrize('method, path, body, status', [
    pytest.param(*request[1:], id=request[0]) for request in REQUESTS])
def test_nothing_of_a_request_waits_for_the_collector(
        application, method, path, body, status):
    # In order: each builds on the one before (one database).
    got, left = _left_for_the_collector(application, method, path, body)
    assert got == status
    assert left == []
