"""The requests that may come without a token, as both auth strategies
(placement.auth's noauth2, placement.keystone_auth's Keystone) answer
them: ``GET /`` and the web view's static content are public; the
deployment's ``anonymous_paths`` (``/metrics`` when enabled) are let
through token-less, marked anonymous for their policy rule to decide."""

ENV_ANONYMOUS = 'placement.anonymous'

# The web view's static files (placement/handlers/ui.py): no data in them.
UI_PATH = '/ui'


def is_ui(path):
    return path == UI_PATH or path.startswith(UI_PATH + '/')


def public(path):
    """True for the paths anyone may GET without a token."""
    return path in ('/', '') or is_ui(path)


def tokenless(environ, anonymous_paths):
    """Mark an allowed token-less request as anonymous; True if so."""
    if (environ.get('PATH_INFO') in anonymous_paths
            and 'HTTP_X_AUTH_TOKEN' not in environ
            and 'HTTP_X_STORAGE_TOKEN' not in environ):
        environ[ENV_ANONYMOUS] = True
        return True
    return False
