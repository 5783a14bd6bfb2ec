"""placement_request end to end against this project's placement.

The client talks ``requests`` to the in-process app through a WSGI
transport (no sockets), on a fresh database; one test drives the real
``placement-request`` command against a live gunicorn server. The world:

  cn1  AVX2 + CUSTOM_TRUSTED_HOST      cn2  AVX2
  cn3  CUSTOM_TRUSTED_HOST             cn4  no traits
  cn5  no traits, two child NICs:  pf_plain (SRIOV_NET_VF)
                                   pf_offload (SRIOV_NET_VF,
                                               CUSTOM_NIC_OFFLOAD)

While an endpoint this needs still answers 501 (being built), the tests
skip rather than fail. ``PLACEMENT_REQUEST_E2E_URL=http://host:port`` runs
the same tests over real HTTP against any noauth2 placement instead (they
pass against upstream's placement too).
"""
import io
import json
import os
import socket
import subprocess
import sys
import uuid

import pytest
import requests
import webob

from placement.db import api as db_api
from placement import deploy
from placement.tests import db as test_db
from placement.tests.functional.fixtures import gabbits
from placement_request import cli
from placement_request import client as pr_client
from placement_request import exceptions
from placement_request import rebuild
from placement_request import request as rq

URL = os.environ.get('PLACEMENT_REQUEST_E2E_URL') or 'http://placement.test'
EXTERNAL = bool(os.environ.get('PLACEMENT_REQUEST_E2E_URL'))
AVX2 = 'HW_CPU_X86_AVX2'
TRUSTED = 'CUSTOM_TRUSTED_HOST'
OFFLOAD = 'CUSTOM_NIC_OFFLOAD'
FLAVOR = {'trait:%s' % AVX2: 'required'}
IMAGE = {'trait:%s' % TRUSTED: 'required'}
HOST_INVENTORY = {'VCPU': 8, 'MEMORY_MB': 8192, 'DISK_GB': 100}


class WSGITransport(requests.adapters.BaseAdapter):
    """Hand requests' PreparedRequests to a WSGI app via webob. ``before``
    may run a callable before a matching request, to stage races."""

    def __init__(self, app):
        super().__init__()
        self.app = app
        self.before = {}

    def send(self, request, **kwargs):
        hook = self.before.pop((request.method, request.path_url), None)
        if hook:
            hook()
        wreq = webob.Request.blank(request.path_url, method=request.method,
                                   headers=dict(request.headers))
        if request.body:
            wreq.body = (request.body if isinstance(request.body, bytes)
                         else request.body.encode())
        wresp = wreq.get_response(self.app)
        resp = requests.Response()
        resp.status_code = wresp.status_code
        resp.headers = requests.structures.CaseInsensitiveDict(wresp.headers)
        resp._content = wresp.body
        resp.encoding = 'utf-8'
        resp.url = request.url
        resp.request = request
        return resp

    def close(self):
        pass


class RacingHTTPAdapter(requests.adapters.HTTPAdapter):
    """Real HTTP, with the same ``before`` hooks as WSGITransport."""

    def __init__(self):
        super().__init__()
        self.before = {}

    def send(self, request, **kwargs):
        hook = self.before.pop((request.method, request.path_url), None)
        if hook:
            hook()
        return super().send(request, **kwargs)


class SkipUnbuilt(pr_client.PlacementClient):
    """Skip, not fail, while a handler this needs is still a 501 stub."""

    def request(self, *args, **kwargs):
        try:
            return super().request(*args, **kwargs)
        except exceptions.PlacementHTTPError as exc:
            if exc.status == 501:
                pytest.skip('not built yet: %s' % exc)
            raise


