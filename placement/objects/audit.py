"""Consistency audit for ``placement-manage audit``: what the API would
never write but an old release, a manual repair or a crash may have left.

Each finding is a dict with ``kind`` and the facts that locate it.
Only consumers without allocations are repaired (``delete_empty_consumers``):
nothing else has a single right answer.
"""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement.objects import capacity_rules

_ALLOC = models.ALLOC
_CONSUMER = models.CONSUMER
_INV = models.INV
_PROJECT = models.PROJECT
_RC = models.RC
_RP = models.RP
_USER = models.USER

OVER_CAPACITY = 'usage_over_capacity'
NO_INVENTORY = 'allocation_without_inventory'
BAD_UNIT = 'allocation_violates_units'
EMPTY_CONSUMER = 'consumer_without_allocations'
INCOMPLETE_CONSUMER = 'incomplete_consumer'
BROKEN_TREE = 'broken_provider_tree'
KINDS = (OVER_CAPACITY, NO_INVENTORY, BAD_UNIT, EMPTY_CONSUMER,
         INCOMPLETE_CONSUMER, BROKEN_TREE)


def _rp_rc(table):
    """Provider uuid and class name joined to ``table``'s ids (outer, so
    rows pointing at nothing are kept)."""
    return (table.outerjoin(_RP, _RP.c.id == table.c.resource_provider_id)
            .outerjoin(_RC, _RC.c.id == table.c.resource_class_id))


def over_capacity(ctx):
    used = (sa.select(_ALLOC.c.resource_provider_id.label('rp'),
                      _ALLOC.c.resource_class_id.label('rc'),
                      sa.func.sum(_ALLOC.c.used).label('used'))
            .group_by(_ALLOC.c.resource_provider_id,
                      _ALLOC.c.resource_class_id).subquery('used'))
    rows = ctx.session.execute(
        sa.select(_RP.c.uuid, _RP.c.name, _RC.c.name, used.c.used,
                  _INV.c.total, _INV.c.reserved, _INV.c.allocation_ratio)
        .select_from(_rp_rc(_INV).join(used, sa.and_(
            used.c.rp == _INV.c.resource_provider_id,
            used.c.rc == _INV.c.resource_class_id)))
        .order_by(_RP.c.uuid, _RC.c.name))
    out = []
    for uuid, name, rc, amount, total, reserved, ratio in rows:
        # Capacity as the allocation check computes it (a float).
        capacity = capacity_rules.capacity(total, reserved, ratio)
        if not capacity_rules.has_room(amount, 0, capacity):
            out.append({'kind': OVER_CAPACITY, 'provider': uuid,
                        'provider_name': name, 'resource_class': rc,
                        'used': int(amount), 'capacity': capacity})
    return out


def without_inventory(ctx):
    rows = ctx.session.execute(
        sa.select(_ALLOC.c.consumer_id, _RP.c.uuid,
                  _ALLOC.c.resource_provider_id, _RC.c.name,
                  _ALLOC.c.resource_class_id, _ALLOC.c.used)
        .select_from(_rp_rc(_ALLOC).outerjoin(_INV, sa.and_(
            _INV.c.resource_provider_id == _ALLOC.c.resource_provider_id,
            _INV.c.resource_class_id == _ALLOC.c.resource_class_id)))
        .where(_INV.c.id.is_(None))
        .order_by(_ALLOC.c.consumer_id, _ALLOC.c.id))
    return [{'kind': NO_INVENTORY, 'consumer': consumer,
             'provider': uuid or 'id %s (missing)' % rp_id,
             'resource_class': rc or 'id %s (missing)' % rc_id,
             'used': used}
            for consumer, uuid, rp_id, rc, rc_id, used in rows]


def unit_violations(ctx):
    rows = ctx.session.execute(
        sa.select(_ALLOC.c.consumer_id, _RP.c.uuid, _RC.c.name,
                  _ALLOC.c.used, _INV.c.min_unit, _INV.c.max_unit,
                  _INV.c.step_size)
        .select_from(_rp_rc(_ALLOC).join(_INV, sa.and_(
            _INV.c.resource_provider_id == _ALLOC.c.resource_provider_id,
            _INV.c.resource_class_id == _ALLOC.c.resource_class_id)))
        .where(sa.not_(capacity_rules.units_allow_sql(_INV,
                                                      _ALLOC.c.used)))
        .order_by(_ALLOC.c.consumer_id, _ALLOC.c.id))
    return [{'kind': BAD_UNIT, 'consumer': consumer, 'provider': uuid,
             'resource_class': rc, 'used': used, 'min_unit': lo,
             'max_unit': hi, 'step_size': step}
            for consumer, uuid, rc, used, lo, hi, step in rows]


