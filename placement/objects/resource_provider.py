"""Resource providers: the rows, trees and generations that every other
resource hangs off."""
from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import aggregate_rules
from placement.objects import capacity_rules
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj
from placement.objects import trait_rules

_RP = models.RP
_PARENT = _RP.alias('parent')
_ROOT = _RP.alias('root')

_PROVIDER_COLUMNS = (
    _RP.c.id, _RP.c.uuid, _RP.c.name, _RP.c.generation,
    _RP.c.parent_provider_id, _RP.c.root_provider_id,
    _RP.c.created_at, _RP.c.updated_at,
    _PARENT.c.uuid.label('parent_provider_uuid'),
    _ROOT.c.uuid.label('root_provider_uuid'),
)
_PROVIDER_FROM = _RP.outerjoin(
    _PARENT, _RP.c.parent_provider_id == _PARENT.c.id).join(
    _ROOT, _RP.c.root_provider_id == _ROOT.c.id)


_PROVIDER_SELECT = sa.select(*_PROVIDER_COLUMNS).select_from(_PROVIDER_FROM)


def provider_select():
    """SELECT of provider rows with parent and root uuids, for reuse (a
    statement is immutable: ``where`` makes a new one)."""
    return _PROVIDER_SELECT


@db_api.reader
def get_by_uuid(ctx, uuid):
    """One provider as a Row (id, uuid, name, generation, parent/root ids
    and uuids, timestamps); ResourceProviderNotFound if there is none."""
    row = ctx.session.execute(
        provider_select().where(_RP.c.uuid == uuid)).first()
    if row is None:
        raise exception.ResourceProviderNotFound(uuid=uuid)
    return row


# Built once: building an UPDATE costs more Python than running it.
_INCREMENT_GENERATION = (
    _RP.update()
    .where(_RP.c.id == sa.bindparam('rp_id'))
    .where(_RP.c.generation == sa.bindparam('expected'))
    .values(generation=sa.bindparam('new_generation'),
            updated_at=sa.bindparam('now')))


def increment_generation(ctx, rp_id, expected_generation):
    """Compare-and-swap the provider generation inside the caller's writer
    transaction; the new generation, or ResourceProviderConcurrentUpdate-
    Detected when someone else changed the provider first. Every write to a
    provider's inventories, traits, aggregates or allocations goes through
    here, which is what makes concurrent writers safe."""
    result = ctx.session.execute(_INCREMENT_GENERATION, {
        'rp_id': rp_id, 'expected': expected_generation,
        'new_generation': expected_generation + 1, 'now': models._now()})
    if result.rowcount != 1:
        raise exception.ResourceProviderConcurrentUpdateDetected()
    return expected_generation + 1


# --- provider traits (the trait vocabulary itself is objects.trait) ----

@db_api.retry_on_deadlock
@db_api.writer
def set_traits(ctx, rp_id, generation, trait_ids):
    """Make ``trait_ids`` exactly the traits of provider ``rp_id`` whose
    generation the caller saw as ``generation``; the provider's generation
    afterwards. The generation moves only when the set changes, and a
    concurrent writer makes this raise ResourceProviderConcurrentUpdate-
    Detected (409 placement.concurrent_update)."""
    have = {r[0] for r in ctx.session.execute(
        sa.select(models.RPT.c.trait_id).where(
            models.RPT.c.resource_provider_id == rp_id))}
    want = set(trait_ids)
    to_delete = have - want
    to_add = want - have
    if not to_delete and not to_add:
        return generation
    if to_delete:
        ctx.session.execute(models.RPT.delete().where(
            models.RPT.c.resource_provider_id == rp_id).where(
            models.RPT.c.trait_id.in_(sorted(to_delete))))
    if to_add:
        ctx.session.execute(models.RPT.insert(), [
            {'resource_provider_id': rp_id, 'trait_id': trait_id}
            for trait_id in sorted(to_add)])
    return increment_generation(ctx, rp_id, generation)


# --- filters of GET /resource_providers ----------------------------------

def providers_with_capacity(rc_id, amount):
    """SELECT of provider ids whose inventory of rc_id can take ``amount``
    now: unused capacity, min_unit, max_unit and step_size all allow it."""
    inv = models.INV
    alloc = models.ALLOC
    used = (sa.select(alloc.c.resource_provider_id,
                      sa.func.sum(alloc.c.used).label('used'))
            .where(alloc.c.resource_class_id == rc_id)
            .group_by(alloc.c.resource_provider_id)
            .subquery('usage'))
    return (sa.select(inv.c.resource_provider_id)
            .select_from(inv.outerjoin(
                used, inv.c.resource_provider_id == used.c.resource_provider_id))
            .where(inv.c.resource_class_id == rc_id,
                   capacity_rules.has_room_sql(
                       inv, sa.func.coalesce(used.c.used, 0), amount),
                   capacity_rules.units_allow_sql(inv, amount)))