class World:
    """Providers built through the API; ``uuids[name]``."""

    def __init__(self, client):
        self.client = client
        self.uuids = {}

    def provider(self, name, inventory, traits=(), parent=None):
        rp = str(uuid.uuid4())
        # Unique names, so reruns against an external server do not clash.
        body = {'name': '%s-%s' % (name, rp[:8]), 'uuid': rp}
        if parent:
            body['parent_provider_uuid'] = self.uuids[parent]
        self.client.request('POST', '/resource_providers', json=body)
        self.uuids[name] = rp
        gen = self._generation(rp)
        self.client.request(
            'PUT', '/resource_providers/%s/inventories' % rp, json={
                'resource_provider_generation': gen,
                'inventories': {rc: {'total': total}
                                for rc, total in inventory.items()}})
        if traits:
            for trait in traits:
                if trait.startswith('CUSTOM_'):
                    self.client.request('PUT', '/traits/%s' % trait)
            self.client.request(
                'PUT', '/resource_providers/%s/traits' % rp, json={
                    'resource_provider_generation': self._generation(rp),
                    'traits': sorted(traits)})
        return rp

    def aggregate(self, name, aggregate):
        rp = self.uuids[name]
        self.client.request(
            'PUT', '/resource_providers/%s/aggregates' % rp, json={
                'resource_provider_generation': self._generation(rp),
                'aggregates': [aggregate]})

    def _generation(self, rp):
        return self.client.request(
            'GET', '/resource_providers/%s' % rp).json()['generation']

    def names(self, rps):
        by_uuid = {v: k for k, v in self.uuids.items()}
        # Other providers may exist on an external server; not ours.
        return {by_uuid[rp] for rp in rps if rp in by_uuid}


@pytest.fixture(scope='module')
def app():
    if EXTERNAL:
        yield None
        return
    db = test_db.TestDatabase()
    conf = gabbits.build_test_conf(db.url)
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)
    try:
        yield deploy.loadapp(conf)
    finally:
        undo()
        db.drop()


@pytest.fixture(scope='module')
def transport(app):
    return WSGITransport(app) if app else RacingHTTPAdapter()


def _session(transport):
    sess = requests.Session()
    sess.mount(URL, transport)
    return sess


@pytest.fixture(scope='module')
def client(transport):
    return SkipUnbuilt(URL, token='admin', session=_session(transport))


@pytest.fixture(scope='module')
def world(client):
    w = World(client)
    w.provider('cn1', HOST_INVENTORY, [AVX2, TRUSTED])
    w.provider('cn2', HOST_INVENTORY, [AVX2])
    w.provider('cn3', HOST_INVENTORY, [TRUSTED])
    w.provider('cn4', HOST_INVENTORY)
    w.provider('cn5', HOST_INVENTORY)
    w.provider('pf_plain', {'SRIOV_NET_VF': 4}, parent='cn5')
    w.provider('pf_offload', {'SRIOV_NET_VF': 4}, [OFFLOAD], parent='cn5')
    return w


def hosts(world, cands):
    found = set()
    for i in range(len(cands)):
        found |= world.names(cands.roots(i))
    return found


def boot_request(flavor=None, image=None):
    return rq.build_request(flavor or {}, image or {}, vcpus=1,
                            memory_mb=512, disk_gb=1)


def claim(client, rp_resources):
    consumer = str(uuid.uuid4())
    client.put_allocations(consumer, rp_resources, 'proj', 'user')
    return consumer


# -- boot: flavor traits merged with image traits ------------------------

def test_flavor_and_image_traits_pick_only_hosts_with_both(client, world):
    cands = client.get_allocation_candidates(boot_request(FLAVOR, IMAGE))
    assert hosts(world, cands) == {'cn1'}
    ours = [world.names(cands.roots(i)) for i in range(len(cands))]
    assert [h for h in ours if h] == [{'cn1'}]
    summary = cands.provider_summaries[world.uuids['cn1']]
    assert {AVX2, TRUSTED} <= set(summary['traits'])


