"""What a /metrics scrape reads: every inventory with its provider's name
and the class's usage, in one statement (a scrape must stay cheap; one
GROUP BY over allocations, joined to inventories). The statement has no
parameters, so it is compiled once per dialect and run on the driver's
cursor: SQLAlchemy's row objects would cost more than the query for
tens of thousands of rows."""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement.objects import changes

_ALLOC = models.ALLOC
_INV = models.INV
_RC = models.RC
_RP = models.RP


def _statement():
    used = (sa.select(_ALLOC.c.resource_provider_id.label('rp'),
                      _ALLOC.c.resource_class_id.label('rc'),
                      sa.func.sum(_ALLOC.c.used).label('used'))
            .group_by(_ALLOC.c.resource_provider_id,
                      _ALLOC.c.resource_class_id)
            .subquery('used'))
    return (sa.select(_RP.c.name, _RC.c.name, _INV.c.total,
                      _INV.c.reserved, _INV.c.allocation_ratio,
                      sa.func.coalesce(used.c.used, sa.literal_column('0')))
            .select_from(
                _INV.join(_RP, _RP.c.id == _INV.c.resource_provider_id)
                .join(_RC, _RC.c.id == _INV.c.resource_class_id)
                .outerjoin(used, sa.and_(
                    used.c.rp == _INV.c.resource_provider_id,
                    used.c.rc == _INV.c.resource_class_id))))


_STATEMENT = _statement()
_COMPILED = {}


@db_api.reader
def inventory_usage(ctx):
    """[(provider name, class name, total, reserved, allocation ratio,
    used)] for every inventory."""
    conn = ctx.session.connection()
    dialect = conn.dialect
    sql = _COMPILED.get(dialect.name)
    if sql is None:
        sql = _COMPILED[dialect.name] = str(_STATEMENT.compile(
            dialect=dialect))
    cursor = conn.connection.driver_connection.cursor()
    try:
        cursor.execute(sql)
        return cursor.fetchall()
    finally:
        cursor.close()


@db_api.reader
def counts_changes(ctx):
    """Whether the database counts its changes, so that allocation
    candidates are answered from memory (``changes.counted``: asked
    again every RECHECK_SECONDS, which then logs why not at WARNING)."""
    return changes.counted(ctx.session.connection())
