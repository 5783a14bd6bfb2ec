"""Queries behind the operator commands: online data migrations for
``placement-manage db online_data_migrations`` and the counts that
``placement-status upgrade check`` reports."""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement.objects import consumer as consumer_obj

_RP = models.RP
_ALLOC = models.ALLOC
_CONSUMER = models.CONSUMER


@db_api.writer
def set_root_provider_ids(ctx, batch_size):
    """Online data migration: providers written by releases before nested
    providers have no root; each such provider is its own root.

    Returns (found, done) for up to ``batch_size`` providers.
    """
    ids = [r[0] for r in ctx.session.execute(
        sa.select(_RP.c.id).where(_RP.c.root_provider_id.is_(None))
        .order_by(_RP.c.id).limit(batch_size))]
    if not ids:
        return 0, 0
    done = ctx.session.execute(
        _RP.update().where(_RP.c.id.in_(ids))
        .where(_RP.c.root_provider_id.is_(None))
        .values(root_provider_id=_RP.c.id)).rowcount
    return len(ids), done


# Run in this order by placement-manage; each takes (ctx, batch_size) and
# returns (found, done). Names are shown to operators in the summary table.
ONLINE_MIGRATIONS = (
    set_root_provider_ids,
    consumer_obj.create_incomplete_consumers,
)


@db_api.reader
def has_missing_root_ids(ctx):
    return ctx.session.execute(
        sa.select(sa.exists().where(_RP.c.root_provider_id.is_(None)))
    ).scalar()


@db_api.reader
def count_incomplete_consumers(ctx):
    """How many distinct allocation consumers have no consumers row."""
    return ctx.session.execute(
        sa.select(sa.func.count(sa.distinct(_ALLOC.c.consumer_id)))
        .select_from(_ALLOC.outerjoin(
            _CONSUMER, _ALLOC.c.consumer_id == _CONSUMER.c.uuid))
        .where(_CONSUMER.c.id.is_(None))).scalar()