# A tree by the uuid of any of its providers (in_tree): built once, as its
# columns cost more to build than the query to run.
_TREE = _RP.alias('tree')
_ROOT_OF_UUID = sa.select(_TREE.c.root_provider_id).where(
    _TREE.c.uuid == sa.bindparam('in_tree')).scalar_subquery()


def get_all_by_filters(ctx, name=None, uuid=None, member_of=(),
                       forbidden_aggs=(), required_traits=(),
                       forbidden_traits=(), resources=None, in_tree=None):
    """Provider rows (as get_by_uuid's) matching every filter given.

    member_of: list of sets of aggregate uuids; required_traits: list of
    sets of trait names; resources: {class name: amount}. Unknown trait or
    class names raise TraitNotFound / ResourceClassNotFound.
    """
    query = provider_select()
    params = {}
    # An empty name or uuid filters nothing, as upstream.
    if name:
        query = query.where(_RP.c.name == name)
    if uuid:
        query = query.where(_RP.c.uuid == uuid)
    if in_tree:
        query = query.where(_RP.c.root_provider_id == _ROOT_OF_UUID)
        params['in_tree'] = in_tree
    if required_traits or forbidden_traits:
        ids = trait_obj.ids_for_names(ctx, sorted(
            set().union(*required_traits) | set(forbidden_traits)))
        query = query.where(*trait_rules.required_traits_sql(
            _RP.c.id, [{ids[n] for n in any_of} for any_of in required_traits]))
        if forbidden_traits:
            query = query.where(trait_rules.forbidden_traits_sql(
                _RP.c.id, {ids[n] for n in forbidden_traits}))
    # A provider's own aggregates only (allocation candidates' unnumbered
    # group also counts its root's), as upstream.
    if member_of:
        query = query.where(aggregate_rules.member_of_sql(
            _RP.c.id, member_of, by_uuid=True))
    if forbidden_aggs:
        query = query.where(aggregate_rules.forbidden_aggregates_sql(
            _RP.c.id, set(forbidden_aggs), by_uuid=True))
    if resources:
        rc_ids = rc_obj.ids_for_names(ctx, sorted(resources))
        for rc_name, amount in resources.items():
            query = query.where(_RP.c.id.in_(
                providers_with_capacity(rc_ids[rc_name], amount)))
    # One statement: outside a transaction, on an unpinged connection.
    return db_api.one_statement_read(ctx, query.order_by(_RP.c.id), params)


# --- writes ---------------------------------------------------------------

def _duplicates(ctx, uuid, name):
    """'uuid: X' / 'name: Y' for whichever is already taken."""
    taken = []
    rows = ctx.session.execute(
        sa.select(_RP.c.uuid, _RP.c.name).where(
            sa.or_(_RP.c.uuid == uuid, _RP.c.name == name))).fetchall()
    if uuid is not None and any(r.uuid == uuid for r in rows):
        taken.append('uuid: %s' % uuid)
    if any(r.name == name for r in rows):
        taken.append('name: %s' % name)
    return taken


def _ids(ctx, uuid):
    return ctx.session.execute(
        sa.select(_RP.c.id, _RP.c.parent_provider_id,
                  _RP.c.root_provider_id).where(_RP.c.uuid == uuid)).first()


@db_api.retry_on_deadlock
@db_api.writer
def create(ctx, uuid, name, parent_uuid=None):
    """Insert a provider (root of its own tree unless parent_uuid) and
    return its row. ResourceProviderExists on a taken uuid or name;
    ObjectActionError for a missing or self parent."""
    if not name:
        raise exception.ObjectActionError(action='create',
                                          reason='name is required')
    if parent_uuid is not None:
        if parent_uuid == uuid:
            raise exception.ObjectActionError(
                action='create',
                reason='parent provider UUID cannot be same as UUID. '
                       'Please set parent provider UUID to None if there '
                       'is no parent.')
        parent = _ids(ctx, parent_uuid)
        if parent is None:
            raise exception.ObjectActionError(
                action='create', reason='parent provider UUID does not exist.')
    taken = _duplicates(ctx, uuid, name)
    if taken:
        raise exception.ResourceProviderExists(duplicates=', '.join(taken))
    values = dict(uuid=uuid, name=name, generation=0,
                  created_at=models._now())
    if parent_uuid is not None:
        values.update(parent_provider_id=parent.id,
                      root_provider_id=parent.root_provider_id)
    try:
        result = ctx.session.execute(_RP.insert().values(**values))
    except (db_exc.DBDuplicateEntry, sa.exc.IntegrityError) as exc:
        # Lost a race with another creator; the transaction is spoilt, so
        # name the clash from the constraint oslo.db reports.
        cols = ' '.join(getattr(exc, 'columns', None) or ['uuid'])
        taken = (['uuid: %s' % uuid] if 'uuid' in cols else []) + (
            ['name: %s' % name] if 'name' in cols else [])
        raise exception.ResourceProviderExists(
            duplicates=', '.join(taken) or 'uuid: %s' % uuid)
    new_id = result.inserted_primary_key[0]
    if parent_uuid is None:
        ctx.session.execute(_RP.update().where(_RP.c.id == new_id)
                            .values(root_provider_id=new_id))
    return get_by_uuid(ctx, uuid)


