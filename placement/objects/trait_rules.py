"""The trait rules of the API, defined once: ``required=A,in:B,C,!D``
and ``root_required=A,!D``.

Everything that judges a provider by its traits asks here: the
allocation candidates' filters (candidates/rules.py for the world search
and explain, the SQL engine's statements, the combiner's check of the
providers picked), ``GET /resource_providers?required=`` and the
capacity report. Each rule has a Python form over a set of trait ids and
a SQL form over a provider id column (``..._sql``), side by side, so that
the two read as one rule; the differential and rulebook tests hold them
to each other.

``required`` is a list of any-of sets (one per ``required`` trait or
``in:`` list), ``forbidden`` a set.
"""
import sqlalchemy as sa

from placement.db import models

_RP, _RPT = models.RP, models.RPT


def required_traits(traits, required):
    """Each any-of set of ``required`` meets ``traits``; the first set
    missed, or None."""
    for any_of in required:
        if any_of.isdisjoint(traits):
            return any_of
    return None


def forbidden_traits(traits, forbidden):
    """No trait of ``forbidden`` in ``traits``; the ones held, or None."""
    if forbidden and not forbidden.isdisjoint(traits):
        return forbidden & traits
    return None


def required_traits_among(trait_sets, required):
    """required_traits of several providers together (the unnumbered
    group draws on a tree and sharing providers): each any-of set meets
    one of ``trait_sets``; the first set missed, or None."""
    for any_of in required:
        for traits in trait_sets:
            if not any_of.isdisjoint(traits):
                break
        else:
            return any_of
    return None


def traits_allow(traits, required, forbidden):
    """required_traits and forbidden_traits both pass."""
    return (required_traits(traits, required) is None
            and forbidden_traits(traits, forbidden) is None)


def root_required(root_traits, required, forbidden):
    """``root_required=A,!B`` on a tree's root: every trait of
    ``required`` (a set) and none of ``forbidden``; ('required', missing)
    or ('forbidden', held), or None."""
    if required and not required <= root_traits:
        return ('required', required - root_traits)
    if forbidden and not forbidden.isdisjoint(root_traits):
        return ('forbidden', forbidden & root_traits)
    return None


# -- the same as SQL terms on a provider id column ------------------------

def has_trait_sql(rp_col, trait_ids):
    """``rp_col`` has one of ``trait_ids``."""
    return rp_col.in_(sa.select(_RPT.c.resource_provider_id).where(
        _RPT.c.trait_id.in_(sorted(trait_ids))))


def required_traits_sql(rp_col, required):
    """required_traits: a term per any-of set."""
    return [has_trait_sql(rp_col, any_of) for any_of in required]


def forbidden_traits_sql(rp_col, forbidden):
    """forbidden_traits."""
    return ~has_trait_sql(rp_col, forbidden)


def root_required_sql(root_col, required, forbidden):
    """root_required on the root id column ``root_col``: its terms."""
    terms = [has_trait_sql(root_col, {t}) for t in sorted(required)]
    if forbidden:
        terms.append(forbidden_traits_sql(root_col, forbidden))
    return terms


def tree_has_trait_sql(root_col, trait_ids, *tree_terms):
    """The tree under root ``root_col`` has a provider with one of
    ``trait_ids`` (the unnumbered group's required traits, met anywhere in
    the tree). ``tree_terms(tree)``: more terms on that provider (its
    alias ``tree``), e.g. a window of root ids."""
    tree = _RP.alias('tree_member')
    tree_rpt = _RPT.alias('tree_rpt')
    more = [term for make in tree_terms for term in make(tree)]
    return root_col.in_(
        sa.select(tree.c.root_provider_id).select_from(
            tree.join(tree_rpt, tree_rpt.c.resource_provider_id == tree.c.id))
        .where(tree_rpt.c.trait_id.in_(sorted(trait_ids)), *more))
