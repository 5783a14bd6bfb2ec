"""Allocations: claims of consumers on provider inventory.

Every write replaces the whole allocation set of each consumer it names, in
one writer transaction that (1) reads the generations of the providers it
will touch, (2) checks min_unit / max_unit / step_size and capacity against
usage read *after* those generations, and (3) compare-and-swaps each
touched provider's generation before commit. A writer that raced another
writer on the same provider therefore fails step (3) and retries the whole
transaction (``[placement] allocation_conflict_retry_count`` times, as
upstream), so two writers can never both commit past capacity on any
database. Providers are locked in id order to keep MySQL from deadlocking.
"""
import collections
import contextlib
import dataclasses
import random
import time
import typing

from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from placement.db import api as db_api
from placement.db import batch
from placement.db import models
from placement import errors
from placement import exception
from placement.objects import allocation_rows
from placement.objects import capacity_rules
from placement.objects import consumer as consumer_obj
from placement.objects import provider_rows
from placement.objects import resource_class as rc_obj

LOG = logging.getLogger(__name__)

_ALLOC = models.ALLOC
_INV = models.INV
_RP = models.RP
_RC = models.RC
_CONSUMER = models.CONSUMER
_PROJECT = models.PROJECT
_USER = models.USER
_CONSUMER_TYPE = models.CONSUMER_TYPE


# --- errors (upstream's texts) ------------------------------------------

class InvalidInventory(exception.Conflict):
    msg_fmt = ("Inventory for '%(resource_class)s' on "
               "resource provider '%(resource_provider)s' invalid.")


class InvalidAllocationCapacityExceeded(InvalidInventory):
    msg_fmt = ("Unable to create allocation for '%(resource_class)s' on "
               "resource provider '%(resource_provider)s'. The requested "
               "amount would exceed the capacity.")


class InvalidAllocationConstraintsViolated(InvalidInventory):
    msg_fmt = ("Unable to create allocation for '%(resource_class)s' on "
               "resource provider '%(resource_provider)s'. The requested "
               "amount would violate inventory constraints.")


class ConsumerGenerationConflict(exception.Conflict):
    """The client's consumer_generation is not the stored one (1.28+)."""
    code = errors.CONCURRENT_UPDATE
    msg_fmt = ('consumer generation conflict - '
               'expected %(expected)s but got %(got)s')


class AllocationProviderNotFound(exception.BadRequest):
    msg_fmt = ("Allocation for resource provider '%(uuid)s' "
               "that does not exist.")


# --- what a write asks for ----------------------------------------------

# The consumer_generation value meaning "this request predates 1.28 and
# does not check the consumer generation".
NO_CHECK = object()


@dataclasses.dataclass
class ConsumerWrite:
    """The whole new allocation set of one consumer.

    ``allocations`` is {provider_uuid: {resource_class: amount}}; empty
    means "remove this consumer's allocations". ``project_id`` and
    ``user_id`` are external ids. ``generation`` is NO_CHECK (before 1.28),
    None (a consumer expected to be new) or the expected generation.
    ``consumer_type`` is a name from 1.38, else None (keep what is stored).
    """
    uuid: str
    allocations: dict
    project_id: str
    user_id: str
    generation: typing.Any = NO_CHECK
    consumer_type: typing.Optional[str] = None


@dataclasses.dataclass
class _Owners:
    project_ids: dict
    user_ids: dict
    type_ids: dict


class _OwnersMissing(Exception):
    """Some project, user or consumer type the writes name has no row yet:
    they are created outside the allocation transaction, which is then run
    again."""


def resolve_owners(ctx, writes):
    """Ids of the projects, users and consumer types the writes name; the
    missing ones are created (each in its own short transaction, before the
    allocation transaction)."""
    projects, users, types = consumer_obj.lookup_owner_ids(
        ctx, [w.project_id for w in writes], [w.user_id for w in writes],
        [w.consumer_type for w in writes if w.consumer_type])
    owners = _Owners(projects, users, types)
    for w in writes:
        if w.project_id not in owners.project_ids:
            owners.project_ids[w.project_id] = (
                consumer_obj.get_or_create_project(ctx, w.project_id))
        if w.user_id not in owners.user_ids:
            owners.user_ids[w.user_id] = (
                consumer_obj.get_or_create_user(ctx, w.user_id))
        if w.consumer_type and w.consumer_type not in owners.type_ids:
            owners.type_ids[w.consumer_type] = (
                consumer_obj.get_or_create_consumer_type(
                    ctx, w.consumer_type))
    return owners