def _subtree_ids(ctx, rp_id, root_id):
    """Ids of rp_id and all its descendants (one query over the tree)."""
    children = {}
    for row in ctx.session.execute(
            sa.select(_RP.c.id, _RP.c.parent_provider_id)
            .where(_RP.c.root_provider_id == root_id)):
        children.setdefault(row.parent_provider_id, []).append(row.id)
    found = [rp_id]
    stack = [rp_id]
    while stack:
        kids = children.get(stack.pop(), [])
        found.extend(kids)
        stack.extend(kids)
    return found


_NOT_GIVEN = object()


@db_api.retry_on_deadlock
@db_api.writer
def update(ctx, uuid, name, parent_uuid=_NOT_GIVEN, allow_reparenting=False):
    """Rename and/or (re-, un-)parent a provider; its new row.

    Giving a parent to a root is always allowed; changing or removing a
    parent only with allow_reparenting (1.37). Loops are refused and the
    whole moved subtree takes the new root.
    """
    me = _ids(ctx, uuid)
    if me is None:
        raise exception.ResourceProviderNotFound(uuid=uuid)
    if ctx.session.execute(sa.select(_RP.c.id).where(
            _RP.c.name == name, _RP.c.id != me.id)).first():
        raise exception.ResourceProviderExists(duplicates=name)
    values = {'name': name, 'updated_at': models._now()}
    new_root = None
    if parent_uuid is not _NOT_GIVEN:
        if parent_uuid is not None:
            parent = _ids(ctx, parent_uuid)
            if parent is None:
                raise exception.ObjectActionError(
                    action='create',
                    reason='parent provider UUID does not exist.')
            if (me.parent_provider_id is not None
                    and me.parent_provider_id != parent.id
                    and not allow_reparenting):
                raise exception.ObjectActionError(
                    action='update',
                    reason='re-parenting a provider is not currently '
                           'allowed.')
            subtree = _subtree_ids(ctx, me.id, me.root_provider_id)
            if parent.id in subtree:
                raise exception.ObjectActionError(
                    action='update',
                    reason='creating loop in the provider tree is not '
                           'allowed.')
            values['parent_provider_id'] = parent.id
            new_root = parent.root_provider_id
        elif me.parent_provider_id is not None:
            if not allow_reparenting:
                raise exception.ObjectActionError(
                    action='update',
                    reason='un-parenting a provider is not currently '
                           'allowed.')
            subtree = _subtree_ids(ctx, me.id, me.root_provider_id)
            values['parent_provider_id'] = None
            new_root = me.id
    if new_root is not None and new_root != me.root_provider_id:
        ctx.session.execute(_RP.update().where(_RP.c.id.in_(subtree))
                            .values(root_provider_id=new_root))
    try:
        ctx.session.execute(_RP.update().where(_RP.c.id == me.id)
                            .values(**values))
    except (db_exc.DBDuplicateEntry, sa.exc.IntegrityError):
        raise exception.ResourceProviderExists(duplicates=name)
    return get_by_uuid(ctx, uuid)


@db_api.retry_on_deadlock
@db_api.writer
def delete(ctx, uuid):
    """Delete a provider with its inventories, traits and aggregate links.
    CannotDeleteParentResourceProvider if it has children,
    ResourceProviderInUse if it has allocations."""
    me = _ids(ctx, uuid)
    if me is None:
        raise exception.ResourceProviderNotFound(uuid=uuid)
    if ctx.session.execute(sa.select(_RP.c.id).where(
            _RP.c.parent_provider_id == me.id).limit(1)).first():
        raise exception.CannotDeleteParentResourceProvider()
    if ctx.session.execute(sa.select(models.ALLOC.c.id).where(
            models.ALLOC.c.resource_provider_id == me.id).limit(1)).first():
        raise exception.ResourceProviderInUse()
    for table in (models.INV, models.RPA, models.RPT):
        ctx.session.execute(table.delete().where(
            table.c.resource_provider_id == me.id))
    # A root refers to itself; clear that so the row can go on every backend.
    ctx.session.execute(_RP.update().where(_RP.c.id == me.id)
                        .values(root_provider_id=None))
    try:
        ctx.session.execute(_RP.delete().where(_RP.c.id == me.id))
    except (db_exc.DBReferenceError, sa.exc.IntegrityError):
        # A child was added concurrently.
        raise exception.CannotDeleteParentResourceProvider()
