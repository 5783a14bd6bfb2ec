"""keystonemiddleware's auth_token, as the Keystone auth strategy uses
it (placement.auth.keystone_auth imports this module then only)."""
from keystoneauth1 import exceptions as ksa_exceptions
from keystonemiddleware import auth_token
from keystonemiddleware.auth_token import _exceptions as ksm_exceptions
import webob.exc

from placement import public_paths


class KeystoneAuth(auth_token.AuthProtocol):
    """keystonemiddleware's auth_token, except for ``GET /``."""

    def __init__(self, app, conf, anonymous_paths=()):
        self._placement_app = app
        self._anonymous_paths = anonymous_paths
        super().__init__(app, conf)

    def __call__(self, environ, start_response):
        if (public_paths.public(environ['PATH_INFO'])
                or public_paths.tokenless(environ,
                                          self._anonymous_paths)):
            return self._placement_app(environ, start_response)
        return super().__call__(environ, start_response)

    def fetch_token(self, token, **kwargs):
        """A Keystone that accepts the connection but does not answer
        within http_connect_timeout raises ConnectTimeout, which
        keystonemiddleware does not catch (it catches ConnectFailure, a
        sibling): answer it as the refused connection is answered, 503,
        instead of a 500."""
        try:
            return super().fetch_token(token, **kwargs)
        except ksa_exceptions.ConnectionError as e:
            self.log.critical('Unable to validate token: %s', e)
            if self._delay_auth_decision:
                raise ksm_exceptions.InvalidToken(
                    'Keystone unavailable: %s' % e)
            raise webob.exc.HTTPServiceUnavailable(
                'The Keystone service is temporarily unavailable.')


def middleware(conf, anonymous_paths=()):
    def wrap(app):
        return KeystoneAuth(app, {'oslo_config_config': conf},
                            anonymous_paths)
    return wrap