def _in(column, name, pg):
    """``column IN (:name...)``: on PostgreSQL ``column = ANY(:name)``
    with the list as one array parameter (an expanding IN costs some
    20 us of Python per execution to render its parameters), elsewhere an
    expanding parameter."""
    if pg:
        return column == sa.any_(
            sa.bindparam(name, type_=postgresql.ARRAY(column.type)))
    return column.in_(sa.bindparam(name, expanding=True))


def _consumer_reader(with_owners, with_types, with_state=False, pg=False):
    """The one-round-trip read of _read_consumers, built once per shape
    (``batch.Many``): parameters ``uuids`` and, with owners, ``projects``,
    ``users`` and (with types) ``types``; with the provider state,
    ``rp_uuids`` and ``rc_ids`` (see _provider_state_select). ``pg``:
    lists as PostgreSQL arrays (_in)."""
    key = (with_owners, with_types, with_state, pg)
    many = _CONSUMER_READERS.get(key)
    if many is not None:
        return many
    selects = {
        'consumers': sa.select(
            _CONSUMER.c.id, _CONSUMER.c.uuid, _CONSUMER.c.generation,
            _CONSUMER.c.consumer_type_id, _CONSUMER.c.project_id,
            _CONSUMER.c.user_id).where(_in(_CONSUMER.c.uuid, 'uuids', pg)),
        'current': sa.select(
            _ALLOC.c.id, _ALLOC.c.consumer_id, _ALLOC.c.resource_provider_id,
            _ALLOC.c.resource_class_id, _ALLOC.c.used)
        .where(_in(_ALLOC.c.consumer_id, 'uuids', pg)),
    }
    if with_owners:
        selects['projects'] = sa.select(
            _PROJECT.c.external_id, _PROJECT.c.id).where(
            _in(_PROJECT.c.external_id, 'projects', pg))
        selects['users'] = sa.select(
            _USER.c.external_id, _USER.c.id).where(
            _in(_USER.c.external_id, 'users', pg))
        if with_types:
            selects['types'] = sa.select(
                _CONSUMER_TYPE.c.name, _CONSUMER_TYPE.c.id).where(
                _in(_CONSUMER_TYPE.c.name, 'types', pg))
    if with_state:
        selects['state'] = _provider_state_select(True, False, pg)
    many = _CONSUMER_READERS[key] = batch.Many(**selects)
    return many


_CONSUMER_READERS = {}


def _read_consumers(ctx, writes, owners, state_of=None, pg=False):
    """The owners' ids (unless ``owners`` is given), the consumers and
    their current allocations (with or without a consumer row), in one
    round trip, in the caller's transaction: (owners, {uuid: consumer},
    [allocation], state). _OwnersMissing when a project, user or consumer
    type must be created first.

    ``state_of`` (provider uuids, class ids) asks for _provider_state of
    those in the same round trip (the state is None without it): when
    no write empties a consumer, what it reads does not depend on the
    consumers' current allocations."""
    params = {'uuids': sorted({w.uuid for w in writes})}
    types = sorted({w.consumer_type for w in writes if w.consumer_type})
    if owners is None:
        params['projects'] = sorted({w.project_id for w in writes})
        params['users'] = sorted({w.user_id for w in writes})
        if types:
            params['types'] = types
    if state_of is not None:
        params['rp_uuids'], params['rc_ids'] = state_of
    found = _consumer_reader(owners is None, bool(types) and owners is None,
                             state_of is not None, pg).run(ctx, params)
    state = None
    if state_of is not None:
        state = _fold_state(found['state'])
    if owners is None:
        owners = _Owners(
            {r.external_id: r.id for r in found['projects']},
            {r.external_id: r.id for r in found['users']},
            {r.name: r.id for r in found.get('types', ())})
        if (any(w.project_id not in owners.project_ids
                or w.user_id not in owners.user_ids for w in writes)
                or any(t not in owners.type_ids for t in types)):
            raise _OwnersMissing()
    return (owners, {r.uuid: r for r in found['consumers']},
            found['current'], state)


