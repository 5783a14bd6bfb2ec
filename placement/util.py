"""HTTP helpers shared by every handler: the wsgify decorator that turns
domain errors into upstream's JSON errors, JSON bodies in and out, query
string validation, cache headers and URLs."""
import email.utils
import functools
import json
import math

import jsonschema
import orjson
from oslo_middleware import request_id
from oslo_utils import timeutils
from oslo_utils import uuidutils
import webob
import webob.dec
import webob.exc

from placement import errors
from placement import exception
from placement import microversion

ENV_ERROR_CODE = 'placement.error_code'
ERROR_CODE_MICROVERSION = (1, 23)
FORMAT_CHECKER = jsonschema.FormatChecker()


# Validators by schema: jsonschema.validate() re-checks the schema itself on
# every call, which costs more than the validation; schemas are module
# constants, so build each validator once.
_VALIDATORS = {}


def _validate(data, schema):
    """jsonschema.validate() with a cached validator; raises the same
    best-matching ValidationError."""
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        if len(_VALIDATORS) > 512:
            _VALIDATORS.clear()
        cached = (schema, cls(schema, format_checker=FORMAT_CHECKER))
        _VALIDATORS[id(schema)] = cached
    error = jsonschema.exceptions.best_match(cached[1].iter_errors(data))
    if error is not None:
        raise error


@FORMAT_CHECKER.checks('uuid')
def _is_uuid(instance):
    if not isinstance(instance, str):
        return True
    return uuidutils.is_uuid_like(instance)


def json_error_formatter(body, status, title, environ):
    """Render a webob error in the API-WG error format upstream uses."""
    body = webob.exc.strip_tags(body)
    status_code = int(status.split(None, 1)[0])
    error = {'status': status_code, 'title': title, 'detail': body}
    version = environ.get(microversion.MICROVERSION_ENVIRON)
    if version and version.matches(ERROR_CODE_MICROVERSION):
        error['code'] = environ.get(ENV_ERROR_CODE) or errors.DEFAULT
    if request_id.ENV_REQUEST_ID in environ:
        error['request_id'] = environ[request_id.ENV_REQUEST_ID]
    if (status_code == 406
            and microversion.MICROVERSION_ENVIRON not in environ):
        error['max_version'] = microversion.max_version_string()
        error['min_version'] = microversion.min_version_string()
    return {'errors': [error]}


def http_error(exc_class, message=None, code=None, **kwargs):
    """Build a webob HTTP error that renders in our JSON format."""
    exc = exc_class(message, json_formatter=json_error_formatter, **kwargs)
    exc.placement_code = code
    return exc


_DOMAIN_TO_HTTP = {
    400: webob.exc.HTTPBadRequest,
    403: webob.exc.HTTPForbidden,
    404: webob.exc.HTTPNotFound,
    409: webob.exc.HTTPConflict,
    503: webob.exc.HTTPServiceUnavailable,
}


def domain_error_to_http(exc):
    cls = _DOMAIN_TO_HTTP.get(exc.status, webob.exc.HTTPInternalServerError)
    return http_error(cls, exc.format_message(), code=exc.code)


class PlacementWsgify(webob.dec.wsgify):
    """wsgify that renders every error, webob or domain, as JSON.

    The error code (1.23+) rides on the exception as ``placement_code`` (or
    webob's ``comment``, as upstream handlers pass it) and is moved into the
    environ where the formatter finds it.
    """

    def call_func(self, req, *args, **kwargs):
        try:
            return super().call_func(req, *args, **kwargs)
        except exception.PlacementError as exc:
            http_exc = domain_error_to_http(exc)
        except webob.exc.HTTPException as exc:
            http_exc = exc
        code = getattr(http_exc, 'placement_code', None) or http_exc.comment
        if code:
            req.environ[ENV_ERROR_CODE] = code
        http_exc.comment = None
        http_exc.json_formatter = json_error_formatter
        # The error is the response (webob's HTTPException is one):
        # returned without its traceback, whose frames hold it, so it and
        # the request are freed when the server is done with them rather
        # than at the cyclic collector's next run.
        http_exc.__traceback__ = None
        return http_exc


wsgify = PlacementWsgify


def want_version(req):
    return microversion.want_version(req)


class RawJSON:
    """A value of a large JSON object json_response sends: ``data``, the
    value already rendered (bytes)."""

    __slots__ = ('data',)

    def __init__(self, data):
        self.data = data


def json_response(req, body, status=200, last_modified=None, location=None,
                  large=False):
    """Send ``body`` as JSON; from 1.15 add cache-control and last-modified.

    ``last_modified`` may be None, in which case "now" is used from 1.15
    (upstream does the same for bodies that are computed, not stored).
    ``large`` bodies (allocation candidates: megabytes for wide requests)
    are encoded with orjson, about ten times faster than json, in compact
    form; the others keep json's spacing, which is upstream's.
    """
    resp = req.response
    resp.status = status
    if large and any(type(v) is RawJSON for v in body.values()):
        # Members already rendered go out as they are, never joined:
        # a large answer is megabytes, and the WSGI server writes each
        # piece (an in-process client joins them).
        pieces = []
        for key, value in body.items():
            pieces.append((b',' if pieces else b'{') + orjson.dumps(key)
                          + b':')
            pieces.append(value.data if type(value) is RawJSON
                          else orjson.dumps(value))
        pieces.append(b'}')
        resp.app_iter = pieces
        resp.content_length = sum(map(len, pieces))
    elif large:
        resp.body = orjson.dumps(body)
    else:
        resp.body = json.dumps(body, separators=(', ', ': ')).encode('utf-8')
    # Headers set as text: webob's typed setters (content type and
    # charset parsed and rebuilt, a datetime formatted) cost 20 us.
    headers = resp.headers
    headers['Content-Type'] = 'application/json'
    if location:
        resp.location = location
    if want_version(req).matches((1, 15)):
        headers['Cache-Control'] = 'no-cache'
        if last_modified is None:
            headers['Last-Modified'] = email.utils.formatdate(usegmt=True)
        else:
            resp.last_modified = last_modified
    return resp