def test_same_flavor_without_the_image_returns_more_hosts(client, world):
    with_image = client.get_allocation_candidates(boot_request(FLAVOR, IMAGE))
    flavor_only = client.get_allocation_candidates(boot_request(FLAVOR))
    assert hosts(world, flavor_only) == {'cn1', 'cn2'}
    assert hosts(world, with_image) < hosts(world, flavor_only)
    everything = client.get_allocation_candidates(boot_request())
    assert hosts(world, everything) == {'cn1', 'cn2', 'cn3', 'cn4', 'cn5'}


def test_image_alone_requires_its_traits(client, world):
    cands = client.get_allocation_candidates(boot_request(image=IMAGE))
    assert hosts(world, cands) == {'cn1', 'cn3'}


def test_forbidden_flavor_trait_with_image(client, world):
    req = boot_request({'trait:%s' % AVX2: 'forbidden'}, IMAGE)
    assert hosts(world, client.get_allocation_candidates(req)) == {'cn3'}


def test_query_sent_is_the_rendered_one(client, world):
    req = boot_request(FLAVOR, IMAGE)
    cands = client.get_allocation_candidates(req, limit=5)
    assert cands.query == req.to_querystring(client.microversion, 5)
    assert 'required=CUSTOM_TRUSTED_HOST%2CHW_CPU_X86_AVX2' in cands.query


def test_older_microversion_renders_and_is_answered(world, transport):
    old = SkipUnbuilt(URL, token='admin', session=_session(transport),
                      microversion='1.17')
    cands = old.get_allocation_candidates(boot_request(FLAVOR, IMAGE))
    assert hosts(world, cands) == {'cn1'}


def test_claim_the_chosen_candidate(client, world):
    cands = client.get_allocation_candidates(boot_request(FLAVOR, IMAGE))
    consumer = str(uuid.uuid4())
    index = [i for i in range(len(cands))
             if world.names(cands.roots(i)) == {'cn1'}][0]
    assert client.claim(consumer, cands, index, 'proj', 'user') == 1
    allocs = client.get_allocations(consumer)
    assert set(allocs['allocations']) == {world.uuids['cn1']}
    assert allocs['allocations'][world.uuids['cn1']]['resources'] == {
        'VCPU': 1, 'MEMORY_MB': 512, 'DISK_GB': 1}
    # ... and the booted instance passes the rebuild check for its image.
    assert rebuild.rebuild_check(client, consumer, IMAGE).passed


def test_claim_retries_after_a_concurrent_write(client, world, transport):
    cn2 = world.uuids['cn2']
    consumer = claim(client, {cn2: {'VCPU': 1}})
    path = '/allocations/%s' % consumer

    def race():
        # Another writer changes the consumer between our read and write.
        other = pr_client.PlacementClient(URL, token='admin',
                                          session=_session(transport))
        other.put_allocations(consumer, {cn2: {'VCPU': 2}}, 'proj', 'user')

    transport.before[('PUT', path)] = race
    tries = client.put_allocations(consumer, {cn2: {'VCPU': 3}},
                                   'proj', 'user')
    assert tries == 2
    assert client.get_allocations(consumer)['allocations'][cn2][
        'resources'] == {'VCPU': 3}


def test_stale_explicit_generation_is_a_concurrent_update(client, world):
    consumer = claim(client, {world.uuids['cn4']: {'VCPU': 1}})
    with pytest.raises(exceptions.ConcurrentUpdate) as err:
        client.put_allocations(consumer, {world.uuids['cn4']: {'VCPU': 2}},
                               'proj', 'user', consumer_generation=None)
    assert err.value.status == 409
    assert err.value.code == 'placement.concurrent_update'