# --- the write ----------------------------------------------------------

def replace_all(ctx, writes):
    """Replace the allocations of every consumer in ``writes`` atomically.

    Retries the whole transaction on a provider generation conflict (and on
    a deadlock or a consumer created concurrently), then gives up with
    ResourceProviderConcurrentUpdateDetected.
    """
    owners = None
    attempts = max(1, ctx.config.placement.allocation_conflict_retry_count)
    attempt = 0
    # The first try skips the pool's ping (a round trip): a connection
    # found lost by the first statement, before anything was written, is
    # the ping's failure found one step later, and the write runs again.
    ping = False
    while attempt < attempts:
        attempt += 1
        progress = {'sent': False}
        checkout = (contextlib.nullcontext() if ping
                    else db_api.unpinged_checkout())
        try:
            with checkout:
                return _replace_all_txn(ctx, writes, owners, progress)
        except _OwnersMissing:
            # Not a conflict: make the missing rows, and the write again
            # (with every owner known, this cannot happen twice).
            owners = resolve_owners(ctx, writes)
            attempt -= 1
        except (exception.ResourceProviderConcurrentUpdateDetected,
                db_exc.DBDeadlock, db_exc.DBDuplicateEntry) as exc:
            db_api.note_deadlock(exc, 'allocations write')
            LOG.debug('Retrying allocations write (attempt %d of %d): %s',
                      attempt, attempts, type(exc).__name__)
            if attempt < attempts:
                # A little jitter stops losers of one race from all
                # colliding again on the next try.
                time.sleep(random.uniform(0, 0.005 * attempt))
        except Exception as exc:
            if db_api.note_unparsed_trigger(exc, 'allocations write'):
                continue
            if ping or progress['sent'] or not db_api.is_disconnect(exc):
                raise
            LOG.debug('Pooled connection lost; allocations write again '
                      'on a checked one')
            ping = True
            attempt -= 1
    LOG.warning('Exceeded retry limit of %d on allocations write', attempts)
    raise exception.ResourceProviderConcurrentUpdateDetected()


@db_api.writer
def _replace_all_txn(ctx, writes, owners, progress=None):
    return apply_in_txn(ctx, writes, owners, progress)


def _check_consumer_generations(writes, consumers):
    for w in writes:
        if w.generation is NO_CHECK:
            continue
        row = consumers.get(w.uuid)
        if row is None:
            if w.generation is not None:
                raise ConsumerGenerationConflict(
                    'consumer generation conflict - expected null but '
                    'got %s' % w.generation)
        elif row.generation != w.generation:
            raise ConsumerGenerationConflict(
                expected=row.generation, got=w.generation)


def _wanted_providers(writes):
    """The provider uuids the writes name, in request order."""
    return list(dict.fromkeys(
        rp_uuid for w in writes for rp_uuid in w.allocations))


def _lock_providers(ctx, rp_uuids, dialect):
    """Row-lock the providers in id order (a fixed order: no deadlock
    between two writers of the same providers). SQLite needs none: its
    writers already run one at a time (BEGIN IMMEDIATE). On PostgreSQL
    the next statement's snapshot then shows the previous holder's commit;
    on MySQL this is the transaction's first statement when it can be,
    so its snapshot is taken after the lock too."""
    if not rp_uuids or dialect == 'sqlite':
        return
    ctx.session.execute(_LOCK_PROVIDERS[dialect == 'postgresql'],
                        {'uuids': rp_uuids}).all()


