"""The SQL engine's terms for usage and amounts (sql_request.py): the
amounts rule is capacity_rules' SQL form, read over usage summed as each
database plans best. The trait and aggregate rules' SQL forms are beside
their Python forms, in trait_rules.py and aggregate_rules.py.
"""
import sqlalchemy as sa

from placement.db import models
from placement.objects import capacity_rules

_INV, _ALLOC = models.INV, models.ALLOC


def used(rp_col, rc_col):
    """Correlated usage sum: on SQLite one probe of the (provider, class,
    used) index per row, faster than materializing the sums."""
    return sa.func.coalesce(
        sa.select(sa.func.sum(_ALLOC.c.used))
        .where(_ALLOC.c.resource_provider_id == rp_col)
        .where(_ALLOC.c.resource_class_id == rc_col)
        .scalar_subquery(), 0)


def with_usage(from_, sqlite, *conds):
    """(``from_`` joined to the usage of its inventories, used amount).

    Server databases get usage summed per (provider, class) once, LEFT
    JOINed: PostgreSQL runs a correlated sum over a small allocations
    table as a sequential scan per row (figures in
    doc/source/candidates-figures.rst). SQLite gets the correlated sum
    (see used)."""
    if sqlite:
        return from_, used(_INV.c.resource_provider_id,
                            _INV.c.resource_class_id)
    usage = sa.select(
        _ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id,
        sa.func.sum(_ALLOC.c.used).label('used')).where(*conds).group_by(
        _ALLOC.c.resource_provider_id,
        _ALLOC.c.resource_class_id).subquery('usage')
    from_ = from_.outerjoin(usage, sa.and_(
        usage.c.resource_provider_id == _INV.c.resource_provider_id,
        usage.c.resource_class_id == _INV.c.resource_class_id))
    return from_, sa.func.coalesce(usage.c.used, 0)


def serves(used, amount, sqlite):
    """rules.serves: the inventory row can take ``amount`` more (capacity
    left after ``used``, min_unit, max_unit, step_size).

    Elsewhere than on SQLite the test is wrapped in a CASE the planner
    cannot see into: PostgreSQL multiplies a default selectivity per term
    it cannot estimate and expects almost no inventory to fit, when nearly
    all do; it then picks nested loops over thousands of rows where hash
    joins are faster (doc/source/candidates-figures.rst)."""
    terms = sa.and_(capacity_rules.has_room_sql(_INV, used, amount),
                    capacity_rules.units_allow_sql(_INV, amount))
    if sqlite:
        return terms
    return sa.case((terms, sa.true()), else_=sa.false())
