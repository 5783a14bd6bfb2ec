"""Handlers for /resource_providers and /resource_providers/{uuid}."""
import uuid as uuidlib

import webob.exc

from placement import errors
from placement import exception
from placement import lib_query
from placement.objects import resource_provider as rp_obj
from placement.schemas import resource_provider as schema
from placement import util

POLICY = 'placement:resource_providers:%s'


def _links(environ, uuid, want):
    url = util.resource_provider_url(environ, uuid)
    rels = ['inventories', 'usages']
    if want >= (1, 1):
        rels.append('aggregates')
    if want >= (1, 6):
        rels.append('traits')
    if want >= (1, 11):
        rels.append('allocations')
    return [{'rel': 'self', 'href': url}] + [
        {'rel': rel, 'href': '%s/%s' % (url, rel)} for rel in rels]


def serialize_provider(environ, row, want):
    data = {
        'uuid': row.uuid,
        'name': row.name,
        'generation': row.generation,
        'links': _links(environ, row.uuid, want),
    }
    if want >= (1, 14):
        data['parent_provider_uuid'] = row.parent_provider_uuid
        data['root_provider_uuid'] = row.root_provider_uuid
    return data


def _modified(row):
    return util.pick_last_modified(None, row.updated_at, row.created_at)


@util.wsgify
@util.require_content('application/json')
def create_resource_provider(req):
    """201 and Location before 1.20; 200 with the provider from 1.20."""
    context = req.environ['placement.context']
    context.can(POLICY % 'create')
    want = util.want_version(req)
    data = util.extract_json(
        req.body, schema.POST_RP_1_14 if want >= (1, 14) else schema.POST_RP)
    # Accept undashed uuids but store the canonical form.
    rp_uuid = (str(uuidlib.UUID(data['uuid'])) if data.get('uuid')
               else str(uuidlib.uuid4()))
    try:
        row = rp_obj.create(context, rp_uuid, data['name'],
                            parent_uuid=data.get('parent_provider_uuid'))
    except exception.ObjectActionError as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to create resource provider "%(name)s", %(uuid)s: '
            '%(error)s' % {'name': data['name'], 'uuid': rp_uuid,
                           'error': exc.format_message()})
    location = util.resource_provider_url(req.environ, row.uuid)
    if want >= (1, 20):
        return util.json_response(
            req, serialize_provider(req.environ, row, want),
            last_modified=_modified(row), location=location)
    resp = util.no_content(req, status=201)
    resp.location = location
    return resp


@util.wsgify
def delete_resource_provider(req):
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    context = req.environ['placement.context']
    context.can(POLICY % 'delete')
    try:
        rp_obj.delete(context, uuid)
    except exception.ResourceProviderNotFound:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            'No resource provider with uuid %s found for delete' % uuid)
    except exception.CannotDeleteParentResourceProvider:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Unable to delete parent resource provider %s: It has child '
            'resource providers.' % uuid,
            code=errors.PROVIDER_CANNOT_DELETE_PARENT)
    except exception.ResourceProviderInUse as exc:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Unable to delete resource provider %s: %s'
            % (uuid, exc.format_message()),
            code=errors.PROVIDER_IN_USE)
    return util.no_content(req)


@util.wsgify
@util.check_accept('application/json')
def get_resource_provider(req):
    want = util.want_version(req)
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    context = req.environ['placement.context']
    context.can(POLICY % 'show')
    row = rp_obj.get_by_uuid(context, uuid)
    return util.json_response(req, serialize_provider(req.environ, row, want),
                              last_modified=_modified(row))


def list_filters(req, want):
    """The GET /resource_providers filters as plain data, or 400."""
    util.validate_query_params(req, schema.list_schema(want))
    params = req.GET
    filters = {}
    if 'member_of' in params:
        filters['member_of'], filters['forbidden_aggs'] = (
            lib_query.parse_member_of(params.getall('member_of'), want))
    if 'required' in params:
        filters['required_traits'], filters['forbidden_traits'] = (
            lib_query.parse_required(params.getall('required'), want))
    for key in ('uuid', 'name', 'in_tree'):
        if key in params:
            filters[key] = params[key]
    if 'resources' in params:
        filters['resources'] = lib_query.parse_resources(params['resources'])
    return filters


@util.wsgify
@util.check_accept('application/json')
def list_resource_providers(req):
    context = req.environ['placement.context']
    context.can(POLICY % 'list')
    want = util.want_version(req)
    filters = list_filters(req, want)
    try:
        rows = rp_obj.get_all_by_filters(context, **filters)
    except exception.ResourceClassNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid resource class in resources parameter: %s'
            % exc.format_message())
    except exception.TraitNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid trait(s) in "required" parameter: %s'
            % exc.format_message())
    last_modified = None
    for row in rows:
        last_modified = util.pick_last_modified(
            last_modified, row.updated_at, row.created_at)
    body = {'resource_providers': [
        serialize_provider(req.environ, row, want) for row in rows]}
    return util.json_response(req, body, last_modified=last_modified)


@util.wsgify
@util.require_content('application/json')
def update_resource_provider(req):
    """Rename and, from 1.14, set the parent; moving or dropping a parent
    is allowed only from 1.37."""
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    context = req.environ['placement.context']
    context.can(POLICY % 'update')
    want = util.want_version(req)
    # 404 before looking at the body, as upstream.
    rp_obj.get_by_uuid(context, uuid)
    data = util.extract_json(
        req.body, schema.PUT_RP_1_14 if want >= (1, 14) else schema.PUT_RP)
    kwargs = {}
    if 'parent_provider_uuid' in data:
        kwargs['parent_uuid'] = data['parent_provider_uuid']
    try:
        row = rp_obj.update(context, uuid, data['name'],
                            allow_reparenting=want >= (1, 37), **kwargs)
    except exception.ResourceProviderExists:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Conflicting resource provider %s already exists.' % data['name'],
            code=errors.DUPLICATE_NAME)
    except exception.ObjectActionError as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to save resource provider %s: %s'
            % (uuid, exc.format_message()))
    return util.json_response(req, serialize_provider(req.environ, row, want),
                              last_modified=_modified(row))