# The statements of the write, built once (building a statement costs
# more Python than running it); lists are expanding parameters, or
# arrays on PostgreSQL (_in).
_LOCK_PROVIDERS = {
    pg: sa.select(_RP.c.id).where(_in(_RP.c.uuid, 'uuids', pg))
    .order_by(_RP.c.id).with_for_update()
    for pg in (False, True)}


def _providers_by_uuid(ctx, writes):
    """Refuse the first provider uuid that does not exist (for the error
    path only: the write reads providers in _provider_state)."""
    wanted = _wanted_providers(writes)
    if not wanted:
        return
    found = {r[0] for r in ctx.session.execute(
        sa.select(_RP.c.uuid).where(_RP.c.uuid.in_(wanted)))}
    for rp_uuid in wanted:
        if rp_uuid not in found:
            raise AllocationProviderNotFound(uuid=rp_uuid)


def _class_ids(ctx, writes):
    """{name: id} of the classes named (from the shared name/id cache);
    ResourceClassNotFound for unknown ones."""
    names = list(dict.fromkeys(
        name for w in writes for resources in w.allocations.values()
        for name in resources))
    if not names:
        return {}
    return rc_obj.ids_for_names(ctx, names)


@dataclasses.dataclass
class _ProviderState:
    """What the capacity check needs, read in one statement (so on every
    database the usage is the one of the generations read with it)."""
    providers: dict      # uuid -> Row(id, uuid, generation)
    inventories: dict    # (rp_id, rc_id) -> Row(total, reserved, ...)
    usage: dict          # (rp_id, rc_id) -> used, this write's consumers
                         # still included


def _provider_state_select(by_uuid, by_id, pg=False):
    """The SELECT of _provider_state, built once per shape: parameters
    ``rp_uuids`` (when ``by_uuid``), ``rp_ids`` (when ``by_id``) and
    ``rc_ids`` (PostgreSQL arrays with ``pg``)."""
    key = (by_uuid, by_id, pg)
    sel = _PROVIDER_STATE.get(key)
    if sel is not None:
        return sel
    used = (sa.select(sa.func.coalesce(sa.func.sum(_ALLOC.c.used), 0))
            .where(_ALLOC.c.resource_provider_id == _RP.c.id,
                   _ALLOC.c.resource_class_id == _INV.c.resource_class_id)
            .scalar_subquery())
    which = []
    if by_uuid:
        which.append(_in(_RP.c.uuid, 'rp_uuids', pg))
    if by_id:
        which.append(_in(_RP.c.id, 'rp_ids', pg))
    sel = _PROVIDER_STATE[key] = (
        sa.select(_RP.c.id, _RP.c.uuid, _RP.c.generation,
                  _INV.c.resource_class_id, _INV.c.total, _INV.c.reserved,
                  _INV.c.min_unit, _INV.c.max_unit, _INV.c.step_size,
                  _INV.c.allocation_ratio, used.label('used'))
        .select_from(_RP.outerjoin(_INV, sa.and_(
            _INV.c.resource_provider_id == _RP.c.id,
            _in(_INV.c.resource_class_id, 'rc_ids', pg))))
        .where(sa.or_(*which)))
    return sel


_PROVIDER_STATE = {}


def _provider_state(ctx, rp_uuids, rp_ids, rc_ids):
    """Providers named by uuid or id with their generations, their
    inventories of ``rc_ids`` and the usage of each, in one round trip."""
    params = {'rc_ids': sorted(rc_ids)}
    if rp_uuids:
        params['rp_uuids'] = rp_uuids
    if rp_ids:
        params['rp_ids'] = sorted(rp_ids)
    return _fold_state(ctx.session.execute(
        _provider_state_select(bool(rp_uuids), bool(rp_ids)), params))


def _fold_state(rows):
    """_ProviderState from the rows of _provider_state_select."""
    state = _ProviderState({}, {}, {})
    for r in rows:
        state.providers.setdefault(r.uuid, r)
        if r.resource_class_id is not None:
            key = (r.id, r.resource_class_id)
            state.inventories[key] = r
            state.usage[key] = int(r.used or 0)
    return state


