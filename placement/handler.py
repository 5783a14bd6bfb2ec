"""The routes table: every URL and method Placement answers, in one place.

Dispatch is Routes; a URL that matches with a method it lacks answers 405
with an Allow header; an unknown URL answers 404; both in JSON.
"""
import urllib.parse

import routes
import webob.exc

from placement import errors
from placement.handlers import aggregate
from placement.handlers import allocation
from placement.handlers import allocation_candidate
from placement.handlers import capacity
from placement.handlers import explain
from placement.handlers import inventory
from placement.handlers import metrics
from placement.handlers import provider_view
from placement.handlers import reshaper
from placement.handlers import resource_class
from placement.handlers import resource_provider
from placement.handlers import root
from placement.handlers import trait
from placement.handlers import ui
from placement.handlers import usage
from placement import util

ROUTES = {
    '': {'GET': root.home},
    '/': {'GET': root.home},
    '/resource_classes': {
        'GET': resource_class.list_resource_classes,
        'POST': resource_class.create_resource_class,
    },
    '/resource_classes/{name}': {
        'GET': resource_class.get_resource_class,
        'PUT': resource_class.update_resource_class,
        'DELETE': resource_class.delete_resource_class,
    },
    '/resource_providers': {
        'GET': resource_provider.list_resource_providers,
        'POST': resource_provider.create_resource_provider,
    },
    '/resource_providers/{uuid}': {
        'GET': resource_provider.get_resource_provider,
        'PUT': resource_provider.update_resource_provider,
        'DELETE': resource_provider.delete_resource_provider,
    },
    '/resource_providers/{uuid}/inventories': {
        'GET': inventory.get_inventories,
        'POST': inventory.create_inventory,
        'PUT': inventory.set_inventories,
        'DELETE': inventory.delete_inventories,
    },
    '/resource_providers/{uuid}/inventories/{resource_class}': {
        'GET': inventory.get_inventory,
        'PUT': inventory.update_inventory,
        'DELETE': inventory.delete_inventory,
    },
    '/resource_providers/{uuid}/usages': {
        'GET': usage.list_usages,
    },
    '/resource_providers/{uuid}/aggregates': {
        'GET': aggregate.get_aggregates,
        'PUT': aggregate.set_aggregates,
    },
    '/resource_providers/{uuid}/allocations': {
        'GET': allocation.list_for_resource_provider,
    },
    '/resource_providers/{uuid}/traits': {
        'GET': trait.list_traits_for_resource_provider,
        'PUT': trait.update_traits_for_resource_provider,
        'DELETE': trait.delete_traits_for_resource_provider,
    },
    '/allocations': {
        'POST': allocation.set_allocations,
    },
    '/allocations/{consumer_uuid}': {
        'GET': allocation.list_for_consumer,
        'PUT': allocation.set_allocations_for_consumer,
        'DELETE': allocation.delete_allocations,
    },
    '/allocation_candidates': {
        'GET': allocation_candidate.list_allocation_candidates,
    },
    '/traits': {
        'GET': trait.list_traits,
    },
    '/traits/{name}': {
        'GET': trait.get_trait,
        'PUT': trait.put_trait,
        'DELETE': trait.delete_trait,
    },
    '/usages': {
        'GET': usage.get_total_usages,
    },
    '/reshaper': {
        'POST': reshaper.reshape,
    },
    # Operator extensions (not upstream's) live under /ops/.
    '/ops/capacity': {
        'GET': capacity.get_capacity,
    },
    '/ops/explain/allocation_candidates': {
        'GET': explain.explain_allocation_candidates,
    },
    # The web view's data (with the visitor's token, unlike /ui/).
    '/ops/ui/providers': {
        'GET': provider_view.list_providers,
    },
    '/ops/ui/providers/{uuid}/consumers': {
        'GET': provider_view.list_consumers,
    },
    # The web view: static files, served without a token (auth.py).
    '/ui': {'GET': ui.redirect},
    '/ui/': {'GET': ui.index},
    '/ui/{filename}': {'GET': ui.static_file},
}


