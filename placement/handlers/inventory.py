"""Handlers for /resource_providers/{uuid}/inventories[/{resource_class}]."""
import webob.exc

from placement import errors
from placement import exception
from placement.objects import inventory as inv_obj
from placement.objects import resource_provider as rp_obj
from placement.schemas import inventory as schema
from placement import util

POLICY = 'placement:resource_providers:inventories:%s'
# 1.26: reserved may equal total (capacity 0), for providers that are
# temporarily unavailable.
RESERVED_CAN_BE_TOTAL = (1, 26)


def _record(data):
    record = dict(schema.DEFAULTS)
    record.update(data)
    record.pop('resource_provider_generation', None)
    record.pop('resource_class', None)
    return record


def _check_capacity(want, rp, rc_name, record):
    """Refuse an inventory that could never be allocated from."""
    usable = inv_obj.capacity(record)
    if want >= RESERVED_CAN_BE_TOTAL:
        if usable < 0:
            raise exception.InvalidInventoryCapacityReservedCanBeTotal(
                resource_class=rc_name, resource_provider=rp.uuid)
    elif usable <= 0:
        raise exception.InvalidInventoryCapacity(
            resource_class=rc_name, resource_provider=rp.uuid)


def _serialize(record, generation=None):
    data = {f: record[f] for f in inv_obj.FIELDS}
    if generation:
        data['resource_provider_generation'] = generation
    return data


def _send_one(req, record, generation, status=200, location=None):
    return util.json_response(
        req, _serialize(record, generation), status=status,
        last_modified=util.pick_last_modified(
            None, record.get('updated_at'), record.get('created_at')),
        location=location)


def _send_all(req, records, generation):
    last_modified = None
    for record in records:
        last_modified = util.pick_last_modified(
            last_modified, record.get('updated_at'), record.get('created_at'))
    body = {'resource_provider_generation': generation,
            'inventories': {r['resource_class']: _serialize(r)
                            for r in records}}
    return util.json_response(req, body, last_modified=last_modified)


def _provider_or_404(context, uuid, read=rp_obj.get_by_uuid):
    try:
        return read(context, uuid)
    except exception.ResourceProviderNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            'No resource provider with uuid %s found : %s'
            % (uuid, exc.format_message()))


def _inventories_or_404(context, uuid):
    """(generation, inventory records) of provider ``uuid``."""
    return _provider_or_404(context, uuid, read=inv_obj.get_for_provider)


def _generation_conflict():
    return util.http_error(webob.exc.HTTPConflict,
                           'resource provider generation conflict',
                           code=errors.CONCURRENT_UPDATE)


def _update_conflict(exc, prefix='update conflict'):
    return util.http_error(webob.exc.HTTPConflict,
                           '%s: %s' % (prefix, exc.format_message()),
                           code=errors.CONCURRENT_UPDATE)


@util.wsgify
@util.check_accept('application/json')
def get_inventories(req):
    context = req.environ['placement.context']
    context.can(POLICY % 'list')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    generation, records = _inventories_or_404(context, uuid)
    return _send_all(req, records, generation)


@util.wsgify
@util.check_accept('application/json')
def get_inventory(req):
    context = req.environ['placement.context']
    context.can(POLICY % 'show')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rc_name = util.wsgi_path_item(req.environ, 'resource_class')
    generation, records = _inventories_or_404(context, uuid)
    for record in records:
        if record['resource_class'] == rc_name:
            return _send_one(req, record, generation)
    raise util.http_error(
        webob.exc.HTTPNotFound,
        'No inventory of class %s for %s' % (rc_name, uuid))


@util.wsgify
@util.require_content('application/json')
def create_inventory(req):
    """POST one class: 201 with Location and the record."""
    context = req.environ['placement.context']
    context.can(POLICY % 'create')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rp = rp_obj.get_by_uuid(context, uuid)
    data = util.extract_json(req.body, schema.POST_INVENTORY)
    rc_name = data['resource_class']
    record = _record(data)
    try:
        _check_capacity(util.want_version(req), rp, rc_name, record)
        generation = inv_obj.add(context, rp, rc_name, record)
    except (exception.ConcurrentUpdateDetected,
            exception.InventoryExists) as exc:
        raise _update_conflict(exc, 'Update conflict')
    except (exception.InvalidInventoryCapacity,
            exception.ResourceClassNotFound) as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to create inventory for resource provider %s: %s'
            % (uuid, exc.format_message()))
    return _send_one(req, record, generation, status=201,
                     location=util.inventory_url(req.environ, uuid, rc_name))