def _check_capacity(items, rc_names, inventories, usage, prev_usage):
    """Refuse items that break an inventory's unit rules or capacity.

    ``items`` is [(rp_row, rc_id, amount)] in request order; amount 0 marks
    a class being emptied. ``usage`` is what others hold (the writing
    consumers' current claims taken out), ``prev_usage`` what all held
    before this write. Units and capacity are capacity_rules'; the
    write's total on a key counts. A write that leaves a provider over
    capacity is allowed when it makes the overage no worse than before
    (as upstream allows)."""
    rc_ids = {rc for _rp, rc, _n in items}
    with_inventory = {rp_id for rp_id, _rc in inventories}
    missing = sorted({rp.uuid for rp, _rc, _n in items
                      if rp.id not in with_inventory})
    if missing:
        raise InvalidInventory(
            resource_class=', '.join(rc_names[rc] for rc in sorted(rc_ids)),
            resource_provider=', '.join(missing))

    running = collections.defaultdict(int)
    for rp, rc_id, amount in items:
        key = (rp.id, rc_id)
        running[key] += amount
        if amount == 0:
            continue
        inv = inventories.get(key)
        name = rc_names[rc_id]
        if inv is None:
            raise InvalidInventory(resource_class=name,
                                   resource_provider=rp.uuid)
        lo, hi, step = inv.min_unit, inv.max_unit, inv.step_size
        if not capacity_rules.units_allow(amount, lo, hi, step):
            LOG.warning('Allocation for %s on resource provider %s violates '
                        'min_unit, max_unit, or step_size. Requested: %s, '
                        'min_unit: %s, max_unit: %s, step_size: %s',
                        name, rp.uuid, amount, lo, hi, step)
            raise InvalidAllocationConstraintsViolated(
                resource_class=name, resource_provider=rp.uuid)
        used, capacity = usage.get(key, 0), capacity_rules.capacity(
            inv.total, inv.reserved, inv.allocation_ratio)
        if not capacity_rules.has_room(used, running[key], capacity):
            prev_used = prev_usage.get(key)
            if capacity_rules.reduces_overage(used, running[key], prev_used):
                LOG.warning('Over capacity for %s on resource provider %s '
                            'but allocation reduces existing overage from '
                            '%s to %s', name, rp.uuid, prev_used,
                            used + running[key])
                continue
            LOG.warning('Over capacity for %s on resource provider %s. '
                        'Needed: %s, Used: %s, Capacity: %s',
                        name, rp.uuid, amount, used, capacity)
            raise InvalidAllocationCapacityExceeded(
                resource_class=name, resource_provider=rp.uuid)


