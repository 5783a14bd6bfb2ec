"""placement_request's client, rebuild check and command against a fake
HTTP layer: what is sent, and how answers and errors are handled."""
import io
import json
import urllib.parse

import pytest
import requests

from placement_request import cli
from placement_request import client as pr_client
from placement_request import exceptions
from placement_request import rebuild
from placement_request import request as rq

URL = 'http://placement.test'
CN1 = 'c0000000-0000-4000-8000-000000000001'
CN2 = 'c0000000-0000-4000-8000-000000000002'
PF1 = 'f0000000-0000-4000-8000-000000000001'
PF2 = 'f0000000-0000-4000-8000-000000000002'
CONSUMER = 'a0000000-0000-4000-8000-00000000000a'


class FakePlacement(requests.adapters.BaseAdapter):
    """A requests transport answering from ``routes``: (method, path) ->
    callable(request) -> (status, body) or a list of such answers served
    in turn. Every request is recorded."""

    def __init__(self, max_version='1.39'):
        super().__init__()
        self.calls = []
        self.routes = {('GET', '/'): (200, {'versions': [{
            'id': 'v1.0', 'max_version': max_version,
            'min_version': '1.0', 'status': 'CURRENT'}]})}

    def session(self):
        sess = requests.Session()
        sess.mount(URL, self)
        return sess

    def send(self, request, **kwargs):
        parsed = urllib.parse.urlsplit(request.url)
        body = json.loads(request.body) if request.body else None
        self.calls.append((request.method, parsed.path, parsed.query,
                           dict(request.headers), body))
        answer = self.routes.get((request.method, parsed.path),
                                 (404, {'errors': [{
                                     'status': 404, 'code':
                                     'placement.undefined_code',
                                     'detail': 'not found', 'title': 'x'}]}))
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if callable(answer):
            answer = answer(request)
        status, payload = answer
        resp = requests.Response()
        resp.status_code = status
        resp.url = request.url
        resp.request = request
        resp._content = (json.dumps(payload).encode()
                         if payload is not None else b'')
        resp.headers['Content-Type'] = 'application/json'
        return resp

    def close(self):
        pass

    def paths(self, method=None):
        return [(m, p) for m, p, *_ in self.calls
                if method is None or m == method]


def error(status, code, detail):
    return (status, {'errors': [{'status': status, 'code': code,
                                 'detail': detail, 'title': 'Conflict'}]})


def candidates_body():
    return {
        'allocation_requests': [
            {'allocations': {CN1: {'resources': {'VCPU': 1}}},
             'mappings': {'': [CN1]}},
            {'allocations': {CN2: {'resources': {'VCPU': 1}},
                             PF2: {'resources': {'SRIOV_NET_VF': 1}}}}],
        'provider_summaries': {
            CN1: {'resources': {}, 'traits': ['HW_CPU_X86_AVX2'],
                  'root_provider_uuid': CN1, 'parent_provider_uuid': None},
            CN2: {'resources': {}, 'traits': [], 'root_provider_uuid': CN2,
                  'parent_provider_uuid': None},
            PF2: {'resources': {}, 'traits': ['CUSTOM_NIC'],
                  'root_provider_uuid': CN2, 'parent_provider_uuid': CN2}}}


@pytest.fixture
def fake():
    return FakePlacement()


def make(fake, **kw):
    return pr_client.PlacementClient(URL, token='admin',
                                     session=fake.session(), **kw)


# -- client --------------------------------------------------------------

def test_negotiates_newest_common_version_once(fake):
    fake.routes[('GET', '/')] = (200, {'versions': [{'max_version': '1.36'}]})
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    client = make(fake)
    req = rq.build_request({'trait:HW_CPU_X86_AVX2': 'required'},
                           {'trait:CUSTOM_TRUSTED_HOST': 'required'}, vcpus=1)
    cands = client.get_allocation_candidates(req, limit=2)
    client.get_allocation_candidates(req)
    assert fake.paths() == [('GET', '/'), ('GET', '/allocation_candidates'),
                            ('GET', '/allocation_candidates')]
    _m, _p, query, headers, _b = fake.calls[1]
    assert query == req.to_querystring('1.36', 2) == cands.query
    assert headers['OpenStack-API-Version'] == 'placement 1.36'
    assert headers['X-Auth-Token'] == 'admin'
    assert 'OpenStack-API-Version' not in fake.calls[0][3]
    assert cands.microversion == (1, 36)
    assert len(cands) == 2
    assert cands.roots(1) == {CN2}
    assert cands.providers(1) == {CN2: {'VCPU': 1},
                                  PF2: {'SRIOV_NET_VF': 1}}


