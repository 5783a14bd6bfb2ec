"""The aggregate rules of the API, defined once: ``member_of=A``,
``member_of=in:A,B``, ``member_of=!A`` / ``!in:A,B``, and the sharing
providers' reach (trait MISC_SHARES_VIA_AGGREGATE).

Everything that judges a provider by its aggregates asks here: the
allocation candidates' filters (candidates/rules.py, the SQL engine's
statements), ``GET /resource_providers?member_of=`` and the capacity
report. Each rule has a Python form over a set of aggregates and a SQL
form over a provider id column (``..._sql``), side by side.

``member_of`` is a list of any-of sets (one per ``member_of``
parameter), ``forbidden`` a set. The Python forms take aggregates as ids
or uuids alike; the SQL forms take ids, or uuids with ``by_uuid``.
Whether a provider's root's aggregates count for it is the caller's
rule (the unnumbered group of allocation candidates: they do; ``GET
/resource_providers`` and numbered groups: they do not).
"""
import sqlalchemy as sa

from placement.db import models

_RP, _RPA, _AGG = models.RP, models.RPA, models.AGG


def member_of(aggs, member_of_):
    """Each any-of set of ``member_of_`` meets ``aggs``; the first set
    missed, or None."""
    for any_of in member_of_:
        if any_of.isdisjoint(aggs):
            return any_of
    return None


def forbidden_aggregates(aggs, forbidden):
    """None of ``forbidden`` in ``aggs``; the ones held, or None."""
    if forbidden and not forbidden.isdisjoint(aggs):
        return forbidden & aggs
    return None


def aggregates_allow(aggs, member_of_, forbidden):
    """member_of and forbidden_aggregates both pass."""
    return (member_of(aggs, member_of_) is None
            and forbidden_aggregates(aggs, forbidden) is None)


def shares_via_aggregate(sharing_aggs, tree_aggs):
    """A sharing provider serves a tree that has a provider in one of
    its aggregates."""
    return not sharing_aggs.isdisjoint(tree_aggs)


# -- the same as SQL terms on a provider id column ------------------------

def in_aggregates_sql(rp_col, aggs, by_uuid=False):
    """``rp_col`` is in one of ``aggs``."""
    members = sa.select(_RPA.c.resource_provider_id)
    if by_uuid:
        members = members.select_from(
            _RPA.join(_AGG, _RPA.c.aggregate_id == _AGG.c.id)).where(
            _AGG.c.uuid.in_(sorted(aggs)))
    else:
        members = members.where(_RPA.c.aggregate_id.in_(sorted(aggs)))
    return rp_col.in_(members)


def member_of_sql(rp_col, member_of_, by_uuid=False):
    """member_of: one term, in an aggregate of each any-of set."""
    return sa.and_(*[in_aggregates_sql(rp_col, any_of, by_uuid)
                     for any_of in member_of_])


def forbidden_aggregates_sql(rp_col, forbidden, by_uuid=False):
    """forbidden_aggregates."""
    return ~in_aggregates_sql(rp_col, forbidden, by_uuid)


def shares_via_aggregate_sql(sharing_ids):
    """shares_via_aggregate: SELECT of (sharing provider, root) for every
    tree of a provider in an aggregate of one of ``sharing_ids``."""
    mine = _RPA.alias('mine')
    other = _RPA.alias('other')
    return sa.select(mine.c.resource_provider_id, _RP.c.root_provider_id)\
        .select_from(
            mine.join(other, other.c.aggregate_id == mine.c.aggregate_id)
            .join(_RP, _RP.c.id == other.c.resource_provider_id))\
        .where(mine.c.resource_provider_id.in_(sorted(sharing_ids)))\
        .distinct()