def apply_in_txn(ctx, writes, owners=None, progress=None):
    """The allocation write, inside the caller's writer transaction.

    ``owners`` (from resolve_owners) when the caller made sure they
    exist; else they are read here and _OwnersMissing is raised when some
    are not. Raises ConsumerGenerationConflict, AllocationProviderNotFound,
    ResourceClassNotFound, InvalidInventory (and subclasses), or
    ResourceProviderConcurrentUpdateDetected for the caller to retry.
    ``progress['sent']`` (when given) turns True before the first write
    statement: until then a lost connection has changed nothing.

    Round trips for one new consumer on one provider: the provider lock
    (not on SQLite); owners, consumers, their current claims and the
    providers with inventory and usage; then the consumer, allocation and
    generation writes (five statements; see
    doc/source/allocation-writes.rst).
    """
    # 0. Wait here for the other writers of these providers to finish,
    # so that what is read next is what they left and the generation CAS
    # (still the guard) rarely fails: no work thrown away and redone.
    wanted = _wanted_providers(writes)
    dialect = ctx.session.get_bind().dialect.name
    pg = dialect == 'postgresql'
    _lock_providers(ctx, wanted, dialect)
    # 1. Owners, consumers and what they hold now, in one round trip;
    # the client's view of the consumer generations is checked first.
    # Classes come from a cache; when no write empties a consumer the
    # providers' state (step 2) is read in that round trip too.
    try:
        rc_ids = _class_ids(ctx, writes)
    except exception.ResourceClassNotFound as exc:
        rc_ids, unknown_class = None, exc
    emptied = [w.uuid for w in writes if not w.allocations]
    state_of = None
    if rc_ids is not None and wanted and not emptied:
        state_of = (wanted, sorted(rc_ids.values()))
    owners, consumers, current, state = _read_consumers(
        ctx, writes, owners, state_of, pg)
    _check_consumer_generations(writes, consumers)

    # 2. Providers with their generations, inventories and usage. A
    # consumer whose set is emptied contributes its current (provider,
    # class) pairs with amount 0, so those providers' generations move
    # too, as upstream does.
    if rc_ids is None:
        _providers_by_uuid(ctx, writes)   # an unknown provider says so first
        raise unknown_class
    rc_names = {v: k for k, v in rc_ids.items()}
    pairs = [(c.resource_provider_id, c.resource_class_id)
             for c in current if c.consumer_id in emptied]
    if pairs:
        rc_names.update(rc_obj.names_for_ids(
            ctx, sorted({p[1] for p in pairs})))
    if state is None and (wanted or pairs):
        state = _provider_state(ctx, wanted, {p[0] for p in pairs},
                                set(rc_names))
    elif state is None:
        state = _ProviderState({}, {}, {})
    providers = state.providers
    for rp_uuid in wanted:
        if rp_uuid not in providers:
            raise AllocationProviderNotFound(uuid=rp_uuid)

    items = []
    if pairs:
        by_id = {r.id: r for r in providers.values()}
        items.extend((by_id[rp_id], rc_id, 0) for rp_id, rc_id in pairs)
    for w in writes:
        for rp_uuid, resources in w.allocations.items():
            rp = providers[rp_uuid]
            for name, amount in resources.items():
                items.append((rp, rc_ids[name], amount))

    # 3. Unit rules and capacity, against the usage of everyone but the
    # writing consumers (their current claims are being replaced).
    if items:
        usage = dict(state.usage)
        for c in current:
            key = (c.resource_provider_id, c.resource_class_id)
            if key in usage:
                usage[key] -= c.used
        _check_capacity(items, rc_names, state.inventories, usage,
                        state.usage if current else usage)

    # 4. Consumers: the new ones are created (at the generation this
    # write gives them), the owner and type of the rest updated.
    if progress is not None:
        progress['sent'] = True
    now = models._now()
    created, to_bump = [], []
    for w in writes:
        project_id = owners.project_ids[w.project_id]
        user_id = owners.user_ids[w.user_id]
        type_id = owners.type_ids.get(w.consumer_type)
        row = consumers.get(w.uuid)
        if row is None:
            created.append((w.uuid, project_id, user_id, type_id))
            continue
        to_bump.append((row.id, row.generation))
        changes = {}
        if row.project_id != project_id or row.user_id != user_id:
            changes.update(project_id=project_id, user_id=user_id)
        if type_id is not None and row.consumer_type_id != type_id:
            changes['consumer_type_id'] = type_id
        if changes:
            consumer_obj.update_in_txn(ctx, row.id, **changes)

    # 5.-7. Out with the old allocations (by primary key: no gap locks on
    # MySQL), in with the new, then the generations: every touched
    # provider (a writer that raced us on one of them fails here and
    # retries), then the existing consumers.
    rows = []
    for w in writes:
        for rp_uuid, resources in w.allocations.items():
            rp = providers[rp_uuid]
            for name, amount in resources.items():
                rows.append({'resource_provider_id': rp.id,
                             'consumer_id': w.uuid,
                             'resource_class_id': rc_ids[name],
                             'used': amount, 'created_at': now})
    touched = {rp.id: rp for rp, _rc, _n in items}
    old_ids = sorted(c.id for c in current)
    allocation_rows.write(ctx, now, created, old_ids, rows, touched,
                          to_bump, in_one=pg and not emptied)

    # 8. Consumers left with nothing are removed.
    if emptied:
        consumer_obj.delete_if_no_allocations(ctx, emptied)
    return {rp.uuid: rp.generation + 1 for rp in touched.values()}


