"""A provider's generation with rows of its own, in one statement.

The reads every nova-compute repeats for each provider it reports (its
allocations every minute; its inventories, traits and aggregates at each
association refresh) answer with the provider's generation: one
statement LEFT JOINs the rows to the provider, read on a connection
taken without the pool's ping and, on PostgreSQL, outside a transaction
(db_api.one_statement_read), instead of a transaction of two.
"""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception

_RP = models.RP


def statement(columns, order_by, *joins):
    """SELECT of the generation of the provider whose uuid is bound as
    ``uuid`` and ``columns`` of its rows, ordered by ``order_by``: the
    provider LEFT JOINed to each (table, on clause) of ``joins`` in turn
    (a chain, not a nested join: SQLite reads a nested one in full).
    Built once per read: building a statement costs more than running
    it."""
    from_ = _RP
    for table, on in joins:
        from_ = from_.outerjoin(table, on)
    return (sa.select(_RP.c.generation.label('resource_provider_generation'),
                      *columns)
            .select_from(from_)
            .where(_RP.c.uuid == sa.bindparam('uuid'))
            .order_by(order_by))


def read(ctx, stmt, uuid, key):
    """(generation, rows) of ``stmt`` (made by ``statement``) for the
    provider ``uuid``; ``key``: a column of the last table joined, NULL
    in the one row of a provider without rows (and in a row the chain
    could not complete). ResourceProviderNotFound when there is no such
    provider."""
    rows = db_api.one_statement_read(ctx, stmt, {'uuid': uuid})
    if not rows:
        raise exception.ResourceProviderNotFound(uuid=uuid)
    return rows[0].resource_provider_generation, [
        row for row in rows if row._mapping[key] is not None]
