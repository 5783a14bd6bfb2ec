"""Consumers, and the projects, users and consumer types they belong to.

All of them are created on demand by allocation writes. Projects, users and
consumer types are created in their own short transactions (a create race
is settled by reading the winner's row); consumers themselves are created
and removed inside the allocation transaction, so a failed write leaves no
consumer behind.
"""
from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception

_CONSUMER = models.CONSUMER
_PROJECT = models.PROJECT
_USER = models.USER
_CONSUMER_TYPE = models.CONSUMER_TYPE
_ALLOC = models.ALLOC

# The consumer type reported for consumers that have none recorded.
NULL_CONSUMER_TYPE_ALIAS = 'unknown'


# --- projects, users, consumer types ----------------------------------

def _get_or_create(ctx, table, column, value):
    """The id of the row of ``table`` whose ``column`` is ``value``,
    inserting it when missing; a concurrent insert wins and is read."""

    @db_api.reader
    def _get(ctx):
        return ctx.session.execute(
            sa.select(table.c.id).where(column == value)).scalar()

    @db_api.retry_on_deadlock
    @db_api.writer
    def _create(ctx):
        return ctx.session.execute(
            table.insert().values({column.name: value})
        ).inserted_primary_key[0]

    found = _get(ctx)
    if found is not None:
        return found
    try:
        return _create(ctx)
    except db_exc.DBDuplicateEntry:
        return _get(ctx)


@db_api.reader
def lookup_owner_ids(ctx, project_ids, user_ids, type_names):
    """Ids of the projects, users and consumer types that exist, in one
    round trip: ({external_id: id}, {external_id: id}, {name: id})."""
    queries = []
    for table, column, values in (
            (_PROJECT, _PROJECT.c.external_id, project_ids),
            (_USER, _USER.c.external_id, user_ids),
            (_CONSUMER_TYPE, _CONSUMER_TYPE.c.name, type_names)):
        queries.append(
            sa.select(sa.literal(table.name).label('kind'),
                      column.label('key'), table.c.id)
            .where(column.in_(sorted(set(values)) or [''])))
    found = {_PROJECT.name: {}, _USER.name: {}, _CONSUMER_TYPE.name: {}}
    for kind, key, row_id in ctx.session.execute(sa.union_all(*queries)):
        found[kind][key] = row_id
    return (found[_PROJECT.name], found[_USER.name],
            found[_CONSUMER_TYPE.name])


def get_or_create_project(ctx, external_id):
    return _get_or_create(ctx, _PROJECT, _PROJECT.c.external_id, external_id)


def get_or_create_user(ctx, external_id):
    return _get_or_create(ctx, _USER, _USER.c.external_id, external_id)


def get_or_create_consumer_type(ctx, name):
    return _get_or_create(ctx, _CONSUMER_TYPE, _CONSUMER_TYPE.c.name, name)


@db_api.reader
def consumer_type_names(ctx):
    """{consumer_type_id: name}, with None meaning 'unknown'."""
    names = {r.id: r.name for r in ctx.session.execute(
        sa.select(_CONSUMER_TYPE.c.id, _CONSUMER_TYPE.c.name))}
    names[None] = NULL_CONSUMER_TYPE_ALIAS
    return names


# --- consumers ----------------------------------------------------------

_CONSUMER_FROM = _CONSUMER.join(
    _PROJECT, _CONSUMER.c.project_id == _PROJECT.c.id).join(
    _USER, _CONSUMER.c.user_id == _USER.c.id)


def consumer_select():
    """SELECT of consumer rows with their project and user external ids."""
    return sa.select(
        _CONSUMER.c.id, _CONSUMER.c.uuid, _CONSUMER.c.generation,
        _CONSUMER.c.consumer_type_id,
        _CONSUMER.c.project_id, _CONSUMER.c.user_id,
        _PROJECT.c.external_id.label('project_external_id'),
        _USER.c.external_id.label('user_external_id'),
        _CONSUMER.c.created_at, _CONSUMER.c.updated_at,
    ).select_from(_CONSUMER_FROM)


@db_api.reader
def get_by_uuid(ctx, uuid):
    """One consumer as a Row; ConsumerNotFound if there is none."""
    row = ctx.session.execute(
        consumer_select().where(_CONSUMER.c.uuid == uuid)).first()
    if row is None:
        raise exception.ConsumerNotFound(uuid=uuid)
    return row