def test_aggregates_from_request_filters(client, world):
    # As nova's request filters add them: required or forbidden member_of.
    agg = str(uuid.uuid4())
    world.aggregate('cn1', agg)
    inside = rq.build_request(FLAVOR, {}, vcpus=1, member_of=[agg])
    outside = rq.build_request(FLAVOR, {}, vcpus=1, member_of=['!' + agg])
    outside_in = rq.build_request(FLAVOR, {}, vcpus=1,
                                  member_of=['!in:%s,%s' % (
                                      agg, uuid.uuid4())])
    assert hosts(world, client.get_allocation_candidates(inside)) == {'cn1'}
    assert hosts(world, client.get_allocation_candidates(outside)) == {'cn2'}
    assert hosts(world, client.get_allocation_candidates(outside_in)) == {
        'cn2'}
    with_image = rq.build_request(FLAVOR, IMAGE, vcpus=1,
                                  member_of=['!' + agg])
    assert hosts(world, client.get_allocation_candidates(with_image)) == set()


def test_root_required_from_request_filters(client, world):
    req = boot_request(FLAVOR)
    req.add_root_trait('!' + TRUSTED)
    assert hosts(world, client.get_allocation_candidates(req)) == {'cn2'}
    req = boot_request(image=IMAGE)
    req.add_root_trait('!COMPUTE_STATUS_DISABLED')
    assert hosts(world, client.get_allocation_candidates(req)) == {
        'cn1', 'cn3'}


# -- rebuild pre-flight check ----------------------------------------------

def test_rebuild_check_passes_when_host_has_the_traits(client, world):
    consumer = claim(client, {world.uuids['cn1']: {'VCPU': 1}})
    result = rebuild.rebuild_check(
        client, consumer, {'trait:%s' % TRUSTED: 'required',
                           'trait:%s' % AVX2: 'required'})
    assert result.passed
    assert result.missing == set()


def test_rebuild_check_fails_and_lists_missing_traits(client, world):
    consumer = claim(client, {world.uuids['cn2']: {'VCPU': 1}})
    result = rebuild.rebuild_check(
        client, consumer, {'trait:%s' % TRUSTED: 'required',
                           'trait:%s' % AVX2: 'required',
                           'trait:CUSTOM_GOLD': 'required'})
    assert not result.passed
    assert result.missing == {TRUSTED, 'CUSTOM_GOLD'}


def test_rebuild_check_nested_trait_on_unused_child_fails(client, world):
    # The instance's VF comes from the plain NIC; the offload NIC in the
    # same tree has the trait, but the instance does not use it.
    consumer = claim(client, {world.uuids['cn5']: {'VCPU': 1},
                              world.uuids['pf_plain']: {'SRIOV_NET_VF': 1}})
    result = rebuild.rebuild_check(client, consumer,
                                   {'trait:%s' % OFFLOAD: 'required'})
    assert not result.passed
    assert result.missing == {OFFLOAD}
    assert world.names(result.provider_traits) == {'cn5', 'pf_plain'}


def test_rebuild_check_nested_trait_on_used_child_passes(client, world):
    consumer = claim(client, {world.uuids['cn5']: {'VCPU': 1},
                              world.uuids['pf_offload']: {'SRIOV_NET_VF': 1}})
    result = rebuild.rebuild_check(client, consumer,
                                   {'trait:%s' % OFFLOAD: 'required'})
    assert result.passed


def test_rebuild_check_unknown_consumer_fails(client, world):
    result = rebuild.rebuild_check(client, str(uuid.uuid4()), IMAGE)
    assert not result.passed
    assert result.missing == {TRUSTED}


def test_nested_candidates_by_numbered_group(client, world):
    req = rq.build_request({'resources1:SRIOV_NET_VF': '1',
                            'trait1:%s' % OFFLOAD: 'forbidden'}, {}, vcpus=1)
    cands = client.get_allocation_candidates(req)
    used = set()
    for i in range(len(cands)):
        used |= world.names(cands.providers(i))
    assert used == {'cn5', 'pf_plain'}


# -- the command ----------------------------------------------------------

