"""Handlers for /resource_providers/{uuid}/usages and /usages (1.9+)."""
import webob.exc

from placement import exception
from placement.objects import resource_provider as rp_obj
from placement.objects import usage as usage_obj
from placement.schemas import usage as schema
from placement import util

# 1.38: filter by consumer type and group the sums per type.
CONSUMER_TYPE_VERSION = (1, 38)


@util.wsgify
@util.check_accept('application/json')
def list_usages(req):
    """Usage of each class the provider has inventory of. Usage is "now",
    so last-modified (1.15+) is now."""
    context = req.environ['placement.context']
    context.can('placement:resource_providers:usages')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    try:
        rp = rp_obj.get_by_uuid(context, uuid)
    except exception.ResourceProviderNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            'No resource provider with uuid %s found: %s'
            % (uuid, exc.format_message()))
    return util.json_response(req, {
        'resource_provider_generation': rp.generation,
        'usages': usage_obj.get_for_provider(context, rp.id)})


@util.wsgify
def get_total_usages(req):
    want = util.want_version(req)
    if not want >= (1, 9):
        raise util.http_error(webob.exc.HTTPNotFound)
    return _total_usages(req)


@util.check_accept('application/json')
def _total_usages(req):
    want = util.want_version(req)
    project_id = req.GET.get('project_id')
    user_id = req.GET.get('user_id')
    context = req.environ['placement.context']
    context.can('placement:usages', target={'project_id': project_id})
    by_type = want >= CONSUMER_TYPE_VERSION
    util.validate_query_params(
        req, schema.GET_USAGES_1_38 if by_type else schema.GET_USAGES_1_9)
    if by_type:
        usages = usage_obj.get_for_project_by_type(
            context, project_id, user_id=user_id,
            consumer_type=req.GET.get('consumer_type'))
    else:
        usages = usage_obj.get_for_project(context, project_id,
                                           user_id=user_id)
    return util.json_response(req, {'usages': usages})
