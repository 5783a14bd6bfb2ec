"""Fixtures for the tests behind a live Keystone.

``keystone``: tools/keystone-server started once per session (and stopped
at the end when this session started it). ``placement_factory``: our
service under gunicorn with ``auth_strategy = keystone`` and
``[keystone_authtoken]`` written as the deployment guides write it.

Outside CI a Keystone that cannot be installed or started skips these
tests with the reason; under ``CI=true`` it fails them.
"""
import json
import os
import subprocess
import time

import pytest
import requests

from placement.tests.functional import live_server

REPO = live_server.REPO_ROOT
SERVER = os.path.join(REPO, 'tools', 'keystone-server')


class Keystone:
    """The running Keystone: personas, tokens, and the server script."""

    def __init__(self, auth_url, personas):
        self.auth_url = auth_url
        self.www_authenticate_uri = auth_url.rsplit('/v3', 1)[0] + '/'
        self.users = personas['users']
        self.projects = personas['projects']
        self._tokens = {}

    def run(self, *args):
        out = subprocess.run([SERVER] + list(args), capture_output=True,
                             text=True, timeout=900)
        if out.returncode:
            raise RuntimeError('keystone-server %s: exit %s\n%s%s' % (
                ' '.join(args), out.returncode, out.stdout, out.stderr))
        return out.stdout

    def password_auth(self, name):
        user = self.users[name]
        auth = {'identity': {'methods': ['password'], 'password': {'user': {
            'name': name, 'domain': {'id': 'default'},
            'password': user['password']}}}}
        if user['system']:
            auth['scope'] = {'system': {'all': True}}
        else:
            auth['scope'] = {'project': {'id': user['project_id']}}
        return {'auth': auth}

    def issue(self, body):
        """A new token for an auth request body (never cached here)."""
        resp = requests.post(self.auth_url + '/auth/tokens', json=body,
                             timeout=30)
        assert resp.status_code == 201, resp.text
        return resp.headers['X-Subject-Token']

    def new_token(self, name):
        return self.issue(self.password_auth(name))

    def token(self, name):
        """One token per persona for the session."""
        if name not in self._tokens:
            self._tokens[name] = self.new_token(name)
        return self._tokens[name]

    def revoke(self, token):
        resp = requests.delete(
            self.auth_url + '/auth/tokens',
            headers={'X-Auth-Token': self.token('system-admin'),
                     'X-Subject-Token': token}, timeout=30)
        assert resp.status_code == 204, resp.text

    def expired_token(self, name):
        user = self.users[name]
        return self.run('expired-token', user['id'],
                        user['project_id']).strip()


def _fail_or_skip(msg):
    if os.environ.get('CI', '').lower() == 'true':
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope='session')
def keystone():
    was_running = subprocess.run([SERVER, 'status']).returncode == 0
    out = subprocess.run([SERVER, 'start'], capture_output=True, text=True,
                         timeout=1200)
    if out.returncode:
        _fail_or_skip('tools/keystone-server start failed (exit %s):\n%s%s'
                      % (out.returncode, out.stdout, out.stderr[-3000:]))
    values = dict(line.split('=', 1) for line in out.stdout.splitlines()
                  if '=' in line)
    with open(values['PERSONAS']) as f:
        personas = json.load(f)
    yield Keystone(values['KEYSTONE_URL'], personas)
    if not was_running:
        subprocess.run([SERVER, 'stop'])


def authtoken_conf(ks, **extra):
    """[keystone_authtoken] as the install guides write it; no
    memcached_servers, so each worker keeps its own in-process cache."""
    conf = {
        'www_authenticate_uri': ks.www_authenticate_uri,
        'auth_url': ks.auth_url,
        'auth_type': 'password',
        'project_domain_name': 'Default',
        'user_domain_name': 'Default',
        'project_name': 'service',
        'username': 'placement',
        'password': ks.users['placement']['password'],
    }
    conf.update(extra)
    return conf


SECURE_RBAC = {'enforce_new_defaults': True, 'enforce_scope': True}
LEGACY = {'enforce_new_defaults': False, 'enforce_scope': False}


# A virtualenv with upstream openstack-placement installed: the same
# tests then run against upstream's service (to check the expectations
# written here, not to test our code). tools/run-keystone-tests --upstream
# makes one.
UPSTREAM_VENV = os.environ.get('PLACEMENT_KEYSTONE_UPSTREAM_VENV')


@pytest.fixture(scope='session')
def placement_factory(keystone, tmp_path_factory):
    """Start placement servers behind Keystone; all stopped at the end.

    One gunicorn worker, so that every request meets the same token cache.
    """
    servers = []
    where = {}
    if UPSTREAM_VENV:
        where = {'gunicorn': os.path.join(UPSTREAM_VENV, 'bin', 'gunicorn'),
                 'cwd': str(tmp_path_factory.mktemp('upstream'))}

    def start(authtoken=None, policy=None, workers=1):
        conf = {'api': {'auth_strategy': 'keystone'},
                'keystone_authtoken': authtoken_conf(keystone,
                                                     **(authtoken or {})),
                'oslo_policy': dict(policy or SECURE_RBAC)}
        server = live_server.LiveServer(workers=workers, conf=conf, **where)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope='session')
def placement(placement_factory):
    """The default server: secure-RBAC defaults, keystonemiddleware's own
    defaults for everything not in the install guide."""
    return placement_factory()


def call(server, method, path, token=None, version='latest', json=None,
         headers=None):
    hdrs = {'accept': 'application/json',
            'openstack-api-version': 'placement %s' % version}
    if token is not None:
        hdrs['x-auth-token'] = token
    hdrs.update(headers or {})
    start = time.monotonic()
    resp = requests.request(method, server.url + path, headers=hdrs,
                            json=json, timeout=60)
    resp.elapsed_s = time.monotonic() - start
    return resp
