"""Handler for POST /reshaper (1.30+): move inventory and the allocations
against it between the providers of a tree in one atomic step."""
import webob.exc

from placement import errors
from placement import exception
from placement.handlers import allocation as alloc_handler
from placement.objects import allocation as alloc_obj
from placement.objects import reshaper as reshaper_obj
from placement.objects import resource_provider as rp_obj
from placement.policies import reshaper as policies
from placement.schemas import inventory as inv_schema
from placement.schemas import reshaper as schema
from placement import util


def _conflict(message, code):
    return util.http_error(webob.exc.HTTPConflict, message, code=code)


@util.wsgify
@util.require_content('application/json')
def reshape(req):
    want = util.want_version(req)
    if not want.matches((1, 30)):
        raise util.http_error(webob.exc.HTTPNotFound)
    context = req.environ['placement.context']
    context.can(policies.RESHAPE)
    data = util.extract_json(req.body, schema.post_schema(want))

    inventories = {}
    for rp_uuid, inv_data in data['inventories'].items():
        try:
            rp = rp_obj.get_by_uuid(context, rp_uuid)
        except exception.NotFound as exc:
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'Resource provider %(rp_uuid)s in inventories not found: '
                '%(error)s' % {'rp_uuid': rp_uuid,
                               'error': exc.format_message()},
                code=errors.RESOURCE_PROVIDER_NOT_FOUND)
        # An early generation check, with the provider named.
        given = inv_data['resource_provider_generation']
        if given != rp.generation:
            raise _conflict(
                'resource provider generation conflict for provider '
                '%(rp)s: actual: %(actual)s, given: %(given)s' %
                {'rp': rp_uuid, 'actual': rp.generation, 'given': given},
                errors.CONCURRENT_UPDATE)
        records = {}
        for rc_name, raw in inv_data['inventories'].items():
            record = dict(inv_schema.DEFAULTS)
            record.update(raw)
            record.pop('resource_provider_generation', None)
            records[rc_name] = record
        inventories[rp_uuid] = (given, records)

    writes = alloc_handler.consumer_writes(context, want, data['allocations'])
    try:
        reshaper_obj.reshape(context, inventories, writes)
    except exception.ConcurrentUpdateDetected as exc:
        raise _conflict('update conflict: %s' % exc.format_message(),
                        errors.CONCURRENT_UPDATE)
    except exception.NotFound as exc:
        # An unknown resource class.
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'malformed reshaper data: %s' % exc.format_message())
    except exception.InventoryInUse as exc:
        raise _conflict('update conflict: %s' % exc.format_message(),
                        errors.INVENTORY_INUSE)
    except alloc_obj.InvalidInventory as exc:
        raise util.http_error(
            webob.exc.HTTPConflict,
            'Unable to allocate inventory: %s' % exc.format_message())
    return util.no_content(req)
