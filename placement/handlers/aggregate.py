"""Handlers for /resource_providers/{uuid}/aggregates (1.1+)."""
import webob.exc

from placement import errors
from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects import resource_provider as rp_obj
from placement.schemas import aggregate as schema
from placement import util

POLICY = 'placement:resource_providers:aggregates:%s'
# 1.19: bodies carry the provider generation and writes check it.
GENERATION_VERSION = (1, 19)


def _require_1_1(req):
    if not util.want_version(req) >= (1, 1):
        raise util.http_error(webob.exc.HTTPNotFound)


def _send(req, agg_uuids, generation):
    body = {'aggregates': agg_uuids}
    if util.want_version(req) >= GENERATION_VERSION:
        body['resource_provider_generation'] = generation
    # Associations carry no timestamps: last-modified is "now".
    return util.json_response(req, body)


@util.wsgify
@util.check_accept('application/json')
def get_aggregates(req):
    _require_1_1(req)
    context = req.environ['placement.context']
    context.can(POLICY % 'list')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    generation, agg_uuids = agg_obj.get_for_provider(context, uuid)
    return _send(req, agg_uuids, generation)


@util.wsgify
@util.require_content('application/json')
def set_aggregates(req):
    _require_1_1(req)
    context = req.environ['placement.context']
    context.can(POLICY % 'update')
    with_generation = util.want_version(req) >= GENERATION_VERSION
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rp = rp_obj.get_by_uuid(context, uuid)
    if with_generation:
        data = util.extract_json(req.body, schema.PUT_AGGREGATES_1_19)
        if data['resource_provider_generation'] != rp.generation:
            raise util.http_error(
                webob.exc.HTTPConflict,
                "Resource provider's generation already changed. Please "
                "update the generation and try again.",
                code=errors.CONCURRENT_UPDATE)
        agg_uuids = data['aggregates']
    else:
        agg_uuids = util.extract_json(req.body, schema.PUT_AGGREGATES_1_1)
    try:
        generation = agg_obj.set_for_provider(
            context, rp, agg_uuids, increment_generation=with_generation)
    except exception.ConcurrentUpdateDetected as exc:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Update conflict: %s' % exc.format_message(),
            code=errors.CONCURRENT_UPDATE)
    return _send(req, agg_uuids, generation)