# The statements of an allocation write, built once: building one costs
# more Python than running it.
_CREATE = _CONSUMER.insert().values(
    uuid=sa.bindparam('c_uuid'), project_id=sa.bindparam('c_project_id'),
    user_id=sa.bindparam('c_user_id'),
    consumer_type_id=sa.bindparam('c_type_id'),
    generation=sa.bindparam('c_generation'),
    created_at=sa.bindparam('now'))
_INCREMENT_GENERATION = (
    _CONSUMER.update()
    .where(_CONSUMER.c.id == sa.bindparam('consumer_id'))
    .where(_CONSUMER.c.generation == sa.bindparam('expected'))
    .values(generation=sa.bindparam('new_generation'),
            updated_at=sa.bindparam('now')))
_DELETE_IF_NO_ALLOCATIONS = (
    _CONSUMER.delete()
    .where(_CONSUMER.c.uuid.in_(sa.bindparam('uuids', expanding=True)))
    .where(~sa.exists().where(_ALLOC.c.consumer_id == _CONSUMER.c.uuid)))


def create_in_txn(ctx, uuid, project_id, user_id, consumer_type_id,
                  generation=0):
    """Insert a consumer in the caller's transaction; its id.

    DBDuplicateEntry escapes when a concurrent writer created it first: the
    allocation writer retries its whole transaction, and then finds it.
    """
    return ctx.session.execute(_CREATE, {
        'c_uuid': uuid, 'c_project_id': project_id, 'c_user_id': user_id,
        'c_type_id': consumer_type_id, 'c_generation': generation,
        'now': models._now()}).inserted_primary_key[0]


def update_in_txn(ctx, consumer_id, **values):
    """Change project, user or type without touching the generation."""
    values['updated_at'] = models._now()
    ctx.session.execute(
        _CONSUMER.update().where(_CONSUMER.c.id == consumer_id)
        .values(**values))


def increment_generation(ctx, consumer_id, expected_generation):
    """Compare-and-swap the consumer generation in the caller's transaction;
    ConcurrentUpdateDetected when another writer changed it first."""
    result = ctx.session.execute(_INCREMENT_GENERATION, {
        'consumer_id': consumer_id, 'expected': expected_generation,
        'new_generation': expected_generation + 1, 'now': models._now()})
    if result.rowcount != 1:
        raise exception.ConcurrentUpdateDetected()
    return expected_generation + 1


def delete_if_no_allocations(ctx, uuids):
    """Remove those of ``uuids`` that no longer hold any allocation; in the
    caller's transaction."""
    if not uuids:
        return 0
    return ctx.session.execute(
        _DELETE_IF_NO_ALLOCATIONS, {'uuids': sorted(uuids)}).rowcount


# --- incomplete consumers ----------------------------------------------

@db_api.writer
def create_incomplete_consumers(ctx, batch_size):
    """Online data migration: give consumer rows to allocations that have
    none (written by old releases before consumers were recorded), owned by
    the configured incomplete-consumer project and user.

    Returns (found, done) as placement-manage db online_data_migrations
    expects; both are the number of consumers created in this batch.
    """
    conf = ctx.config.placement
    project_id = get_or_create_project(ctx, conf.incomplete_consumer_project_id)
    user_id = get_or_create_user(ctx, conf.incomplete_consumer_user_id)
    missing = (
        sa.select(_ALLOC.c.consumer_id)
        .select_from(_ALLOC.outerjoin(
            _CONSUMER, _ALLOC.c.consumer_id == _CONSUMER.c.uuid))
        .where(_CONSUMER.c.id.is_(None))
        .group_by(_ALLOC.c.consumer_id)
        .order_by(_ALLOC.c.consumer_id)
        .limit(batch_size))
    uuids = [r[0] for r in ctx.session.execute(missing)]
    if uuids:
        now = models._now()
        ctx.session.execute(_CONSUMER.insert(), [
            {'uuid': u, 'project_id': project_id, 'user_id': user_id,
             'generation': 0, 'created_at': now} for u in uuids])
    return len(uuids), len(uuids)