def test_old_list_shaped_allocation_requests():
    cands = pr_client.Candidates('q', (1, 10), {'allocation_requests': [
        {'allocations': [{'resource_provider': {'uuid': CN1},
                          'resources': {'VCPU': 1}}]}]})
    assert cands.providers(0) == {CN1: {'VCPU': 1}}
    assert cands.roots(0) == {CN1}


def test_fixed_microversion_refuses_before_sending(fake):
    client = make(fake, microversion='1.16')
    req = rq.build_request({'trait:CUSTOM_X': 'required'}, {}, vcpus=1)
    with pytest.raises(exceptions.UnsupportedByMicroversion):
        client.get_allocation_candidates(req)
    assert fake.calls == []


def test_http_error_carries_code_and_detail(fake):
    fake.routes[('GET', '/allocation_candidates')] = error(
        400, 'placement.undefined_code', "No such trait(s): CUSTOM_NOPE.")
    client = make(fake, microversion='1.39')
    with pytest.raises(exceptions.PlacementHTTPError) as err:
        client.get_allocation_candidates(
            rq.build_request({'trait:CUSTOM_NOPE': 'required'}, {}, vcpus=1))
    assert err.value.status == 400
    assert err.value.detail == 'No such trait(s): CUSTOM_NOPE.'
    assert 'returned 400' in str(err.value)


def test_non_json_error_body(fake):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = lambda r: (502, None)
    with pytest.raises(exceptions.PlacementHTTPError) as err:
        make(fake, microversion='1.39').get_allocations(CONSUMER)
    assert err.value.status == 502


def test_not_placement_root(fake):
    fake.routes[('GET', '/')] = (200, {'hello': 'world'})
    with pytest.raises(exceptions.RequestBuilderError):
        make(fake).microversion


def _allocs(generation):
    return (200, {'allocations': {}, 'consumer_generation': generation})


def test_put_allocations_reads_generation_and_sends_type(fake):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = _allocs(None)
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = (204, None)
    client = make(fake, microversion='1.39')
    cands = pr_client.Candidates('q', (1, 39), candidates_body())
    assert client.claim(CONSUMER, cands, 0, 'proj', 'user') == 1
    body = fake.calls[-1][4]
    assert body == {'allocations': {CN1: {'resources': {'VCPU': 1}}},
                    'project_id': 'proj', 'user_id': 'user',
                    'consumer_generation': None,
                    'consumer_type': 'INSTANCE'}


def test_put_allocations_before_consumer_types(fake):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = _allocs(3)
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = (204, None)
    make(fake, microversion='1.37').put_allocations(
        CONSUMER, {CN1: {'VCPU': 2}}, 'p', 'u')
    body = fake.calls[-1][4]
    assert 'consumer_type' not in body
    assert body['consumer_generation'] == 3
    assert body['allocations'] == {CN1: {'resources': {'VCPU': 2}}}


def test_put_allocations_retries_concurrent_update(fake):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = [
        _allocs(None), _allocs(1)]
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = [
        error(409, 'placement.concurrent_update', 'consumer generation '
              'conflict - expected null but got 1'), (204, None)]
    tries = make(fake, microversion='1.39').put_allocations(
        CONSUMER, {CN1: {'VCPU': 1}}, 'p', 'u')
    assert tries == 2
    puts = [c for c in fake.calls if c[0] == 'PUT']
    assert [p[4]['consumer_generation'] for p in puts] == [None, 1]


def test_put_allocations_gives_up_after_retries(fake):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = _allocs(1)
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = error(
        409, 'placement.concurrent_update', 'busy')
    with pytest.raises(exceptions.ConcurrentUpdate) as err:
        make(fake, microversion='1.39', retries=2).put_allocations(
            CONSUMER, {CN1: {'VCPU': 1}}, 'p', 'u')
    assert err.value.status == 409
    assert len(fake.paths('PUT')) == 3


