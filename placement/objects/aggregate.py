"""Aggregate membership of providers. Aggregates are only uuids: a row in
placement_aggregates appears the first time a uuid is associated."""
import functools

from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement.objects import provider_rows
from placement.objects import resource_provider as rp_obj

_AGG = models.AGG
_RPA = models.RPA

# uuid -> id of the aggregates this process has read. Rows of
# placement_aggregates are never deleted nor renumbered, so an id once
# read stays right for as long as the database; uuids not (yet) there are
# never cached. Dropped whenever an application is built over a database.
_IDS = {}


def reset_ids():
    _IDS.clear()


def ids_for_uuids(conn, agg_uuids):
    """{uuid: id} for those of ``agg_uuids`` that exist, read on ``conn``
    (a Connection) only for uuids not seen before.

    Queries name aggregates by uuid, but filtering on their ids is what
    lets PostgreSQL plan well: placement_aggregates holds a handful of
    rows, too few for autovacuum ever to analyze it, and a join to a table
    without statistics was estimated at a few rows where a thousand
    providers matched (a plan 1.7 times slower for the perfload query)."""
    missing = sorted(set(agg_uuids).difference(_IDS))
    if missing:
        _IDS.update(conn.execute(
            sa.select(_AGG.c.uuid, _AGG.c.id)
            .where(_AGG.c.uuid.in_(missing))).all())
    # Exact matches only, as upstream: MySQL's collations would match
    # another case too, and such a row is not the aggregate named.
    return {u: _IDS[u] for u in agg_uuids if u in _IDS}


_OF_PROVIDER = provider_rows.statement(
    (_AGG.c.uuid,), _AGG.c.uuid,
    (_RPA, _RPA.c.resource_provider_id == models.RP.c.id),
    (_AGG, _RPA.c.aggregate_id == _AGG.c.id))


def get_for_provider(ctx, rp_uuid):
    """(the provider's generation, the aggregate uuids it is directly
    associated with), in one statement (provider_rows);
    ResourceProviderNotFound."""
    generation, rows = provider_rows.read(ctx, _OF_PROVIDER, rp_uuid,
                                          'uuid')
    return generation, [row.uuid for row in rows]


def _ensure(ctx, agg_uuids):
    """{uuid: id}, inserting the uuids never seen before."""
    if not agg_uuids:
        return {}
    found = {r[0]: r[1] for r in ctx.session.execute(
        sa.select(_AGG.c.uuid, _AGG.c.id)
        .where(_AGG.c.uuid.in_(sorted(agg_uuids))))}
    for agg_uuid in sorted(set(agg_uuids) - set(found)):
        result = ctx.session.execute(_AGG.insert().values(
            uuid=agg_uuid, created_at=models._now()))
        found[agg_uuid] = result.inserted_primary_key[0]
    return found


# Two writers creating the same new aggregate: the loser starts again and
# finds it. A deadlock is retried as well.
@functools.partial(
    db_api.retry_on_deadlock,
    also=lambda e: isinstance(e, db_exc.DBDuplicateEntry))
@db_api.writer
def set_for_provider(ctx, rp, agg_uuids, increment_generation=False):
    """Make ``agg_uuids`` exactly the provider's aggregates; the provider's
    generation afterwards (bumped by compare-and-swap when asked, 1.19+)."""
    wanted = _ensure(ctx, set(agg_uuids))
    have = {r[0] for r in ctx.session.execute(
        sa.select(_RPA.c.aggregate_id)
        .where(_RPA.c.resource_provider_id == rp.id))}
    gone = have - set(wanted.values())
    if gone:
        ctx.session.execute(_RPA.delete().where(
            _RPA.c.resource_provider_id == rp.id,
            _RPA.c.aggregate_id.in_(gone)))
    new = sorted(set(wanted.values()) - have)
    if new:
        ctx.session.execute(_RPA.insert(), [
            {'resource_provider_id': rp.id, 'aggregate_id': agg_id}
            for agg_id in new])
    if increment_generation:
        return rp_obj.increment_generation(ctx, rp.id, rp.generation)
    return rp.generation
