"""The fault barrier: no exception and no traceback ever reaches a client.

A lost database answers 503 (retry later), anything else 500, both in
upstream's JSON error format with the request id, and logged here.
"""
from oslo_db import exception as db_exc
from oslo_log import log as logging
import webob.dec
import webob.exc

from placement import util

LOG = logging.getLogger(__name__)

DB_UNAVAILABLE_MSG = ('The placement database is unavailable. '
                      'Please retry in a moment.')


def is_db_unavailable(exc):
    return isinstance(exc, (db_exc.DBConnectionError,)) or (
        isinstance(exc, db_exc.DBError)
        and 'connect' in str(exc).lower())


class FaultWrapper:

    def __init__(self, application):
        self.application = application

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            return req.get_response(self.application)
        except Exception as exc:  # noqa: BLE001 - this is the barrier
            if is_db_unavailable(exc):
                LOG.warning('Database unavailable: %s', exc)
                return util.http_error(webob.exc.HTTPServiceUnavailable,
                                       DB_UNAVAILABLE_MSG)
            LOG.exception('Unhandled error while serving %s %s',
                          req.method, req.path)
            return util.http_error(
                webob.exc.HTTPInternalServerError,
                'An unexpected error prevented the request from being '
                'served; it has been logged.')


class DefaultJSONErrors:
    """Errors are JSON unless the client asked for something in particular.

    webob renders errors as HTML for a missing or ``*/*`` Accept header;
    every Placement client wants JSON, so say that on their behalf.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        accept = environ.get('HTTP_ACCEPT', '').strip()
        if accept in ('', '*/*'):
            environ['HTTP_ACCEPT'] = 'application/json'
        return self.application(environ, start_response)
