"""The fault barrier: no exception and no traceback ever reaches a client.

A lost database answers 503 (retry later), a value the database refuses
400, a deadlock that outlived its retries 409 (the client's usual retry
path), anything else 500; all in upstream's JSON error format with the
request id, and logged here. Also here: the request body size limit.
"""
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_middleware import sizelimit
import sqlalchemy.exc as sa_exc
import webob.dec
import webob.exc

from placement.db import unparsed_triggers
from placement import errors
from placement import util

LOG = logging.getLogger(__name__)

DB_UNAVAILABLE_MSG = ('The placement database is unavailable. '
                      'Please retry in a moment.')
DB_DATA_MSG = ('The request holds a value the database cannot store '
               '(too long, too large or malformed) or characters it does '
               'not support.')
DEADLOCK_MSG = ('Another thread concurrently updated the data. '
                'Please retry your update')


def is_db_unavailable(exc, starting=False):
    """Connection refused, lost or timed out, or no pooled connection;
    ``starting``: while the app is built, a connection closed under the
    engine's first statements (the database killed between its connect
    and SQLAlchemy's look at the server) too."""
    if isinstance(exc, (db_exc.DBConnectionError, sa_exc.TimeoutError)):
        return True
    if starting and isinstance(exc, sa_exc.ResourceClosedError):
        return True
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    if _mysql_error_code(exc) in GALERA_NOT_READY:
        return True
    if unparsed_triggers.unparsed_trigger_table(exc) is not None:
        # Still unparsed after the writer's retries (db/api.py): a
        # database fault the client can retry, not a bug of ours.
        return True
    if isinstance(exc, sa_exc.OperationalError):
        # A plain (non oslo.db) engine, as some tests use.
        return 'connect' in str(exc).lower()
    return isinstance(exc, db_exc.DBError) and not isinstance(
        exc, (db_exc.DBDataError, db_exc.DBDeadlock,
              db_exc.DBDuplicateEntry, db_exc.DBReferenceError,
              db_exc.DBConstraintError)) and (
        'connect' in str(exc).lower())


# MySQL's refusals of a string it cannot hold or compare in the
# connection's character set (oslo.db connects with charset=utf8, three
# bytes a character): "Illegal mix of collations" (1267, 1270, 1271) and
# "Incorrect string value" (1366), e.g. for an emoji in a URL or a name.
# Nothing was or could be stored: the value is refused like any other.
MYSQL_UNSUPPORTED_STRING = {1267, 1270, 1271, 1366}


# A Galera node outside the cluster's primary component (still joining
# after a restart, or cut off from the others) refuses every query with
# 1047 "WSREP has not yet prepared node for application use": for this
# API node the database is unavailable, as if lost.
GALERA_NOT_READY = {1047}


def _mysql_error_code(exc):
    inner = getattr(exc, 'inner_exception', None) or exc
    args = getattr(getattr(inner, 'orig', None), 'args', ())
    return args[0] if args and isinstance(args[0], int) else None


def is_db_data_error(exc):
    """The database refused a value: out of range, too long, not text,
    or characters outside MySQL's connection character set."""
    if isinstance(exc, (db_exc.DBDataError, sa_exc.DataError,
                        OverflowError)):
        return True
    return (isinstance(exc, (db_exc.DBError, sa_exc.DBAPIError))
            and _mysql_error_code(exc) in MYSQL_UNSUPPORTED_STRING)


def unavailable_response():
    """503, database unavailable, as a WSGI app in our JSON format."""
    return util.http_error(webob.exc.HTTPServiceUnavailable,
                           DB_UNAVAILABLE_MSG)


def _db_error_kind(exc):
    """For the request metrics: which way the database failed, if it did."""
    if is_db_unavailable(exc):
        return 'unavailable'
    if isinstance(exc, db_exc.DBDeadlock):
        return 'deadlock'
    if isinstance(exc, (db_exc.DBError, sa_exc.SQLAlchemyError)):
        return 'data' if is_db_data_error(exc) else 'other'
    return None


def _error_response(exc):
    if is_db_unavailable(exc):
        LOG.warning('Database unavailable: %s', exc)
        return unavailable_response()
    if is_db_data_error(exc):
        LOG.info('Database refused a value: %s', exc)
        return util.http_error(webob.exc.HTTPBadRequest, DB_DATA_MSG)
    if isinstance(exc, db_exc.DBDeadlock):
        LOG.warning('Deadlock outlived its retries: %s', exc)
        return util.http_error(webob.exc.HTTPConflict, DEADLOCK_MSG,
                               code=errors.CONCURRENT_UPDATE)
    return None


class FaultWrapper:

    def __init__(self, application):
        self.application = application

    # Plain WSGI (a webob Request and Response per layer cost more than
    # the barrier itself). Every layer inside is webob's and calls
    # start_response only with a complete response, so an exception
    # always arrives before it was called. (No exc_info: webob's
    # get_response, in oslo.middleware's RequestId outside, re-raises it.)
    def __call__(self, environ, start_response):
        try:
            return self.application(environ, start_response)
        except Exception as exc:  # noqa: BLE001 - this is the barrier
            environ['placement.db_error'] = _db_error_kind(exc)
            known = _error_response(exc)
            if known is None:
                LOG.exception('Unhandled error while serving %s %s',
                              environ.get('REQUEST_METHOD'),
                              environ.get('SCRIPT_NAME', '') +
                              environ.get('PATH_INFO', ''))
                known = util.http_error(
                    webob.exc.HTTPInternalServerError,
                    'An unexpected error prevented the request from being '
                    'served; it has been logged.')
            code = getattr(known, 'placement_code', None)
            if code:
                environ[util.ENV_ERROR_CODE] = code
            return known(environ, start_response)


class BodySizeLimiter(sizelimit.RequestBodySizeLimiter):
    """oslo.middleware's body size limit (``[oslo_middleware]
    max_request_body_size``), answering 413 in our JSON error format."""

    def __call__(self, environ, start_response):
        # GET and HEAD handlers never read a body: nothing to limit (and
        # the limiter's wrapping costs 20 us of a 2 ms answer).
        if (environ.get('REQUEST_METHOD') in ('GET', 'HEAD') and
                not environ.get('CONTENT_LENGTH') and
                'HTTP_TRANSFER_ENCODING' not in environ):
            return self.application(environ, start_response)
        return self._limited(environ, start_response)

    @webob.dec.wsgify
    def _limited(self, req):
        # The limiter drops a content-length it cannot read; refuse it
        # here, as the routes table would, before that happens.
        clen = req.environ.get('CONTENT_LENGTH')
        if clen and not clen.strip().isdigit():
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'content-length header must be an integer')
        try:
            return super().__call__(req)
        except webob.exc.HTTPRequestEntityTooLarge:
            raise util.http_error(
                webob.exc.HTTPRequestEntityTooLarge,
                'Request is too large. Larger than max_request_body_size '
                '(%d).' % self._conf_get('max_request_body_size'))


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