def test_put_allocations_does_not_retry_other_conflicts(fake):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = _allocs(None)
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = error(
        409, 'placement.undefined_code', 'Unable to allocate inventory')
    with pytest.raises(exceptions.PlacementHTTPError) as err:
        make(fake, microversion='1.39').put_allocations(
            CONSUMER, {CN1: {'VCPU': 1}}, 'p', 'u')
    assert not isinstance(err.value, exceptions.ConcurrentUpdate)
    assert len(fake.paths('PUT')) == 1


def test_put_allocations_explicit_generation_tries_once(fake):
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = error(
        409, 'placement.concurrent_update', 'stale')
    with pytest.raises(exceptions.ConcurrentUpdate):
        make(fake, microversion='1.39').put_allocations(
            CONSUMER, {CN1: {'VCPU': 1}}, 'p', 'u', consumer_generation=None)
    assert fake.paths() == [('PUT', '/allocations/%s' % CONSUMER)]


def test_put_allocations_refused_before_consumer_generations(fake):
    with pytest.raises(exceptions.UnsupportedByMicroversion):
        make(fake, microversion='1.27').put_allocations(
            CONSUMER, {CN1: {'VCPU': 1}}, 'p', 'u')
    assert fake.calls == []


# -- rebuild check -------------------------------------------------------

def _world(fake, allocations):
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = (200, {
        'allocations': {rp: {'resources': {'VCPU': 1}, 'generation': 1}
                        for rp in allocations},
        'consumer_generation': 1, 'project_id': 'p', 'user_id': 'u'})
    traits = {CN1: ['HW_CPU_X86_AVX2', 'CUSTOM_TRUSTED_HOST'],
              PF1: [], PF2: ['CUSTOM_NIC_OFFLOAD']}
    for rp, names in traits.items():
        fake.routes[('GET', '/resource_providers/%s/traits' % rp)] = (
            200, {'traits': names, 'resource_provider_generation': 1})


def test_rebuild_check_pass(fake):
    _world(fake, [CN1, PF1])
    result = rebuild.rebuild_check(make(fake, microversion='1.39'), CONSUMER,
                                   {'trait:CUSTOM_TRUSTED_HOST': 'required'})
    assert result.passed and bool(result)
    assert result.missing == set()
    assert result.explain().startswith('PASS')
    assert sorted(fake.paths())[0] == ('GET', '/allocations/%s' % CONSUMER)
    assert len(fake.paths()) == 3


def test_rebuild_check_fail_lists_missing(fake):
    _world(fake, [CN1])
    result = rebuild.rebuild_check(
        make(fake, microversion='1.39'), CONSUMER,
        {'trait:CUSTOM_TRUSTED_HOST': 'required',
         'trait:CUSTOM_GOLD': 'required', 'trait:CUSTOM_SILVER': 'required'})
    assert not result.passed
    assert result.missing == {'CUSTOM_GOLD', 'CUSTOM_SILVER'}
    assert 'CUSTOM_GOLD, CUSTOM_SILVER' in result.explain()
    assert result.as_dict()['result'] == 'fail'


def test_rebuild_check_nested_trait_on_unused_sibling_fails(fake):
    # The consumer's VF comes from PF1; the offload trait is on PF2.
    _world(fake, [CN1, PF1])
    result = rebuild.rebuild_check(make(fake, microversion='1.39'), CONSUMER,
                                   {'trait:CUSTOM_NIC_OFFLOAD': 'required'})
    assert result.missing == {'CUSTOM_NIC_OFFLOAD'}
    assert ('GET', '/resource_providers/%s/traits' % PF2) not in fake.paths()


def test_rebuild_check_nested_trait_on_used_child_passes(fake):
    _world(fake, [CN1, PF2])
    result = rebuild.rebuild_check(
        make(fake, microversion='1.39'), CONSUMER,
        {'trait:CUSTOM_NIC_OFFLOAD': 'required',
         'trait:HW_CPU_X86_AVX2': 'required'})
    assert result.passed


