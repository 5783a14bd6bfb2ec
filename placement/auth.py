"""Authentication middleware: keystonemiddleware, or noauth2 for tests.

``GET /`` is always answered without a token, as upstream does, and so is
the web view's static content under ``/ui/`` (the page then calls the API
with the visitor's token). Paths in
``anonymous_paths`` (``/metrics`` when enabled) may come without a token:
they get an empty context (no user, no roles) and their policy rule
decides; with a token they are authenticated as usual. Which paths those
are is placement.public_paths, shared with placement.keystone_auth.
"""
from oslo_log import log as logging
from oslo_middleware import request_id
import webob.exc

from placement import context as placement_context
from placement import public_paths
from placement import util

LOG = logging.getLogger(__name__)


def _unauthorized():
    return util.http_error(webob.exc.HTTPUnauthorized)


class NoAuthMiddleware:
    """noauth2, for tests and trusted setups: mimic what auth_token leaves.

    The token names who is asking, ``user`` or ``user:project`` (project
    defaults to user). Roles come from ``X-Roles`` when given, as keystone
    would send them already expanded (admin does not imply reader here);
    otherwise the ``admin`` user is an admin and anyone else has no role.
    With ``OpenStack-System-Scope`` the token is system scoped, so no
    project is set; oslo.context reads the scope header itself.
    """

    def __init__(self, application, anonymous_paths=()):
        self.application = application
        self.anonymous_paths = anonymous_paths

    # Plain WSGI: webob's Request per middleware layer costs more than
    # what the layer does.
    def __call__(self, environ, start_response):
        if (public_paths.public(environ['PATH_INFO'])
                or public_paths.tokenless(environ, self.anonymous_paths)):
            return self.application(environ, start_response)
        token = environ.get('HTTP_X_AUTH_TOKEN')
        if token is None:
            return _unauthorized()(environ, start_response)
        user_id, _sep, project_id = token.partition(':')
        project_id = project_id or user_id
        if 'HTTP_X_ROLES' in environ:
            roles = environ['HTTP_X_ROLES'].split(',')
        elif user_id == 'admin':
            roles = ['admin']
        else:
            roles = []
        environ['HTTP_X_USER_ID'] = user_id
        if not environ.get('HTTP_OPENSTACK_SYSTEM_SCOPE'):
            environ['HTTP_X_TENANT_ID'] = project_id
        environ['HTTP_X_ROLES'] = ','.join(roles)
        return self.application(environ, start_response)


class KeystoneContext:
    """Make the RequestContext from the identity headers auth left."""

    def __init__(self, application, config):
        self.application = application
        self.config = config

    def __call__(self, environ, start_response):
        if (environ.get(public_paths.ENV_ANONYMOUS)
                or public_paths.is_ui(environ['PATH_INFO'])):
            # Identity headers of a token-less request are the client's
            # own words: none of them count (nor for the static web view,
            # which keystonemiddleware does not see).
            ctx = placement_context.RequestContext(
                request_id=environ.get(request_id.ENV_REQUEST_ID))
        else:
            ctx = placement_context.RequestContext.from_environ(
                environ, request_id=environ.get(request_id.ENV_REQUEST_ID))
        ctx.config = self.config
        if (ctx.user_id is None
                and not public_paths.public(environ['PATH_INFO'])
                and not environ.get(public_paths.ENV_ANONYMOUS)):
            LOG.debug('Neither X_USER_ID nor X_USER found in request')
            return _unauthorized()(environ, start_response)
        environ['placement.context'] = ctx
        return self.application(environ, start_response)


def keystone_auth(conf, anonymous_paths=()):
    """keystonemiddleware's auth_token, imported only when Keystone is
    the auth strategy: it and its clients add 0.3 s to a worker's start."""
    from placement import keystone_auth
    return keystone_auth.middleware(conf, anonymous_paths)