# --- reads ----------------------------------------------------------------

_BY_CONSUMER = (
    sa.select(
        _RP.c.uuid.label('resource_provider_uuid'),
        _RP.c.generation.label('resource_provider_generation'),
        _RC.c.name.label('resource_class'),
        _ALLOC.c.used, _ALLOC.c.created_at, _ALLOC.c.updated_at,
        _CONSUMER.c.generation.label('consumer_generation'),
        _CONSUMER.c.consumer_type_id,
        _CONSUMER_TYPE.c.name.label('consumer_type'),
        _PROJECT.c.external_id.label('project_id'),
        _USER.c.external_id.label('user_id'))
    .select_from(
        _ALLOC.join(_RP, _ALLOC.c.resource_provider_id == _RP.c.id)
        .join(_RC, _ALLOC.c.resource_class_id == _RC.c.id)
        .join(_CONSUMER, _ALLOC.c.consumer_id == _CONSUMER.c.uuid)
        .join(_PROJECT, _CONSUMER.c.project_id == _PROJECT.c.id)
        .join(_USER, _CONSUMER.c.user_id == _USER.c.id)
        .outerjoin(_CONSUMER_TYPE,
                   _CONSUMER.c.consumer_type_id == _CONSUMER_TYPE.c.id))
    .where(_ALLOC.c.consumer_id == sa.bindparam('consumer'))
    .order_by(_ALLOC.c.id))


def get_by_consumer(ctx, consumer_uuid):
    """The consumer's allocations, one Row per (provider, class), with the
    provider uuid and generation, class name, amount, timestamps, and the
    consumer's generation, type (id, and name: None when it has none) and
    project/user external ids.

    One statement (clients read a consumer before each rewrite of it):
    outside a transaction where the database allows it, on a pooled
    connection taken without the liveness ping; one found lost is
    replaced and the read asked again."""
    return db_api.one_statement_read(
        ctx, _BY_CONSUMER, {'consumer': consumer_uuid})


# Computes read their providers' allocations every minute.
_BY_PROVIDER = provider_rows.statement(
    (_ALLOC.c.consumer_id.label('consumer_uuid'),
     _CONSUMER.c.generation.label('consumer_generation'),
     _RC.c.name.label('resource_class'),
     _ALLOC.c.used, _ALLOC.c.created_at, _ALLOC.c.updated_at),
    _ALLOC.c.id,
    (_ALLOC, _ALLOC.c.resource_provider_id == _RP.c.id),
    (_RC, _ALLOC.c.resource_class_id == _RC.c.id),
    # Allocations without a consumer row (older releases') are not read.
    (_CONSUMER, _ALLOC.c.consumer_id == _CONSUMER.c.uuid))


def get_by_provider(ctx, rp_uuid):
    """(the provider's generation, its allocations: consumer uuid and
    generation, class name, amount and timestamps per Row), in one
    statement (provider_rows); ResourceProviderNotFound."""
    return provider_rows.read(ctx, _BY_PROVIDER, rp_uuid,
                              'consumer_generation')


@db_api.retry_on_deadlock
@db_api.writer
def delete_for_consumer(ctx, consumer_uuid):
    """Remove every allocation of a consumer, and the consumer; how many
    allocation rows went (0 means there were none). Allocations without a
    consumer row (written by old releases, before the online migration
    made their consumers) are not the consumer's, as for reads: as
    upstream, they are left and 0 is returned."""
    rows = ctx.session.execute(
        sa.select(_ALLOC.c.id, _ALLOC.c.resource_provider_id)
        .select_from(_ALLOC.join(
            _CONSUMER, _ALLOC.c.consumer_id == _CONSUMER.c.uuid))
        .where(_ALLOC.c.consumer_id == consumer_uuid)).all()
    ids = [r[0] for r in rows]
    if not ids:
        return 0
    ctx.session.execute(_ALLOC.delete().where(_ALLOC.c.id.in_(ids)))
    consumer_obj.delete_if_no_allocations(ctx, [consumer_uuid])
    return len(ids)