# Served only when the deployer turned them on; otherwise unknown URLs.
OPTIONAL_ROUTES = [
    (lambda conf: conf.metrics.enabled, '/metrics', {'GET': metrics.scrape}),
]


def declarations(config):
    """ROUTES plus the optional routes ``config`` turns on."""
    routes_ = dict(ROUTES)
    for enabled, url, targets in OPTIONAL_ROUTES:
        if config is not None and enabled(config):
            routes_[url] = targets
    return routes_


def route_template(mapper):
    """environ -> the template of the route its path matches (for request
    metrics: '/resource_providers/{uuid}', never the raw URL)."""
    def route_of(environ):
        found = mapper.routematch(environ.get('PATH_INFO', ''))
        return found[1].routepath if found else 'unmatched'
    return route_of


def _method_not_allowed(environ, start_response):
    allowed = util.wsgi_path_item(environ, '_methods')
    headers = {'allow': str(allowed)} if allowed else {}
    return util.http_error(
        webob.exc.HTTPMethodNotAllowed,
        'The method specified is not allowed for this resource.',
        headers=headers)(environ, start_response)


def make_map(declarations):
    mapper = routes.Mapper()
    for url, targets in declarations.items():
        for method, handler in targets.items():
            mapper.connect(url, action=handler,
                           conditions=dict(method=[method]))
        mapper.connect(url, action=_method_not_allowed,
                       _methods=', '.join(targets))
    return mapper


def _wsgi_text(value, what):
    """A WSGI string (bytes carried as latin-1) as the UTF-8 text it is.

    Databases refuse NUL and text that is not UTF-8, so both are a 400
    here, before any handler or query sees them.
    """
    try:
        text = value.encode('latin-1').decode('utf-8')
    except UnicodeError:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid %s: it is not valid UTF-8.' % what)
    if '\x00' in text:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid %s: NUL characters are not allowed.' % what)
    return text


def check_query_string(environ):
    """400 for a query string that cannot be decoded or holds NUL."""
    query = _wsgi_text(environ.get('QUERY_STRING', ''), 'query string')
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True,
                                       errors='strict')
    except (UnicodeError, ValueError):
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid query string: a percent-escape is not valid UTF-8.',
            code=errors.QUERYPARAM_BAD_VALUE)
    for key, value in pairs:
        if '\x00' in key or '\x00' in value:
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'Invalid query string: NUL characters are not allowed.',
                code=errors.QUERYPARAM_BAD_VALUE)


class PlacementHandler:
    """Find the handler for a request and call it."""

    def __init__(self, config):
        self.config = config
        self._map = self.mapper = make_map(declarations(config))

    def __call__(self, environ, start_response):
        clen = environ.get('CONTENT_LENGTH')
        try:
            if clen and int(clen) < 0:
                raise ValueError(clen)
            if clen and int(clen) > 0 and not environ.get('CONTENT_TYPE'):
                raise util.http_error(
                    webob.exc.HTTPBadRequest,
                    'content-type header required when content-length > 0')
        except ValueError:
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'content-length header must be an integer')
        # Hostile input is refused before dispatch: no handler or query
        # ever sees a path or query string a database cannot hold.
        try:
            _wsgi_text(environ.get('PATH_INFO', ''), 'URL path')
            check_query_string(environ)
        except webob.exc.HTTPException as exc:
            environ[util.ENV_ERROR_CODE] = exc.placement_code
            raise
        found = self._map.routematch(environ=environ)
        if found is None:
            raise util.http_error(webob.exc.HTTPNotFound)
        result, route = found
        environ['placement.route'] = route.routepath
        handler = result.pop('action')
        # Routes hands back the WSGI (latin-1) form; handlers get UTF-8.
        result = {key: _wsgi_text(value, 'URL path')
                  if isinstance(value, str) else value
                  for key, value in result.items()}
        environ['wsgiorg.routing_args'] = ((), result)
        return handler(environ, start_response)