def _empty_consumers_query():
    has = sa.exists().where(_ALLOC.c.consumer_id == _CONSUMER.c.uuid)
    return sa.select(_CONSUMER.c.id, _CONSUMER.c.uuid).where(~has)


def empty_consumers(ctx):
    rows = ctx.session.execute(
        _empty_consumers_query().order_by(_CONSUMER.c.uuid))
    return [{'kind': EMPTY_CONSUMER, 'consumer': uuid} for _id, uuid in rows]


def incomplete_consumers(ctx, project_id, user_id):
    rows = ctx.session.execute(
        sa.select(_CONSUMER.c.uuid, _PROJECT.c.external_id,
                  _USER.c.external_id)
        .select_from(
            _CONSUMER.outerjoin(_PROJECT,
                                _PROJECT.c.id == _CONSUMER.c.project_id)
            .outerjoin(_USER, _USER.c.id == _CONSUMER.c.user_id))
        .where(sa.or_(_PROJECT.c.external_id == project_id,
                      _USER.c.external_id == user_id))
        .order_by(_CONSUMER.c.uuid))
    out = [{'kind': INCOMPLETE_CONSUMER, 'consumer': uuid,
            'project_id': project, 'user_id': user}
           for uuid, project, user in rows]
    # Allocations written before consumers were recorded (the online
    # data migration gives them the defaults above): no project at all.
    missing = ctx.session.execute(
        sa.select(_ALLOC.c.consumer_id).distinct()
        .select_from(_ALLOC.outerjoin(
            _CONSUMER, _CONSUMER.c.uuid == _ALLOC.c.consumer_id))
        .where(_CONSUMER.c.id.is_(None)).order_by(_ALLOC.c.consumer_id))
    out += [{'kind': INCOMPLETE_CONSUMER, 'consumer': uuid,
             'project_id': None, 'user_id': None} for uuid, in missing]
    return out


def broken_trees(ctx):
    """Providers with no root, a root or parent that does not exist, a
    root that is not its parent's root (or a root that is not its own
    root), or a parent chain that loops."""
    rows = ctx.session.execute(
        sa.select(_RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id,
                  _RP.c.root_provider_id)).all()
    by_id = {r[0]: r for r in rows}
    out = []
    for rp_id, uuid, parent, root in rows:
        problem = None
        if root is None:
            problem = 'no root provider'
        elif root not in by_id:
            problem = 'root provider id %s does not exist' % root
        elif parent is not None and parent not in by_id:
            problem = 'parent provider id %s does not exist' % parent
        elif parent is None and root != rp_id:
            problem = 'has no parent but another root (%s)' % (
                by_id[root][1])
        elif parent is not None and by_id[parent][3] != root:
            problem = "root differs from its parent's root"
        else:
            seen = {rp_id}
            step = parent
            while step is not None:
                if step in seen:
                    problem = 'parent chain loops'
                    break
                seen.add(step)
                step = by_id[step][2] if step in by_id else None
        if problem:
            out.append({'kind': BROKEN_TREE, 'provider': uuid,
                        'problem': problem})
    return sorted(out, key=lambda f: f['provider'])


@db_api.reader
def find(ctx, project_id, user_id):
    """Every finding, in KINDS order. ``project_id``/``user_id`` are the
    incomplete-consumer defaults ([placement] incomplete_consumer_*)."""
    return (over_capacity(ctx) + without_inventory(ctx)
            + unit_violations(ctx) + empty_consumers(ctx)
            + incomplete_consumers(ctx, project_id, user_id)
            + broken_trees(ctx))


@db_api.writer
def delete_empty_consumers(ctx):
    """Delete consumers that have no allocations (in the same statement
    that checks, so a consumer that just got allocations is kept).
    Returns the uuids deleted."""
    uuids = [r[1] for r in ctx.session.execute(_empty_consumers_query())]
    if not uuids:
        return []
    has = sa.exists().where(_ALLOC.c.consumer_id == _CONSUMER.c.uuid)
    ctx.session.execute(
        _CONSUMER.delete().where(_CONSUMER.c.uuid.in_(uuids)).where(~has))
    left = {r[0] for r in ctx.session.execute(
        sa.select(_CONSUMER.c.uuid).where(_CONSUMER.c.uuid.in_(uuids)))}
    return sorted(u for u in uuids if u not in left)