def no_content(req, status=204):
    resp = req.response
    resp.status = status
    resp.content_type = None
    resp.body = b''
    return resp


def pick_last_modified(last_modified, updated_at, created_at=None):
    """Newest of what we had and a row's updated_at (or created_at)."""
    current = updated_at or created_at
    if current is None:
        current = timeutils.utcnow(with_timezone=True)
    elif current.tzinfo is None:
        current = current.replace(tzinfo=timeutils.utcnow(
            with_timezone=True).tzinfo)
    if last_modified is None:
        return current
    return max(last_modified, current)


# --- request bodies -----------------------------------------------------

def _reject_constant(name):
    raise ValueError('%s is not a valid JSON number' % name)


# No valid Placement body nests deeper than a handful of levels; refusing
# deep ones early keeps the validator and error messages from recursing.
MAX_JSON_DEPTH = 32
# The widest integer any database column here (BIGINT) can hold.
MAX_DB_INT = 2 ** 63 - 1


def _check_strings(value):
    """Refuse what a database cannot store: NUL, lone surrogates,
    non-finite numbers; and nesting deeper than MAX_JSON_DEPTH."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if '\x00' in item:
                raise ValueError('NUL character in string')
            try:
                item.encode('utf-8')
            except UnicodeEncodeError:
                raise ValueError('invalid unicode in string')
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise RecursionError()
            if isinstance(item, dict):
                stack.extend((key, depth + 1) for key in item)
                stack.extend((val, depth + 1) for val in item.values())
            else:
                stack.extend((val, depth + 1) for val in item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError('number out of range')


def _out_of_range_number(value):
    """The first number in ``value`` no database integer column can hold."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif (isinstance(item, (int, float)) and not isinstance(item, bool)
              and abs(item) > MAX_DB_INT):
            return item
    return None


def extract_json(body, schema):
    """Parse and validate a JSON request body; 400 on any problem."""
    try:
        data = json.loads(body, parse_constant=_reject_constant)
        _check_strings(data)
    except RecursionError:
        raise http_error(webob.exc.HTTPBadRequest,
                         'Malformed JSON: nested too deeply')
    except (ValueError, UnicodeDecodeError) as exc:
        raise http_error(webob.exc.HTTPBadRequest,
                         'Malformed JSON: %s' % exc)
    try:
        _validate(data, schema)
    except jsonschema.ValidationError as exc:
        raise http_error(webob.exc.HTTPBadRequest,
                         'JSON does not validate: %s' % exc)
    except RecursionError:
        raise http_error(webob.exc.HTTPBadRequest,
                         'JSON does not validate: nested too deeply')
    # A backstop for schemas without a maximum: never hand the database
    # a number it would refuse mid-transaction.
    bad = _out_of_range_number(data)
    if bad is not None:
        raise http_error(webob.exc.HTTPBadRequest,
                         'JSON does not validate: %s is out of the range '
                         'a database integer can hold' % bad)
    return data


def require_content(content_type):
    """Decorator: 415 unless the request body has ``content_type``."""
    def decorator(f):
        @functools.wraps(f)
        def decorated(req):
            if req.content_type != content_type:
                bad = req.content_type or 'None'
                # webob's 415 text quotes the environ's CONTENT_TYPE; say
                # "None" there too when there is none, as upstream does.
                req.content_type = bad
                raise http_error(
                    webob.exc.HTTPUnsupportedMediaType,
                    'The media type %(bad_type)s is not supported, use '
                    '%(good_type)s' % {'bad_type': bad,
                                       'good_type': content_type})
            return f(req)
        return decorated
    return decorator


def check_accept(*types):
    """Decorator: 406 when an explicit Accept header matches none of types."""
    def decorator(f):
        @functools.wraps(f)
        def decorated(req):
            accept = req.environ.get('HTTP_ACCEPT')
            if accept in types:
                # What every client sends (DefaultJSONErrors made a
                # missing or */* Accept this too): no parsing needed.
                return f(req)
            if req.accept and not req.accept.acceptable_offers(types):
                raise http_error(
                    webob.exc.HTTPNotAcceptable,
                    'Only %s is provided' % ', '.join(types))
            return f(req)
        return decorated
    return decorator


# --- query strings ------------------------------------------------------

def validate_query_params(req, schema):
    """Validate the query string (last value of each key) against schema."""
    try:
        _validate(dict(req.GET), schema)
    except (jsonschema.ValidationError, UnicodeDecodeError) as exc:
        raise http_error(webob.exc.HTTPBadRequest,
                         'Invalid query string parameters: %s' % exc)


def wsgi_path_item(environ, name):
    """A named field of the matched URL, or None."""
    try:
        return environ['wsgiorg.routing_args'][1][name]
    except (KeyError, IndexError):
        return None


# --- URLs ---------------------------------------------------------------

def _prefix(environ):
    return environ.get('SCRIPT_NAME', '')


def resource_provider_url(environ, rp_uuid):
    return '%s/resource_providers/%s' % (_prefix(environ), rp_uuid)


def inventory_url(environ, rp_uuid, resource_class=None):
    url = '%s/inventories' % resource_provider_url(environ, rp_uuid)
    if resource_class:
        url = '%s/%s' % (url, resource_class)
    return url


def resource_class_url(environ, name):
    return '%s/resource_classes/%s' % (_prefix(environ), name)


def trait_url(environ, name):
    return '%s/traits/%s' % (_prefix(environ), name)
