"""Handlers for /resource_classes (microversion 1.2 on)."""
import json

import webob.exc

from placement import exception
from placement.objects import resource_class as rc_obj
from placement.policies import resource_class as policies
from placement.schemas import resource_class as schema
from placement import util


def _require_version(req, min_version, max_version=None):
    """404 outside the versions a URL/method exists at, as upstream."""
    if not util.want_version(req).matches(min_version, max_version):
        raise util.http_error(webob.exc.HTTPNotFound)


def _serialize(environ, name):
    return {
        'name': name,
        'links': [{'rel': 'self',
                   'href': util.resource_class_url(environ, name)}],
    }


def _context(req):
    return req.environ['placement.context']


@util.wsgify
def list_resource_classes(req):
    _require_version(req, (1, 2))
    return _list_resource_classes(req)


@util.check_accept('application/json')
def _list_resource_classes(req):
    ctx = _context(req)
    ctx.can(policies.LIST)
    last_modified = None
    output = []
    for row in rc_obj.listing(ctx):
        last_modified = util.pick_last_modified(
            last_modified, row.updated_at, row.created_at)
        output.append(_serialize(req.environ, row.name))
    return util.json_response(req, {'resource_classes': output},
                              last_modified=last_modified)


@util.wsgify
def get_resource_class(req):
    _require_version(req, (1, 2))
    return _get_resource_class(req)


@util.check_accept('application/json')
def _get_resource_class(req):
    ctx = _context(req)
    ctx.can(policies.SHOW)
    name = util.wsgi_path_item(req.environ, 'name')
    row = rc_obj.get_by_name(ctx, name)
    return util.json_response(
        req, _serialize(req.environ, row.name),
        last_modified=util.pick_last_modified(
            None, row.updated_at, row.created_at))


@util.wsgify
def create_resource_class(req):
    _require_version(req, (1, 2))
    return _create_resource_class(req)


@util.require_content('application/json')
def _create_resource_class(req):
    ctx = _context(req)
    ctx.can(policies.CREATE)
    data = util.extract_json(req.body, schema.POST_RC_SCHEMA_V1_2)
    name = data['name']
    try:
        rc_obj.create(ctx, name)
    except exception.ResourceClassExists:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Conflicting resource class already exists: %s' % name)
    req.response.location = util.resource_class_url(req.environ, name)
    return util.no_content(req, status=201)


@util.wsgify
def update_resource_class(req):
    """1.2-1.6 rename the class to the body's name; from 1.7 the body is
    gone and PUT makes sure the custom class exists."""
    _require_version(req, (1, 2))
    if util.want_version(req).matches((1, 7)):
        return _ensure_resource_class(req)
    return _rename_resource_class(req)


@util.require_content('application/json')
def _rename_resource_class(req):
    ctx = _context(req)
    ctx.can(policies.UPDATE)
    name = util.wsgi_path_item(req.environ, 'name')
    data = util.extract_json(req.body, schema.PUT_RC_SCHEMA_V1_2)
    new_name = data['name']
    try:
        row = rc_obj.rename(ctx, name, new_name)
    except exception.ResourceClassExists:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Resource class already exists: %s' % new_name)
    except exception.ResourceClassCannotUpdateStandard:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Cannot update standard resource class %s' % name)
    return util.json_response(req, _serialize(req.environ, row.name))


def _ensure_resource_class(req):
    ctx = _context(req)
    ctx.can(policies.UPDATE)
    name = util.wsgi_path_item(req.environ, 'name')
    # The name in the URL obeys the rule a POSTed name does, reported the
    # same way (400 naming the pattern, so standard names are refused).
    util.extract_json(json.dumps({'name': name}), schema.PUT_RC_SCHEMA_V1_2)
    status = 204
    try:
        rc_obj.get_by_name(ctx, name)
    except exception.ResourceClassNotFound:
        try:
            rc_obj.create(ctx, name)
            status = 201
        except exception.ResourceClassExists:
            pass  # someone else created it just now
    req.response.location = util.resource_class_url(req.environ, name)
    return util.no_content(req, status=status)


@util.wsgify
def delete_resource_class(req):
    _require_version(req, (1, 2))
    ctx = _context(req)
    ctx.can(policies.DELETE)
    name = util.wsgi_path_item(req.environ, 'name')
    try:
        rc_obj.destroy(ctx, name)
    except exception.ResourceClassCannotDeleteStandard as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Error in delete resource class: %s' % exc.format_message())
    except exception.ResourceClassInUse as exc:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Error in delete resource class: %s' % exc.format_message())
    return util.no_content(req)
