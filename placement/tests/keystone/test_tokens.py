"""Tokens keystonemiddleware refuses or accepts, with real Keystone
tokens; and X-Service-Token as nova sends it.

A refusal is keystonemiddleware's own: 401 with ``WWW-Authenticate:
Keystone uri="..."`` naming ``www_authenticate_uri`` and its JSON body
``{"error": {"code": 401, "title": "Unauthorized", ...}}`` (as upstream).
"""
import pytest

from placement.tests.keystone import conftest as kc

PATH = '/resource_providers'


def _assert_401(keystone, resp):
    assert resp.status_code == 401, resp.text
    assert resp.headers['WWW-Authenticate'] == (
        'Keystone uri="%s"' % keystone.www_authenticate_uri)
    assert resp.json()['error']['code'] == 401


def test_root_needs_no_token(placement):
    resp = kc.call(placement, 'GET', '/')
    assert resp.status_code == 200
    assert resp.json()['versions'][0]['max_version'] == '1.39'


def test_no_token(keystone, placement):
    _assert_401(keystone, kc.call(placement, 'GET', PATH))


@pytest.mark.parametrize('token', ['garbage', 'gAAAAABn' + 'x' * 180, ''])
def test_garbage_token(keystone, placement, token):
    _assert_401(keystone, kc.call(placement, 'GET', PATH, token))


def test_valid_token(keystone, placement):
    resp = kc.call(placement, 'GET', PATH, keystone.token('nova'))
    assert resp.status_code == 200, resp.text


def test_expired_token(keystone, placement):
    token = keystone.expired_token('project-admin')
    _assert_401(keystone, kc.call(placement, 'GET', PATH, token))


def test_revoked_before_use(keystone, placement):
    token = keystone.new_token('project-admin')
    keystone.revoke(token)
    _assert_401(keystone, kc.call(placement, 'GET', PATH, token))


def test_revoked_after_use_stays_valid_while_cached(keystone, placement):
    """keystonemiddleware keeps a validated token for token_cache_time
    (300 s by default) and does not ask Keystone again meanwhile: a token
    revoked after its first use keeps working that long."""
    token = keystone.new_token('project-admin')
    assert kc.call(placement, 'GET', PATH, token).status_code == 200
    keystone.revoke(token)
    assert kc.call(placement, 'GET', PATH, token).status_code == 200


@pytest.fixture(scope='module')
def uncached(placement_factory):
    return placement_factory(authtoken={'token_cache_time': -1})


def test_revoked_after_use_without_cache(keystone, uncached):
    """With token_cache_time = -1 every request asks Keystone, and the
    revocation holds at once."""
    token = keystone.new_token('project-admin')
    assert kc.call(uncached, 'GET', PATH, token).status_code == 200
    keystone.revoke(token)
    _assert_401(keystone, kc.call(uncached, 'GET', PATH, token))


# -- X-Service-Token, as nova sends it with send_service_user_token ------

def test_service_token_does_not_lend_its_roles(keystone, placement):
    """The user's roles decide: a member's request stays refused by
    policy even with nova's valid service token beside it."""
    headers = {'X-Service-Token': keystone.token('nova')}
    member = keystone.token('project-member')
    resp = kc.call(placement, 'GET', PATH, member, headers=headers)
    assert resp.status_code == 403, resp.text
    resp = kc.call(placement, 'GET', '/usages?project_id=%s'
                   % keystone.projects['demo'], member, headers=headers)
    assert resp.status_code == 200, resp.text


def test_service_token_with_its_own_user_token(keystone, placement):
    nova = keystone.token('nova')
    resp = kc.call(placement, 'GET', PATH, nova,
                   headers={'X-Service-Token': nova})
    assert resp.status_code == 200, resp.text


def test_bad_service_token(keystone, placement):
    resp = kc.call(placement, 'GET', PATH, keystone.token('nova'),
                   headers={'X-Service-Token': 'garbage'})
    _assert_401(keystone, resp)


def test_service_token_without_service_role(keystone, placement):
    """service_token_roles_required (True) wants the service role in the
    service token: an admin's token there is refused."""
    resp = kc.call(placement, 'GET', PATH, keystone.token('nova'),
                   headers={'X-Service-Token':
                            keystone.token('project-admin')})
    _assert_401(keystone, resp)


def test_expired_user_token_with_service_token(keystone, placement):
    """What the service token is for: nova finishing a long operation
    after the user's token expired. With a service-role service token
    keystonemiddleware accepts the expired user token."""
    expired = keystone.expired_token('project-admin')
    resp = kc.call(placement, 'GET', PATH, expired,
                   headers={'X-Service-Token': keystone.token('nova')})
    assert resp.status_code == 200, resp.text
    _assert_401(keystone, kc.call(placement, 'GET', PATH, expired))


@pytest.mark.parametrize('path', ['/ui/', '/ui/ui.js', '/ui/session.js',
                                  '/ui/dom.js', '/ui/trees.js',
                                  '/ui/ui.css'])
def test_web_view_needs_no_token(placement, path):
    """The web view's static files are public; its data calls are not."""
    resp = kc.call(placement, 'GET', path)
    assert resp.status_code == 200, resp.text
    assert 'json' not in resp.headers['content-type']
