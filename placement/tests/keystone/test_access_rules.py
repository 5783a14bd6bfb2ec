"""Application credentials with access rules.

Keystone checks a token's access rules only when the service validating
it says which service it is: keystonemiddleware sends that from
``[keystone_authtoken] service_type``. With ``service_type = placement``
a credential limited to ``GET /resource_providers`` can do exactly that;
without it every token bearing access rules is refused, even for the
allowed request. Placement must also be in the catalog under that type.
"""
import uuid

import pytest
import requests

from placement.tests.keystone import conftest as kc


@pytest.fixture(scope='module')
def restricted_token(keystone):
    """A token from an application credential of project-admin allowed
    only GET /resource_providers on placement."""
    user = keystone.users['project-admin']
    resp = requests.post(
        '%s/users/%s/application_credentials' % (keystone.auth_url,
                                                 user['id']),
        headers={'X-Auth-Token': keystone.token('project-admin')},
        json={'application_credential': {
            'name': 'list-providers-' + uuid.uuid4().hex[:8],
            'access_rules': [{'service': 'placement', 'method': 'GET',
                              'path': '/resource_providers'}]}},
        timeout=30)
    assert resp.status_code == 201, resp.text
    cred = resp.json()['application_credential']
    return keystone.issue({'auth': {'identity': {
        'methods': ['application_credential'],
        'application_credential': {'id': cred['id'],
                                   'secret': cred['secret']}}}})


@pytest.fixture(scope='module')
def with_service_type(keystone, placement_factory):
    """keystonemiddleware also wants its service_type in the token's
    catalog (a deployment's is always there), so this server is made the
    catalog's placement endpoint."""
    server = placement_factory(authtoken={'service_type': 'placement'})
    keystone.run('endpoint', server.url)
    return server


def test_allowed_request(with_service_type, restricted_token):
    resp = kc.call(with_service_type, 'GET', '/resource_providers',
                   restricted_token)
    assert resp.status_code == 200, resp.text


@pytest.mark.parametrize('method,path,body', [
    ('GET', '/traits', None),
    ('GET', '/resource_classes', None),
    ('GET', '/resource_providers/%s' % uuid.uuid4(), None),
    ('GET', '/allocation_candidates?resources=VCPU:1', None),
    ('POST', '/resource_providers', {'name': 'not-allowed'}),
    ('DELETE', '/traits/CUSTOM_X', None),
], ids=lambda v: v.replace(':', '=') if isinstance(v, str) else None)
def test_everything_else_refused(keystone, with_service_type,
                                 restricted_token, method, path, body):
    resp = kc.call(with_service_type, method, path, restricted_token,
                   json=body)
    assert resp.status_code == 401, resp.text
    assert resp.headers['WWW-Authenticate'].startswith('Keystone uri=')


def test_same_persona_unrestricted(keystone, with_service_type):
    """The refusals above are the credential's rules, not the user's
    roles: the same user's password token may do those things."""
    resp = kc.call(with_service_type, 'GET', '/traits',
                   keystone.token('project-admin'))
    assert resp.status_code == 200, resp.text


def test_without_service_type_refused(placement, restricted_token):
    resp = kc.call(placement, 'GET', '/resource_providers',
                   restricted_token)
    assert resp.status_code == 401, resp.text
