"""Inventories: what each provider offers of each resource class.

Every write bumps the provider generation by compare-and-swap against
the generation the caller read, in the same transaction.
"""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import capacity_rules
from placement.objects import provider_rows
from placement.objects import resource_class as rc_obj
from placement.objects import resource_provider as rp_obj

_INV = models.INV
_ALLOC = models.ALLOC
FIELDS = ('total', 'reserved', 'min_unit', 'max_unit', 'step_size',
          'allocation_ratio')


_COLUMNS = (models.RC.c.name.label('resource_class'),
            *[_INV.c[f] for f in FIELDS], _INV.c.updated_at,
            _INV.c.created_at)
_OF_PROVIDER = provider_rows.statement(
    _COLUMNS, models.RC.c.name,
    (_INV, _INV.c.resource_provider_id == models.RP.c.id),
    (models.RC, _INV.c.resource_class_id == models.RC.c.id))


def capacity(inv):
    """capacity_rules.usable of a record (a dict)."""
    return capacity_rules.usable(inv['total'], inv['reserved'],
                                 inv['allocation_ratio'])


@db_api.reader
def get_all(ctx, rp_id):
    """[{resource_class, total, ..., updated_at, created_at}] of a
    provider, ordered by class name, in the caller's transaction."""
    rows = ctx.session.execute(
        sa.select(*_COLUMNS)
        .select_from(_INV.join(
            models.RC, _INV.c.resource_class_id == models.RC.c.id))
        .where(_INV.c.resource_provider_id == rp_id)
        .order_by(models.RC.c.name))
    return [dict(r._mapping) for r in rows]


def get_for_provider(ctx, rp_uuid):
    """(the provider's generation, get_all's records) in one statement
    (provider_rows); ResourceProviderNotFound."""
    generation, rows = provider_rows.read(ctx, _OF_PROVIDER, rp_uuid,
                                          'resource_class')
    return generation, [dict(r._mapping) for r in rows]


def _rc_id(ctx, name):
    return rc_obj.id_for_name(ctx, name)


def _refuse_if_allocated(ctx, rp, rc_ids):
    """InventoryInUse naming the allocated classes among ``rc_ids`` in id
    order (standard classes in os-resource-classes order, then custom
    ones by creation), the order upstream's message lists them in."""
    names = [r[0] for r in ctx.session.execute(
        sa.select(models.RC.c.name)
        .where(models.RC.c.id.in_(
            sa.select(_ALLOC.c.resource_class_id).where(
                _ALLOC.c.resource_provider_id == rp.id,
                _ALLOC.c.resource_class_id.in_(rc_ids))))
        .order_by(models.RC.c.id))]
    if names:
        raise exception.InventoryInUse(resource_classes=', '.join(names),
                                       resource_provider=rp.uuid)


def _values(data):
    return {f: data[f] for f in FIELDS}


@db_api.retry_on_deadlock
@db_api.writer
def add(ctx, rp, rc_name, data):
    """Add one class; the new generation. ResourceClassNotFound,
    InventoryExists if the class is already there."""
    rc_id = _rc_id(ctx, rc_name)
    if ctx.session.execute(sa.select(_INV.c.id).where(
            _INV.c.resource_provider_id == rp.id,
            _INV.c.resource_class_id == rc_id)).first():
        raise exception.InventoryExists(resource_class=rc_name,
                                        resource_provider=rp.uuid)
    ctx.session.execute(_INV.insert().values(
        resource_provider_id=rp.id, resource_class_id=rc_id,
        created_at=models._now(), **_values(data)))
    return rp_obj.increment_generation(ctx, rp.id, rp.generation)


@db_api.retry_on_deadlock
@db_api.writer
def update(ctx, rp, rc_name, data):
    """Replace one class's record; the new generation. Shrinking below
    current usage is allowed (upstream only logs it)."""
    rc_id = _rc_id(ctx, rc_name)
    result = ctx.session.execute(
        _INV.update().where(_INV.c.resource_provider_id == rp.id,
                            _INV.c.resource_class_id == rc_id)
        .values(updated_at=models._now(), **_values(data)))
    if not result.rowcount:
        raise exception.InventoryWithResourceClassNotFound(
            resource_class=rc_name)
    return rp_obj.increment_generation(ctx, rp.id, rp.generation)


@db_api.retry_on_deadlock
@db_api.writer
def delete(ctx, rp, rc_name):
    """Remove one class; the new generation. InventoryInUse if allocated,
    NotFound if the provider has no such inventory."""
    rc_id = _rc_id(ctx, rc_name)
    _refuse_if_allocated(ctx, rp, [rc_id])
    result = ctx.session.execute(_INV.delete().where(
        _INV.c.resource_provider_id == rp.id,
        _INV.c.resource_class_id == rc_id))
    if not result.rowcount:
        raise exception.NotFound(
            'No inventory of class %s found for delete' % rc_name)
    return rp_obj.increment_generation(ctx, rp.id, rp.generation)


@db_api.retry_on_deadlock
@db_api.writer
def set_all(ctx, rp, inventories):
    """Make {class name: record} the provider's whole inventory; the new
    generation. Removing an allocated class raises InventoryInUse."""
    wanted = (rc_obj.ids_for_names(ctx, sorted(inventories))
              if inventories else {})
    have = {r[0] for r in ctx.session.execute(
        sa.select(_INV.c.resource_class_id).where(
            _INV.c.resource_provider_id == rp.id))}
    to_delete = have - set(wanted.values())
    if to_delete:
        _refuse_if_allocated(ctx, rp, to_delete)
        ctx.session.execute(_INV.delete().where(
            _INV.c.resource_provider_id == rp.id,
            _INV.c.resource_class_id.in_(to_delete)))
    now = models._now()
    for name, rc_id in sorted(wanted.items()):
        if rc_id in have:
            ctx.session.execute(
                _INV.update().where(_INV.c.resource_provider_id == rp.id,
                                    _INV.c.resource_class_id == rc_id)
                .values(updated_at=now, **_values(inventories[name])))
        else:
            ctx.session.execute(_INV.insert().values(
                resource_provider_id=rp.id, resource_class_id=rc_id,
                created_at=now, **_values(inventories[name])))
    return rp_obj.increment_generation(ctx, rp.id, rp.generation)
