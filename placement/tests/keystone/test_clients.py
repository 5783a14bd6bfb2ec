"""The real clients with password authentication: they log in to
Keystone, find placement in its catalog and send the token.

``openstack`` (python-openstackclient with osc-placement) lives in
.keystone-venv; ``placement-request`` is this project's.
"""
import json
import os
import subprocess
import sys
import uuid

import pytest

from placement.tests.keystone import conftest as kc

OPENSTACK = os.path.join(kc.REPO, '.keystone-venv', 'bin', 'openstack')
PLACEMENT_REQUEST = os.path.join(os.path.dirname(sys.executable),
                                 'placement-request')


@pytest.fixture(scope='module')
def catalogued(keystone, placement_factory):
    """A server registered as the catalog's placement endpoint, with one
    provider of 4 VCPU."""
    server = placement_factory()
    keystone.run('endpoint', server.url)
    name = 'client-rp-' + uuid.uuid4().hex[:8]
    rp = str(uuid.uuid4())
    token = keystone.token('nova')
    assert kc.call(server, 'POST', '/resource_providers', token,
                   json={'name': name, 'uuid': rp}).status_code == 200
    resp = kc.call(server, 'PUT', '/resource_providers/%s/inventories' % rp,
                   token, json={'resource_provider_generation': 0,
                                'inventories': {'VCPU': {'total': 4}}})
    assert resp.status_code == 200, resp.text
    return server, rp, name


def _os_env(keystone, persona):
    user = keystone.users[persona]
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env.update({
        'OS_AUTH_URL': keystone.auth_url, 'OS_IDENTITY_API_VERSION': '3',
        'OS_USERNAME': persona, 'OS_PASSWORD': user['password'],
        'OS_PROJECT_NAME': user['project'],
        'OS_USER_DOMAIN_NAME': 'Default', 'OS_PROJECT_DOMAIN_NAME': 'Default',
        'OS_REGION_NAME': 'RegionOne', 'OS_INTERFACE': 'public',
    })
    return env


def _run(cmd, env):
    return subprocess.run(cmd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_openstack_resource_provider_list(keystone, catalogued):
    _server, rp, name = catalogued
    out = _run([OPENSTACK, 'resource', 'provider', 'list', '-f', 'json'],
               _os_env(keystone, 'project-admin'))
    assert out.returncode == 0, out.stderr
    rows = {row['uuid']: row['name'] for row in json.loads(out.stdout)}
    assert rows[rp] == name


def test_openstack_refused_by_policy(keystone, catalogued):
    out = _run([OPENSTACK, 'resource', 'provider', 'list'],
               _os_env(keystone, 'project-member'))
    assert out.returncode != 0
    assert 'HTTP 403' in out.stderr or '403' in out.stderr, out.stderr


def test_placement_request_password_login(keystone, catalogued):
    _server, rp, _name = catalogued
    env = _os_env(keystone, 'nova')
    env.pop('PLACEMENT_URL', None)
    out = _run([PLACEMENT_REQUEST, 'candidates', '--format', 'json',
                '--vcpus', '2'], env)
    assert out.returncode == 0, out.stderr
    assert rp in out.stdout


def test_placement_request_token(keystone, catalogued):
    server, rp, _name = catalogued
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    out = _run([PLACEMENT_REQUEST, 'candidates', '--placement-url',
                server.url, '--os-token', keystone.token('nova'),
                '--format', 'json', '--vcpus', '2'], env)
    assert out.returncode == 0, out.stderr
    assert rp in out.stdout
    out = _run([PLACEMENT_REQUEST, 'candidates', '--placement-url',
                server.url, '--os-token', 'garbage', '--vcpus', '2'], env)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert '401' in out.stderr + out.stdout
