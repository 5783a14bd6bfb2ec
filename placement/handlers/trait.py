"""Handlers for /traits and /resource_providers/{uuid}/traits (1.6 on)."""
import jsonschema
import webob.exc

from placement import errors
from placement import exception
from placement.objects import resource_provider as rp_obj
from placement.objects import trait as trait_obj
from placement.policies import trait as policies
from placement.schemas import trait as schema
from placement import util

TRAITS_VERSION = (1, 6)
CACHE_HEADERS_VERSION = (1, 15)


def _require_version(req):
    """The whole traits API is 404 below 1.6, as upstream."""
    if not util.want_version(req).matches(TRAITS_VERSION):
        raise util.http_error(webob.exc.HTTPNotFound)


def _context(req):
    return req.environ['placement.context']


def _serialize(rows):
    """The trait names and the newest of their timestamps."""
    last_modified = None
    names = []
    for row in rows:
        last_modified = util.pick_last_modified(
            last_modified, row.updated_at, row.created_at)
        names.append(row.name)
    return names, last_modified


def _set_cache_headers(req, last_modified):
    if util.want_version(req).matches(CACHE_HEADERS_VERSION):
        req.response.cache_control = 'no-cache'
        # A stored timestamp, or now when there is none.
        req.response.last_modified = util.pick_last_modified(
            None, last_modified)


def _name_filter(value):
    """``in:A,B`` or ``startswith:PREFIX``; other operators filter
    nothing, as upstream."""
    op, sep, arg = value.partition(':')
    if not sep:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Badly formatted name parameter. Expected name query string '
            'parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. '
            'Got: "%s"' % value)
    if op == 'in':
        return {'name_in': arg.split(',')}
    if op == 'startswith':
        return {'prefix': arg}
    return {}


# --- /traits -----------------------------------------------------------

@util.wsgify
def list_traits(req):
    _require_version(req)
    return _list_traits(req)


@util.check_accept('application/json')
def _list_traits(req):
    ctx = _context(req)
    ctx.can(policies.TRAITS_LIST)
    util.validate_query_params(req, schema.LIST_TRAIT_SCHEMA)
    filters = {}
    if 'name' in req.GET:
        filters.update(_name_filter(req.GET['name']))
    if 'associated' in req.GET:
        associated = req.GET['associated'].lower()
        if associated not in ('true', 'false'):
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'The query parameter "associated" only accepts '
                '"true" or "false"')
        filters['associated'] = associated == 'true'
    names, last_modified = _serialize(trait_obj.listing(ctx, **filters))
    return util.json_response(req, {'traits': names},
                              last_modified=last_modified)


@util.wsgify
def get_trait(req):
    _require_version(req)
    ctx = _context(req)
    ctx.can(policies.TRAITS_SHOW)
    name = util.wsgi_path_item(req.environ, 'name')
    row = trait_obj.get_by_name(ctx, name)
    util.no_content(req)
    _set_cache_headers(req, row.created_at)
    return req.response


@util.wsgify
def put_trait(req):
    """Make sure custom trait ``name`` exists: 201 made, 204 was there."""
    _require_version(req)
    ctx = _context(req)
    ctx.can(policies.TRAITS_UPDATE)
    name = util.wsgi_path_item(req.environ, 'name')
    try:
        jsonschema.validate(name, schema.CUSTOM_TRAIT)
    except jsonschema.ValidationError:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'The trait is invalid. A valid trait must be no longer than '
            '255 characters, start with the prefix "CUSTOM_" and use '
            'following characters: "A"-"Z", "0"-"9" and "_"')
    status = 204
    created_at = None
    try:
        created_at = trait_obj.get_by_name(ctx, name).created_at
    except exception.TraitNotFound:
        try:
            created_at = trait_obj.create(ctx, name).created_at
            status = 201
        except exception.TraitExists:
            pass  # someone else created it just now
    req.response.location = util.trait_url(req.environ, name)
    util.no_content(req, status=status)
    _set_cache_headers(req, created_at)
    return req.response


@util.wsgify
def delete_trait(req):
    _require_version(req)
    ctx = _context(req)
    ctx.can(policies.TRAITS_DELETE)
    name = util.wsgi_path_item(req.environ, 'name')
    trait_obj.destroy(ctx, name)
    return util.no_content(req)


# --- /resource_providers/{uuid}/traits ---------------------------------

@util.wsgify
def list_traits_for_resource_provider(req):
    _require_version(req)
    return _list_traits_for_resource_provider(req)


@util.check_accept('application/json')
def _list_traits_for_resource_provider(req):
    ctx = _context(req)
    ctx.can(policies.RP_TRAIT_LIST)
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    try:
        generation, rows = trait_obj.get_for_provider(ctx, uuid)
    except exception.NotFound as exc:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            'No resource provider with uuid %(uuid)s found: %(error)s'
            % {'uuid': uuid, 'error': exc.format_message()})
    names, last_modified = _serialize(rows)
    return util.json_response(
        req, {'traits': names, 'resource_provider_generation': generation},
        last_modified=last_modified)


@util.wsgify
def update_traits_for_resource_provider(req):
    _require_version(req)
    return _update_traits_for_resource_provider(req)


@util.require_content('application/json')
def _update_traits_for_resource_provider(req):
    ctx = _context(req)
    ctx.can(policies.RP_TRAIT_UPDATE)
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    data = util.extract_json(req.body, schema.SET_TRAITS_FOR_RP_SCHEMA)
    generation = data['resource_provider_generation']
    rp = rp_obj.get_by_uuid(ctx, uuid)
    if rp.generation != generation:
        raise util.http_error(
            webob.exc.HTTPConflict,
            "Resource provider's generation already changed. Please update "
            "the generation and try again.",
            code=errors.CONCURRENT_UPDATE)
    wanted = list(dict.fromkeys(data['traits']))
    rows = trait_obj.get_all(ctx, name_in=wanted) if wanted else []
    unknown = [name for name in wanted
               if name not in {row.name for row in rows}]
    if unknown:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'No such trait %s' % ', '.join(unknown))
    new_generation = rp_obj.set_traits(
        ctx, rp.id, rp.generation, [row.id for row in rows])
    names, last_modified = _serialize(rows)
    return util.json_response(
        req, {'traits': names,
              'resource_provider_generation': new_generation},
        last_modified=last_modified)


@util.wsgify
def delete_traits_for_resource_provider(req):
    _require_version(req)
    ctx = _context(req)
    ctx.can(policies.RP_TRAIT_DELETE)
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rp = rp_obj.get_by_uuid(ctx, uuid)
    rp_obj.set_traits(ctx, rp.id, rp.generation, [])
    return util.no_content(req)