def test_rebuild_check_without_allocations_fails(fake):
    _world(fake, [])
    result = rebuild.rebuild_check(make(fake, microversion='1.39'), CONSUMER,
                                   {'trait:CUSTOM_TRUSTED_HOST': 'required'})
    assert not result.passed
    assert 'holds no allocations' in result.explain()


def test_rebuild_check_image_without_traits_asks_nothing(fake):
    result = rebuild.rebuild_check(make(fake, microversion='1.39'), CONSUMER,
                                   {'hw_disk_bus': 'scsi',
                                    'trait1:CUSTOM_X': 'required'})
    assert result.passed
    assert fake.calls == []
    assert len(result.warnings) == 1


# -- command -------------------------------------------------------------

def run(argv, fake=None):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, session=fake.session() if fake else None,
                    out=out, err=err)
    return code, out.getvalue(), err.getvalue()


AUTH = ['--placement-url', URL, '--token', 'admin']


def test_cli_query_only_needs_no_server():
    code, out, err = run([
        'candidates', '--vcpus', '2', '--flavor-spec',
        'trait:HW_CPU_X86_AVX2=required', '--image-prop',
        'trait:CUSTOM_TRUSTED_HOST=required', '--query-only', '--limit', '3'])
    assert code == 0, err
    assert out.splitlines() == [
        'GET /allocation_candidates?limit=3&required=CUSTOM_TRUSTED_HOST'
        '%2CHW_CPU_X86_AVX2&resources=VCPU%3A2', 'microversion: 1.17']


def test_cli_query_only_json_at_chosen_version():
    code, out, _err = run([
        'candidates', '--vcpus', '1', '--query-only', '--format', 'json',
        '--os-placement-api-version', '1.30'])
    assert code == 0
    assert json.loads(out) == {'query': 'resources=VCPU%3A1',
                               'microversion': '1.30'}


def test_cli_candidates_table(fake):
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    code, out, err = run(['candidates', '--vcpus', '1'] + AUTH, fake)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == 'GET /allocation_candidates?resources=VCPU%3A1'
    assert 'decoded: resources=VCPU:1; microversion 1.39' in lines[1]
    assert lines[2] == '2 candidate(s):'
    assert lines[3].split() == ['#', 'ROOT', 'PROVIDER', 'PROVIDER',
                                'RESOURCES', 'TRAITS']
    assert lines[5].split() == ['1', CN1, CN1, 'VCPU=1', 'HW_CPU_X86_AVX2']
    assert lines[7].split() == ['2', CN2, PF2, 'SRIOV_NET_VF=1',
                                'CUSTOM_NIC']


def test_cli_candidates_json_and_claim(fake):
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    fake.routes[('GET', '/allocations/%s' % CONSUMER)] = _allocs(None)
    fake.routes[('PUT', '/allocations/%s' % CONSUMER)] = (204, None)
    code, out, err = run(['candidates', '--vcpus', '1', '--format', 'json',
                          '--claim', CONSUMER, '--candidate', '2',
                          '--project-id', 'p', '--user-id', 'u'] + AUTH, fake)
    assert code == 0, err
    body = json.loads(out)
    assert body['query'] == 'resources=VCPU%3A1'
    assert len(body['allocation_requests']) == 2
    assert body['claimed']['allocations'] == {
        CN2: {'VCPU': 1}, PF2: {'SRIOV_NET_VF': 1}}
    assert set(fake.calls[-1][4]['allocations']) == {CN2, PF2}


def test_cli_no_candidates(fake):
    fake.routes[('GET', '/allocation_candidates')] = (200, {
        'allocation_requests': [], 'provider_summaries': {}})
    code, out, _err = run(['candidates', '--vcpus', '1'] + AUTH, fake)
    assert code == 0
    assert 'No allocation candidates.' in out


