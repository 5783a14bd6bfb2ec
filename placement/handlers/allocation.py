"""Handlers for allocations: per consumer (GET/PUT/DELETE
/allocations/{consumer_uuid}), many consumers at once (POST /allocations,
1.13+), and per provider (GET /resource_providers/{uuid}/allocations).

Bodies of every version are normalised here into
``alloc_obj.ConsumerWrite``s; the objects layer does the one-transaction
write and the capacity and generation checks.
"""
import collections
import uuid as uuidlib

from oslo_utils import uuidutils
import webob.exc

from placement import errors
from placement import exception
from placement.objects import allocation as alloc_obj
from placement.objects import consumer as consumer_obj
from placement.policies import allocation as policies
from placement.schemas import allocation as schema
from placement import util


def _context(req):
    return req.environ['placement.context']


def _last_modified(req, rows):
    """Newest allocation timestamp from 1.15 (None lets json_response use
    "now", as upstream does when there are no allocations)."""
    if not util.want_version(req).matches((1, 15)):
        return None
    last_modified = None
    for row in rows:
        last_modified = util.pick_last_modified(
            last_modified, row.updated_at, row.created_at)
    return last_modified


# --- reads --------------------------------------------------------------

@util.wsgify
@util.check_accept('application/json')
def list_for_consumer(req):
    """The consumer's allocations by provider; an unknown consumer simply
    has none (200 with an empty dict, never 404)."""
    context = _context(req)
    context.can(policies.ALLOC_LIST)
    consumer_uuid = util.wsgi_path_item(req.environ, 'consumer_uuid')
    want = util.want_version(req)
    rows = alloc_obj.get_by_consumer(context, consumer_uuid)

    allocations = {}
    for row in rows:
        entry = allocations.setdefault(row.resource_provider_uuid,
                                       {'resources': {}})
        entry['resources'][row.resource_class] = row.used
        entry['generation'] = row.resource_provider_generation
    body = {'allocations': allocations}
    if rows and want.matches((1, 12)):
        first = rows[0]
        body['project_id'] = first.project_id
        body['user_id'] = first.user_id
        if want.matches((1, 28)):
            body['consumer_generation'] = first.consumer_generation
        if want.matches((1, 38)):
            body['consumer_type'] = (
                first.consumer_type
                or consumer_obj.NULL_CONSUMER_TYPE_ALIAS)
    return util.json_response(req, body,
                              last_modified=_last_modified(req, rows))


@util.wsgify
@util.check_accept('application/json')
def list_for_resource_provider(req):
    """Allocations on one provider, by consumer."""
    context = _context(req)
    context.can(policies.RP_ALLOC_LIST)
    rp_uuid = util.wsgi_path_item(req.environ, 'uuid')
    want = util.want_version(req)
    try:
        generation, rows = alloc_obj.get_by_provider(context, rp_uuid)
    except exception.NotFound as exc:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            "Resource provider '%(rp_uuid)s' not found: %(error)s" %
            {'rp_uuid': rp_uuid, 'error': exc.format_message()})

    allocations = collections.OrderedDict()
    for row in rows:
        entry = allocations.setdefault(row.consumer_uuid, {'resources': {}})
        entry['resources'][row.resource_class] = row.used
        if want.matches((1, 28)):
            entry['consumer_generation'] = row.consumer_generation
    body = {'allocations': allocations,
            'resource_provider_generation': generation}
    return util.json_response(req, body,
                              last_modified=_last_modified(req, rows))


# --- writes -------------------------------------------------------------

def _incomplete_owner(context):
    conf = context.config.placement
    return (conf.incomplete_consumer_project_id,
            conf.incomplete_consumer_user_id)