def run(transport, argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv + ['--placement-url', URL, '--token', 'admin'],
                    session=_session(transport), out=out, err=err)
    if code == 3 and 'returned 501' in err.getvalue():
        pytest.skip('not built yet: %s' % err.getvalue())
    return code, out.getvalue(), err.getvalue()


def test_command_candidates_table_and_json(transport, world):
    argv = ['candidates', '--vcpus', '1', '--memory-mb', '512',
            '--flavor-spec', 'trait:%s=required' % AVX2,
            '--image-prop', 'trait:%s=required' % TRUSTED]
    code, out, err = run(transport, argv)
    assert code == 0, err
    assert out.startswith('GET /allocation_candidates?required=')
    assert 'candidate(s):' in out
    assert world.uuids['cn1'] in out and world.uuids['cn2'] not in out
    code, out, err = run(transport, argv + ['--format', 'json', '--limit',
                                            '10'])
    assert code == 0, err
    body = json.loads(out)
    assert 'limit=10' in body['query']
    assert [world.names(a['allocations'])
            for a in body['allocation_requests']
            if world.names(a['allocations'])] == [{'cn1'}]


def test_command_rebuild_check_exit_status(client, transport, world):
    plain = claim(client, {world.uuids['cn5']: {'VCPU': 1},
                           world.uuids['pf_plain']: {'SRIOV_NET_VF': 1}})
    offload = claim(client, {world.uuids['cn5']: {'VCPU': 1},
                             world.uuids['pf_offload']: {'SRIOV_NET_VF': 1}})
    image = ['--image-prop', 'trait:%s=required' % OFFLOAD]
    code, out, _err = run(transport, ['rebuild-check', '--consumer',
                                      offload] + image)
    assert (code, out.split(':')[0]) == (0, 'PASS')
    code, out, _err = run(transport, ['rebuild-check', '--consumer',
                                      plain] + image)
    assert code == 1
    assert out.startswith('FAIL: missing traits: %s' % OFFLOAD)


def test_placement_refuses_unknown_trait_through_the_command(transport,
                                                             world):
    code, _out, err = run(transport, [
        'candidates', '--vcpus', '1', '--image-prop',
        'trait:CUSTOM_NEVER_DEFINED=required'])
    assert code == 3
    assert 'CUSTOM_NEVER_DEFINED' in err


def _free_port():
    """A free loopback port in this suite's range (18600-18699)."""
    start = os.getpid() % 100
    for offset in range(100):
        port = 18600 + (start + offset) % 100
        with socket.socket() as sock:
            try:
                sock.bind(('127.0.0.1', port))
            except OSError:
                continue
            return port
    pytest.skip('no free port in 18600-18699')


def test_command_against_a_live_server():
    """The installed-style command, as its own process, over real HTTP."""
    from placement.tests.functional import live_server
    with live_server.LiveServer(workers=1, port=_free_port()) as server:
        c = SkipUnbuilt(server.url, token='admin')
        w = World(c)
        w.provider('live1', HOST_INVENTORY, [AVX2, TRUSTED])
        w.provider('live2', HOST_INVENTORY, [AVX2])
        consumer = claim(c, {w.uuids['live2']: {'VCPU': 1}})
        base = [sys.executable, '-m', 'placement_request.cli']
        auth = ['--placement-url', server.url, '--token', 'admin']
        proc = subprocess.run(base + [
            'candidates', '--vcpus', '1', '--flavor-spec',
            'trait:%s=required' % AVX2, '--image-prop',
            'trait:%s=required' % TRUSTED, '--format', 'json'] + auth,
            capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        body = json.loads(proc.stdout)
        assert [list(a['allocations']) for a in body[
            'allocation_requests']] == [[w.uuids['live1']]]
        proc = subprocess.run(base + [
            'rebuild-check', '--consumer', consumer, '--image-prop',
            'trait:%s=required' % TRUSTED] + auth,
            capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert 'missing traits: %s' % TRUSTED in proc.stdout