@pytest.mark.parametrize('extra,fragment', [
    (['--flavor-spec', 'trait:CUSTOM_X=maybe'], "'trait:CUSTOM_X'"),
    (['--flavor-spec', 'trait:CUSTOM_X'], 'expected KEY=VALUE'),
    (['--flavor-spec', 'resources:VCPU=1', '--flavor-spec',
      'resources:VCPU=2'], 'given more than once'),
    (['--image-prop', 'trait:CUSTOM_X=forbidden'], 'image property'),
    (['--flavor-spec', 'trait:CUSTOM_X=forbidden',
      '--image-prop', 'trait:CUSTOM_X=required'], 'flavor forbids'),
    (['--member-of', 'in:nope'], 'not an aggregate UUID'),
    (['--os-placement-api-version', '1.16', '--flavor-spec',
      'trait:CUSTOM_X=required'], 'needs placement microversion 1.17'),
    (['--os-placement-api-version', 'x'], 'Invalid microversion'),
    (['--claim', CONSUMER], 'needs --project-id and --user-id'),
], ids=lambda v: str(v).replace(':', '.')[:30])
def test_cli_invalid_input_exits_2(fake, extra, fragment):
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    code, _out, err = run(['candidates', '--vcpus', '1'] + AUTH + extra,
                          fake)
    assert code == 2
    assert err.startswith('ERROR: ')
    assert fragment in err


def test_cli_candidate_index_out_of_range(fake):
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    code, _out, err = run(['candidates', '--vcpus', '1', '--claim', CONSUMER,
                           '--project-id', 'p', '--user-id', 'u',
                           '--candidate', '3'] + AUTH, fake)
    assert code == 2
    assert 'there are 2 candidate(s), asked for #3' in err


def test_cli_placement_error_exits_3(fake):
    fake.routes[('GET', '/allocation_candidates')] = error(
        400, 'placement.undefined_code', 'No such trait(s): CUSTOM_X.')
    code, _out, err = run(['candidates', '--vcpus', '1', '--flavor-spec',
                           'trait:CUSTOM_X=required'] + AUTH, fake)
    assert code == 3
    assert 'No such trait(s): CUSTOM_X.' in err


def test_cli_unreachable_exits_3():
    code, _out, err = run(['candidates', '--vcpus', '1', '--placement-url',
                           'http://127.0.0.1:9', '--token', 'admin',
                           '--timeout', '2'])
    assert code == 3
    assert 'cannot reach placement' in err


def test_cli_rebuild_check_pass_and_fail(fake):
    _world(fake, [CN1, PF1])
    base = ['rebuild-check', '--consumer', CONSUMER] + AUTH
    code, out, _err = run(base + ['--image-prop',
                                  'trait:CUSTOM_TRUSTED_HOST=required'], fake)
    assert code == 0
    assert out.startswith('PASS')
    assert CN1 in out
    code, out, _err = run(base + ['--image-prop',
                                  'trait:CUSTOM_NIC_OFFLOAD=required',
                                  '--format', 'json'], fake)
    assert code == 1
    assert json.loads(out)['missing_traits'] == ['CUSTOM_NIC_OFFLOAD']


def test_cli_rebuild_check_warns_on_numbered_image_trait(fake):
    code, out, err = run(['rebuild-check', '--consumer', CONSUMER] + AUTH
                         + ['--image-prop', 'trait1:CUSTOM_X=required'], fake)
    assert code == 0
    assert 'WARNING: Ignoring image property trait1:CUSTOM_X' in err
    assert 'requires no traits' in out


def test_cli_keystone_token_mode_sends_the_token(fake):
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    code, _out, err = run(['candidates', '--vcpus', '1', '--placement-url',
                           URL, '--os-token', 'gAAAA-token'], fake)
    assert code == 0, err
    assert all(c[3]['X-Auth-Token'] == 'gAAAA-token' for c in fake.calls)


def test_cli_keystone_without_credentials(fake, monkeypatch):
    for name in ('OS_TOKEN', 'OS_AUTH_URL', 'PLACEMENT_NOAUTH_TOKEN'):
        monkeypatch.delenv(name, raising=False)
    code, _out, err = run(['candidates', '--vcpus', '1', '--placement-url',
                           URL, '--auth-strategy', 'keystone'], fake)
    assert code == 2
    assert 'keystone needs --os-token' in err


def test_cli_needs_an_endpoint(monkeypatch):
    for name in ('PLACEMENT_URL', 'OS_PLACEMENT_ENDPOINT'):
        monkeypatch.delenv(name, raising=False)
    code, _out, err = run(['candidates', '--vcpus', '1', '--token', 'admin'])
    assert code == 2
    assert '--placement-url' in err