def consumer_write(context, want, consumer_uuid, data):
    """A ConsumerWrite from one consumer's body (the dict form)."""
    project_id = data.get('project_id')
    user_id = data.get('user_id')
    if project_id is None:
        # Before 1.8 nobody said who owns the consumer.
        project_id, user_id = _incomplete_owner(context)
    generation = alloc_obj.NO_CHECK
    if want.matches((1, 28)):
        generation = data.get('consumer_generation')
    consumer_type = None
    if want.matches((1, 38)):
        consumer_type = data.get('consumer_type')
    allocations = {rp_uuid: dict(alloc['resources'])
                   for rp_uuid, alloc in data['allocations'].items()}
    return alloc_obj.ConsumerWrite(
        uuid=consumer_uuid, allocations=allocations, project_id=project_id,
        user_id=user_id, generation=generation, consumer_type=consumer_type)


def consumer_writes(context, want, by_consumer):
    """ConsumerWrites from a POST /allocations style body."""
    return [consumer_write(context, want, consumer_uuid, data)
            for consumer_uuid, data in by_consumer.items()]


def _concurrent_update(exc):
    return util.http_error(
        webob.exc.HTTPConflict,
        'Inventory and/or allocations changed while attempting to '
        'allocate: %(error)s' % {'error': exc.format_message()},
        code=errors.CONCURRENT_UPDATE)


def _unable_to_allocate(exc):
    return util.http_error(
        webob.exc.HTTPConflict,
        'Unable to allocate inventory: %(error)s' %
        {'error': exc.format_message()})


@util.wsgify
@util.require_content('application/json')
def set_allocations_for_consumer(req):
    """Replace one consumer's allocations; an empty set (1.28+) removes
    them."""
    context = _context(req)
    context.can(policies.ALLOC_UPDATE)
    consumer_uuid = util.wsgi_path_item(req.environ, 'consumer_uuid')
    if not uuidutils.is_uuid_like(consumer_uuid):
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Malformed consumer_uuid: %(consumer_uuid)s' %
            {'consumer_uuid': consumer_uuid})
    consumer_uuid = str(uuidlib.UUID(consumer_uuid))
    want = util.want_version(req)
    data = util.extract_json(req.body, schema.put_schema(want))

    if not want.matches((1, 12)):
        # The list form: [{resource_provider: {uuid}, resources}, ...].
        data['allocations'] = {
            item['resource_provider']['uuid']: {
                'resources': item['resources']}
            for item in data['allocations']}
    write = consumer_write(context, want, consumer_uuid, data)
    try:
        alloc_obj.replace_all(context, [write])
    except exception.NotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to allocate inventory for consumer %(consumer_uuid)s: '
            '%(error)s' % {'consumer_uuid': consumer_uuid,
                           'error': exc.format_message()})
    except alloc_obj.InvalidInventory as exc:
        raise _unable_to_allocate(exc)
    except exception.ConcurrentUpdateDetected as exc:
        raise _concurrent_update(exc)
    return util.no_content(req)


@util.wsgify
@util.require_content('application/json')
def set_allocations(req):
    """Replace the allocations of many consumers in one transaction: all
    are written or none (1.13+)."""
    want = util.want_version(req)
    if not want.matches((1, 13)):
        raise util.http_error(webob.exc.HTTPNotFound)
    context = _context(req)
    context.can(policies.ALLOC_MANAGE)
    data = util.extract_json(req.body, schema.post_schema(want))
    writes = consumer_writes(context, want, data)
    try:
        alloc_obj.replace_all(context, writes)
    except exception.NotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to allocate inventory %(error)s' %
            {'error': exc.format_message()})
    except alloc_obj.InvalidInventory as exc:
        raise _unable_to_allocate(exc)
    except exception.ConcurrentUpdateDetected as exc:
        raise _concurrent_update(exc)
    return util.no_content(req)


@util.wsgify
def delete_allocations(req):
    """Remove every allocation of a consumer (and the consumer)."""
    context = _context(req)
    context.can(policies.ALLOC_DELETE)
    consumer_uuid = util.wsgi_path_item(req.environ, 'consumer_uuid')
    if not alloc_obj.delete_for_consumer(context, consumer_uuid):
        raise util.http_error(
            webob.exc.HTTPNotFound,
            "No allocations for consumer '%(consumer_uuid)s'" %
            {'consumer_uuid': consumer_uuid})
    return util.no_content(req)