@util.wsgify
@util.require_content('application/json')
def update_inventory(req):
    """PUT one class, generation-checked."""
    context = req.environ['placement.context']
    context.can(POLICY % 'update')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rc_name = util.wsgi_path_item(req.environ, 'resource_class')
    rp = rp_obj.get_by_uuid(context, uuid)
    data = util.extract_json(req.body, schema.BASE_INVENTORY)
    if data['resource_provider_generation'] != rp.generation:
        raise _generation_conflict()
    record = _record(data)
    try:
        _check_capacity(util.want_version(req), rp, rc_name, record)
        generation = inv_obj.update(context, rp, rc_name, record)
    except exception.ConcurrentUpdateDetected as exc:
        raise _update_conflict(exc)
    except exception.InventoryWithResourceClassNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'No inventory record with resource class for resource provider '
            '%s: %s' % (uuid, exc.format_message()))
    except exception.InvalidInventoryCapacity as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to update inventory for resource provider %s: %s'
            % (uuid, exc.format_message()))
    return _send_one(req, record, generation)


@util.wsgify
@util.require_content('application/json')
def set_inventories(req):
    """PUT the whole set, generation-checked: classes not named are
    removed (409 placement.inventory.inuse if allocated)."""
    context = req.environ['placement.context']
    context.can(POLICY % 'update')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rp = rp_obj.get_by_uuid(context, uuid)
    data = util.extract_json(req.body, schema.PUT_INVENTORIES)
    if data['resource_provider_generation'] != rp.generation:
        raise _generation_conflict()
    want = util.want_version(req)
    inventories = {}
    try:
        for rc_name, raw in data['inventories'].items():
            inventories[rc_name] = _record(raw)
            _check_capacity(want, rp, rc_name, inventories[rc_name])
        generation = inv_obj.set_all(context, rp, inventories)
    except exception.ResourceClassNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unknown resource class in inventory for resource provider '
            '%s: %s' % (uuid, exc.format_message()))
    except exception.ConcurrentUpdateDetected as exc:
        raise _update_conflict(exc)
    except exception.InventoryInUse as exc:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'update conflict: %s' % exc.format_message(),
            code=errors.INVENTORY_INUSE)
    except exception.InvalidInventoryCapacity as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Unable to update inventory for resource provider %s: %s'
            % (uuid, exc.format_message()))
    records = [dict(inventories[name], resource_class=name)
               for name in sorted(inventories)]
    return _send_all(req, records, generation)


@util.wsgify
def delete_inventory(req):
    context = req.environ['placement.context']
    context.can(POLICY % 'delete')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rc_name = util.wsgi_path_item(req.environ, 'resource_class')
    rp = rp_obj.get_by_uuid(context, uuid)
    try:
        inv_obj.delete(context, rp, rc_name)
    except (exception.ConcurrentUpdateDetected,
            exception.InventoryInUse) as exc:
        # Upstream sends concurrent_update for both.
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Unable to delete inventory of class %s: %s'
            % (rc_name, exc.format_message()),
            code=errors.CONCURRENT_UPDATE)
    except exception.NotFound as exc:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            'No inventory of class %s found for delete: %s'
            % (rc_name, exc.format_message()))
    return util.no_content(req)


@util.wsgify
def delete_inventories(req):
    """DELETE every inventory (1.5); 405 before, as upstream."""
    if not util.want_version(req) >= (1, 5):
        raise util.http_error(webob.exc.HTTPMethodNotAllowed)
    context = req.environ['placement.context']
    context.can(POLICY % 'delete')
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    rp = rp_obj.get_by_uuid(context, uuid)
    try:
        inv_obj.set_all(context, rp, {})
    except exception.ConcurrentUpdateDetected:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Unable to delete inventory for resource provider %s because '
            'the inventory was updated by another process. Please retry '
            'your request.' % uuid,
            code=errors.CONCURRENT_UPDATE)
    except exception.InventoryInUse as exc:
        raise util.http_error(webob.exc.HTTPConflict, exc.format_message(),
                              code=errors.INVENTORY_INUSE)
    return util.no_content(req)