def test_cli_keystone_password_mode(fake, monkeypatch):
    seen = {}

    def fake_keystone(auth_url, **kw):
        seen.update(kw, auth_url=auth_url)
        return 'ks-token', URL

    monkeypatch.setattr(pr_client, 'keystone_token', fake_keystone)
    monkeypatch.delenv('PLACEMENT_URL', raising=False)
    fake.routes[('GET', '/allocation_candidates')] = (200, candidates_body())
    code, _out, err = run([
        'candidates', '--vcpus', '1', '--os-auth-url', 'http://ks/v3',
        '--os-username', 'admin', '--os-password', 'secret',
        '--os-project-name', 'admin'], fake)
    assert code == 0, err
    assert seen['auth_url'] == 'http://ks/v3'
    assert seen['username'] == 'admin'
    assert seen['user_domain_name'] == 'Default'
    assert fake.calls[-1][3]['X-Auth-Token'] == 'ks-token'


def test_package_does_not_import_the_server():
    import subprocess
    import sys
    code = ('import sys, placement_request.cli, placement_request.rebuild; '
            'sys.exit(any(m == "placement" or m.startswith("placement.") '
            'for m in sys.modules))')
    assert subprocess.run([sys.executable, '-c', code]).returncode == 0


class FakeKeystone(FakePlacement):
    """Just enough identity v3 for a password login and a catalog."""

    def __init__(self):
        super().__init__()
        self.routes = {
            ('GET', '/v3'): (200, {'version': {
                'id': 'v3.14', 'status': 'stable', 'links': [
                    {'rel': 'self', 'href': 'http://keystone.test/v3/'}]}}),
            ('POST', '/v3/auth/tokens'): self._token}

    def _token(self, request):
        body = json.loads(request.body)
        password = body['auth']['identity']['password']['user']
        if password['password'] != 'secret':
            return 401, {'error': {'code': 401, 'message': 'bad',
                                   'title': 'Unauthorized'}}
        return 201, {'token': {
            'methods': ['password'], 'expires_at': '2099-01-01T00:00:00Z',
            'issued_at': '2020-01-01T00:00:00Z',
            'user': {'id': 'u1', 'name': password['name'],
                     'domain': {'id': 'default', 'name': 'Default'}},
            'project': {'id': 'p1', 'name': 'admin',
                        'domain': {'id': 'default', 'name': 'Default'}},
            'roles': [{'id': 'r1', 'name': 'admin'}],
            'catalog': [{'type': 'placement', 'name': 'placement',
                         'id': 's1', 'endpoints': [
                             {'id': 'e1', 'interface': 'public',
                              'region': 'RegionOne',
                              'region_id': 'RegionOne', 'url': URL}]}]}}

    def send(self, request, **kwargs):
        resp = super().send(request, **kwargs)
        if request.method == 'POST' and resp.status_code == 201:
            resp.headers['X-Subject-Token'] = 'ks-issued-token'
        return resp


def test_keystone_password_login_finds_placement_in_catalog():
    fake = FakeKeystone()
    sess = requests.Session()
    sess.mount('http://keystone.test', fake)
    token, endpoint = pr_client.keystone_token(
        'http://keystone.test/v3', username='admin', password='secret',
        project_name='admin', requests_session=sess)
    assert (token, endpoint) == ('ks-issued-token', URL)
    login = [c for c in fake.calls if c[0] == 'POST'][0][4]
    user = login['auth']['identity']['password']['user']
    assert user['domain'] == {'name': 'Default'}
    assert login['auth']['scope']['project']['name'] == 'admin'


def test_keystone_password_login_failure_is_a_clear_error():
    fake = FakeKeystone()
    sess = requests.Session()
    sess.mount('http://keystone.test', fake)
    with pytest.raises(exceptions.RequestBuilderError) as err:
        pr_client.keystone_token(
            'http://keystone.test/v3', username='admin', password='wrong',
            project_name='admin', requests_session=sess)
    assert 'keystone authentication at http://keystone.test/v3 failed' in (
        str(err.value))
