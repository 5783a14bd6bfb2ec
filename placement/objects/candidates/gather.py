"""Gather, in SQL, what the combiner needs to build allocation candidates.

Per request group, one query returns compact (provider, root, class) rows
for providers that can serve each requested amount on their own (capacity
minus usage, min_unit, max_unit, step_size) and that pass the group's
filters (traits, aggregates, in_tree, root_required on the root). Sharing
providers (trait MISC_SHARES_VIA_AGGREGATE) are looked up once, with the
roots of every tree they share an aggregate with ("anchors").

Root providers are walked in id windows that grow geometrically: when a
limit is asked for, the first window usually yields enough candidates, so
the work stays flat however many providers exist; without a limit one
window covers everything. For each window two more queries load the
trees involved (providers with inventories and usage; traits) and the
pure combiner (``combine.py``) does the rest.

The rules each group follows are upstream's:

* numbered group: one provider holds every resource, every required
  trait, none of the forbidden ones, is itself in the member_of aggregates
  and not in a forbidden one; its anchor is its root, plus, for a sharing
  provider, every root it shares an aggregate with;
* unnumbered group: each class may come from a different provider of the
  anchor's tree or from a sharing provider; a provider qualifies for
  member_of when it or the anchor root is in the aggregates (a root's
  aggregates span its tree), and a sharing provider must itself be in
  them; forbidden aggregates exclude a provider in them or under a root in
  them; traits are judged on the providers used, together (combine);
* resourceless numbered groups (1.36) match providers by their traits and
  aggregates only.
"""
import collections
import functools
import random

import os_traits
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import util as sql_util

from placement.db import api as db_api
from placement.db import models
from placement.db import prepared
from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects.candidates import combine
from placement.objects.candidates import names
from placement.objects.candidates import search
from placement.objects.candidates import world
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj

_RP = models.RP
_INV = models.INV
_ALLOC = models.ALLOC
_RPT = models.RPT
_RPA = models.RPA

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE
# The first window holds this many roots per candidate asked for (at least
# _MIN_WINDOW); each next window is four times wider.
_ROOTS_PER_CANDIDATE = 16
_MIN_WINDOW = 64
# Trees are read for at least this many anchors at a time.
_MIN_BATCH = 8
# Trees of at least _DENSE_MIN roots less than _DENSE_SPAN ids apart on
# average are read by id range (see _dense).
_DENSE_MIN = 64
_DENSE_SPAN = 16


Empty = names.Empty
_Group = names.Group


def _used(rp_col, rc_col):
    """Correlated usage sum, for a few rows (a window): one probe of the
    (provider, class, used) index per row."""
    return sa.func.coalesce(
        sa.select(sa.func.sum(_ALLOC.c.used))
        .where(_ALLOC.c.resource_provider_id == rp_col)
        .where(_ALLOC.c.resource_class_id == rc_col)
        .scalar_subquery(), 0)


def _usage(*conds):
    """Usage summed per (provider, class) once, to LEFT JOIN, for many
    rows on server databases: PostgreSQL runs a correlated sum over a
    small allocations table as a sequential scan per row (120 ms for 7,000
    inventories over 250 allocations). SQLite probes its index per row
    whatever the size, faster than materializing this."""
    return sa.select(
        _ALLOC.c.resource_provider_id, _ALLOC.c.resource_class_id,
        sa.func.sum(_ALLOC.c.used).label('used')).where(*conds).group_by(
        _ALLOC.c.resource_provider_id,
        _ALLOC.c.resource_class_id).subquery('usage')


def _join_usage(from_, usage):
    return from_.outerjoin(usage, sa.and_(
        usage.c.resource_provider_id == _INV.c.resource_provider_id,
        usage.c.resource_class_id == _INV.c.resource_class_id))


def _opaque(*conds):
    """``conds`` as one test the planner cannot see into.

    PostgreSQL multiplies a default selectivity per term it cannot
    estimate (1/3 per inequality between columns, 1/200 for the step-size
    equality) and expects almost no inventory to fit, when nearly all do;
    it then picks nested loops over thousands of rows (12 ms where hash
    joins take 4.5 ms, 1,000 providers). Inside a CASE the whole test
    counts as one unknown, half the rows: close enough."""
    return sa.case((sa.and_(*conds), sa.true()), else_=sa.false())


def _fit_terms(used, amount):
    """The inventory row can take ``amount`` more: capacity left after
    ``used``, min_unit, max_unit, step_size."""
    return sa.and_(
        used + amount <=
        (_INV.c.total - _INV.c.reserved) * _INV.c.allocation_ratio,
        _INV.c.min_unit <= amount,
        _INV.c.max_unit >= amount,
        amount % _INV.c.step_size == 0)


def _fits(used, amount, sqlite):
    """_fit_terms as a filter. (SQLite plans as well either way, and
    evaluates the plain terms faster.)"""
    terms = _fit_terms(used, amount)
    return terms if sqlite else _opaque(terms)


def _window_rp(fence):
    """The providers a query reads: all of them, or those under the window
    of roots [lo, hi), through a subquery that planners may not flatten
    (OFFSET 0). PostgreSQL, left to choose, drives small worlds' windowed
    queries from the class index (its estimates for tiny trait tables
    favour that): 10 ms at 1,000 providers, against 1.3 ms driven from
    the window."""
    if fence is None:
        return _RP
    lo, hi = fence
    # Only the columns the queries read: each one costs SQLAlchemy a
    # column proxy per statement built.
    return sa.select(_RP.c.id, _RP.c.root_provider_id).where(
        _RP.c.root_provider_id >= lo, _RP.c.root_provider_id < hi)\
        .offset(0).subquery('rp_window')


def _on(rp, conds):
    """``conds``, written against resource_providers, read from ``rp``.
    (Queries are built on ``rp`` from the start: adapting a whole
    statement afterwards costs SQLAlchemy more than running it.)"""
    if rp is _RP:
        return list(conds)
    adapter = sql_util.ClauseAdapter(rp)
    return [adapter.traverse(cond) for cond in conds]


def _exists(sel):
    """A correlated EXISTS that stays a per-row probe (see _linked)."""
    return sa.exists(sel.offset(0))


def _linked(link_rp, link_col, rp_col, ids, probe, postgresql_array=False):
    """``rp_col`` is linked to one of ``ids`` through a (provider, thing)
    table: a trait or an aggregate.

    Two spellings, for two plans. Over a small window of providers
    (``probe``) a correlated EXISTS probes the (provider, thing) index per
    row, so the cost follows the window, not the thing's popularity. Over
    everything, IN (subquery) lets the planner hash the linked providers
    once, or drive the query from them when they are few.

    ``OFFSET 0`` keeps PostgreSQL from pulling the EXISTS up into a
    semi-join: a windowed query then plans in 0.2 ms instead of 1.5 ms,
    and runs as fast.

    ``ids`` is a set of ids, or the name of a bound list (statements built
    once, see prepared), an array on PostgreSQL (``postgresql_array``)."""
    if isinstance(ids, str):
        linked = _in_param(link_col, ids, postgresql_array)
    else:
        linked = link_col.in_(sorted(ids))
    if probe:
        return _exists(sa.select(link_rp).where(link_rp == rp_col, linked))
    return rp_col.in_(sa.select(link_rp).where(linked))


def _has_trait(rp_col, trait_ids, probe=False, postgresql_array=False):
    return _linked(_RPT.c.resource_provider_id, _RPT.c.trait_id, rp_col,
                   trait_ids, probe, postgresql_array)


def _in_aggs(rp_col, agg_ids, probe=False, postgresql_array=False):
    return _linked(_RPA.c.resource_provider_id, _RPA.c.aggregate_id, rp_col,
                   agg_ids, probe, postgresql_array)


def _in_all(rp_col, lists, probe=False):
    return sa.and_(*[_in_aggs(rp_col, ids, probe) for ids in lists])


def _in_param(col, name, postgresql_array, type_=sa.Integer):
    """``col`` in the bound list ``name``: one array parameter on
    PostgreSQL (see Gatherer._in_ids; a fixed parameter list, so the
    statement can be prepared), an expanding IN list elsewhere."""
    if postgresql_array:
        return col == sa.any_(sa.bindparam(
            name, type_=postgresql.ARRAY(type_)))
    return col.in_(sa.bindparam(name, expanding=True))


def _some_child():
    """A provider with a parent, if any."""
    return sa.select(_RP.c.id).where(_RP.c.parent_provider_id.isnot(None))


def _first_sharer(param):
    """The lowest id of a provider holding the sharing trait (its id bound
    as ``param``), NULL if none: min() is read from the (trait, provider)
    index's first entry. EXISTS, or LIMIT 1, let PostgreSQL scan the
    whole table when the trait table holds few distinct traits (it
    expects a match early) and no provider shares: 0.06 ms per test on
    the perfload job's world, where the index takes microseconds."""
    return sa.select(sa.func.min(_RPT.c.resource_provider_id)).where(
        _RPT.c.trait_id == sa.bindparam(param)).scalar_subquery()


def _sharing_trait_id(ctx):
    """The sharing trait's id; None if the trait table lacks it."""
    try:
        return trait_obj.id_for_name(ctx, SHARING_TRAIT)
    except exception.TraitNotFound:
        return None


def _facts_statement():
    # Scalar subqueries: each is one index probe. (SQLite scans the
    # table for min() and max() asked side by side.)
    child = _some_child().limit(1).scalar_subquery()
    sharer = _first_sharer('sharing_trait')
    return sa.select(
        sa.select(sa.func.min(_RP.c.id)).scalar_subquery().label('lo'),
        sa.select(sa.func.max(_RP.c.id)).scalar_subquery().label('hi'),
        child.label('child'), sharer.label('sharer'))


def _flat_statement(shape):
    """The flat world's one statement (see flat_answer) for a request of
    this ``shape``; values are bound by name: c<i>/a<i> (class ids and
    amounts), m<i> (member_of any-of lists of aggregate ids),
    r<i> (required any-of trait id lists), fa (forbidden aggregate ids),
    ft (forbidden trait ids), tree (in_tree's uuid), sharing (the sharing
    trait's id).

    Rows: (provider id, uuid, class id, total, reserved, ratio, max_unit,
    used) per inventory of each provider that fits, on PostgreSQL
    (capacity, NULL, NULL) in place of (total, reserved, ratio);
    (provider id, NULL, NULL, trait id, ...) per trait of those; and one
    (-1, NULL, NULL, not_flat, span of provider ids, ...) saying whether
    the world has a child or a sharing provider, in which case nothing
    else is returned.

    One pass over inventories and usage: ``cand`` holds every inventory
    (all classes: the summaries show them) of the providers the filters
    let through, each marked 1 when it can take its class's amount;
    ``fits`` keeps the providers with a mark per requested class. Reading
    inventories and usage a second time for the summaries cost more."""
    sqlite, n_classes, n_member_of, n_required, forbidden_aggs, \
        forbidden_traits, in_tree, pg = shape
    rc = _INV.c.resource_class_id
    if n_classes == 1:
        amount = sa.case((rc == sa.bindparam('c0'), sa.bindparam('a0')))
    else:
        amount = sa.case(*[(rc == sa.bindparam('c%d' % i),
                            sa.bindparam('a%d' % i))
                           for i in range(n_classes)])
    from_ = _RP.join(_INV, _INV.c.resource_provider_id == _RP.c.id)
    if sqlite:
        used = _used(_INV.c.resource_provider_id, rc)
        raw_used = used
    else:
        usage = _usage()
        from_ = _join_usage(from_, usage)
        raw_used = usage.c.used
        used = sa.func.coalesce(raw_used, 0)
    rp = _RP.c.id
    # Uncorrelated: evaluated once, and when true nothing else is read.
    not_flat = sa.or_(sa.exists(_some_child()),
                      _first_sharer('sharing').isnot(None))
    conds = [~not_flat]
    conds.extend(_in_aggs(rp, 'm%d' % i, postgresql_array=pg)
                 for i in range(n_member_of))
    conds.extend(_has_trait(rp, 'r%d' % i, postgresql_array=pg)
                 for i in range(n_required))
    if forbidden_aggs:
        conds.append(~_in_aggs(rp, 'fa', postgresql_array=pg))
    if forbidden_traits:
        conds.append(~_has_trait(rp, 'ft', postgresql_array=pg))
    if in_tree:
        # Every provider is its own tree's root.
        conds.append(_RP.c.uuid == sa.bindparam('tree'))
    # A class not requested has no amount: NULL tests, never a mark.
    ok = sa.case((_fit_terms(used, amount), 1), else_=0)
    # The uuid rides along: joining providers again costs more.
    cand = sa.select(
        rp.label('id'), _RP.c.uuid, rc.label('rc'), _INV.c.total,
        _INV.c.reserved, _INV.c.allocation_ratio, _INV.c.max_unit,
        raw_used.label('used'), ok.label('ok'),
    ).select_from(from_).where(*conds).cte('cand')
    # (_opaque: PostgreSQL expects one group to pass a HAVING equality and
    # probes the trait index per provider: 1.7 ms for 1,000 providers,
    # where a hash join takes 0.3.)
    fits = sa.select(cand.c.id).group_by(cand.c.id).having(
        sa.func.sum(cand.c.ok) == n_classes if sqlite else
        _opaque(sa.func.sum(cand.c.ok) == n_classes)).cte('fits')
    null = sa.null()
    if pg:
        # Capacity as Python computes it, int((total - reserved) * ratio):
        # double precision arithmetic as Python's float, truncated. Two
        # values fewer to send and parse per row, and no arithmetic in
        # Python (a tenth of the perfload answer's time outside SQL).
        # (Not on MySQL: its FLOAT column is single precision, which
        # reaches Python as the shortest decimal and multiplies
        # differently; nor SQLite, which has no trunc().)
        capacity = (sa.cast(sa.func.trunc(
            (cand.c.total - cand.c.reserved) * cand.c.allocation_ratio),
            sa.BigInteger), null, null)
    else:
        capacity = (cand.c.total, cand.c.reserved, cand.c.allocation_ratio)
    inventories = sa.select(
        cand.c.id, cand.c.uuid, cand.c.rc, *capacity, cand.c.max_unit,
        cand.c.used,
    ).where(cand.c.id.in_(sa.select(fits.c.id)))
    # Their traits in the same round trip: rows without a class, the
    # trait id in the ``total`` column.
    traits = sa.select(
        _RPT.c.resource_provider_id, sa.cast(null, sa.String),
        sa.cast(null, sa.Integer), _RPT.c.trait_id, null, null, null, null,
    ).where(_RPT.c.resource_provider_id.in_(sa.select(fits.c.id)))
    # (Two scalar subqueries: SQLite scans the table for min() and max()
    # asked side by side.)
    span = (sa.select(sa.func.max(_RP.c.id)).scalar_subquery() -
            sa.select(sa.func.min(_RP.c.id)).scalar_subquery() + 1)
    flag = sa.select(
        sa.literal(_FLAG_ROW), sa.cast(null, sa.String),
        sa.cast(null, sa.Integer),
        sa.case((not_flat, 1), else_=0), span, null, null, null)
    return sa.union_all(flag, inventories, traits)


# The provider id of flat_answer's row saying whether the world is flat
# (and how many provider ids it spans).
_FLAG_ROW = -1

# How many ids the providers spanned when this process last looked (the
# flat statement's flag row, the search's facts): a hint for choosing the
# flat statement under a limit. Either way gives the same answer, so a
# stale value only costs time.
_SPAN = {'ids': None}


def flat_covers(cap):
    """Whether the flat statement should answer a request for ``cap``
    candidates (None: all of them): when the search's first window of
    roots would hold every provider anyway. Then one statement does what
    the search does in several round trips (nova asks limit=1000: on the
    perfload job's 1,000 providers, 19 ms instead of 79 ms)."""
    if cap is None:
        return True
    span = _SPAN['ids']
    return span is not None and max(
        _MIN_WINDOW, _ROOTS_PER_CANDIDATE * cap) >= span


_trait_ids = names.trait_ids


def flat_shaped(groups, wide):
    """Whether the request could be a flat world's: only the unnumbered
    group, asking for resources, and no same_subtree."""
    if len(groups) != 1 or wide.same_subtrees:
        return False
    rg = next(iter(groups.values()))
    return not rg.use_same_provider and bool(rg.resources)


def flat_answer(ctx, conn, rg, wide):
    """(candidates, providers) for request group ``rg`` (the unnumbered
    one, alone) in a flat world, or None if the world is not flat.

    A flat world has no child provider and no sharing provider: every
    candidate is one provider holding the whole request, the shape of most
    clouds (nova's perfload job among them). One statement, one round
    trip, finds the providers able to serve every class (capacity,
    filters) with their whole inventories, usage and traits; it also says
    whether the world is flat (aggregate uuids are turned into ids first,
    read once per process, see aggregate.ids_for_uuids). Names that do not
    resolve answer None too: the general path reports them as upstream
    does."""
    try:
        classes = [rc_obj.id_for_name(ctx, name) for name in rg.resources]
        required = ([_trait_ids(ctx, sorted(any_of))
                     for any_of in rg.required] +
                    [{trait_obj.id_for_name(ctx, name)}
                     for name in sorted(wide.root_required)])
        forbidden = _trait_ids(ctx, sorted(rg.forbidden | wide.root_forbidden))
    except (exception.ResourceClassNotFound, exception.TraitNotFound):
        return None
    agg_ids = agg_obj.ids_for_uuids(
        conn, set().union(rg.forbidden_aggs, *rg.member_of))
    member_of = [sorted(agg_ids[u] for u in any_of if u in agg_ids)
                 for any_of in rg.member_of]
    if not all(member_of):
        return [], {}       # an aggregate asked for that does not exist
    forbidden_aggs = sorted(agg_ids[u] for u in rg.forbidden_aggs
                            if u in agg_ids)
    sharing = _sharing_trait_id(ctx)
    dialect = conn.dialect.name
    sqlite = dialect == 'sqlite'
    pg = dialect == 'postgresql'
    params = {'sharing': sharing if sharing is not None else -1}
    for i, (rc_id, amount) in enumerate(zip(classes,
                                            rg.resources.values())):
        params['c%d' % i] = rc_id
        params['a%d' % i] = amount
    for i, ids in enumerate(member_of):
        params['m%d' % i] = ids
    for i, ids in enumerate(required):
        params['r%d' % i] = sorted(ids)
    if forbidden_aggs:
        params['fa'] = forbidden_aggs
    if forbidden:
        params['ft'] = sorted(forbidden)
    if rg.in_tree:
        params['tree'] = rg.in_tree
    shape = (sqlite, len(classes), len(member_of), len(required),
             bool(forbidden_aggs), bool(forbidden), bool(rg.in_tree), pg)
    rows = prepared.rows(conn, ('flat',) + shape,
                         lambda: _flat_statement(shape), params)
    rc_names = combine.OnFirstUse(
        functools.partial(rc_obj.name_for_id, ctx))
    provs = {}
    trait_ids = {}      # provider id -> [trait id]
    provider = combine.Provider
    for rid, uuid, rc_id, total, reserved, ratio, max_unit, used in rows:
        if rc_id is None:
            if rid != _FLAG_ROW:
                tids = trait_ids.get(rid)
                if tids is None:
                    trait_ids[rid] = [total]
                else:
                    tids.append(total)
            else:
                _SPAN['ids'] = reserved
                if total:
                    return None     # not flat: that row came alone
            continue
        prov = provs.get(rid)
        if prov is None:
            prov = provs[rid] = provider(rid, uuid, None, rid)
        prov.inventory[rc_names[rc_id]] = (
            total if ratio is None else int((total - reserved) * ratio),
            int(used or 0), max_unit)
    _set_traits(ctx, provs, trait_ids)
    provs = {rid: provs[rid] for rid in sorted(provs)}
    group = combine.Group(rg.suffix, list(rg.resources.items()), {},
                          required=[set(any_of) for any_of in rg.required],
                          forbidden=set(rg.forbidden))
    return combine.Candidate.wholes(group, provs), provs


def _trait_ids_by_provider(trait_rows):
    """{provider id: [trait id]} from (provider id, trait id) rows."""
    by_rp = {}
    for rid, tid in trait_rows:
        tids = by_rp.get(rid)
        if tids is None:
            by_rp[rid] = [tid]
        else:
            tids.append(tid)
    return by_rp


def _set_traits(ctx, provs, by_rp):
    """Set ``provs``' traits from {provider id: [trait id]}, in trait id
    order (see combine.Traits). Providers with the same traits share one
    Traits."""
    if not by_rp:
        return
    names = combine.OnFirstUse(
        functools.partial(trait_obj.name_for_id, ctx))
    shared = {}
    for rid, tids in by_rp.items():
        key = tuple(sorted(tids)) if len(tids) > 1 else tuple(tids)
        traits = shared.get(key)
        if traits is None:
            traits = shared[key] = combine.Traits([names[t] for t in key])
        provs[rid].traits = traits


def _dense(roots):
    """Whether sorted ``roots`` are many and close together: then the
    trees are read by id range and the few trees in between dropped in
    Python. A list of a thousand ids costs PostgreSQL more to parse and
    plan (5 ms) than reading the rows they skip."""
    return (len(roots) >= _DENSE_MIN and
            roots[-1] - roots[0] < _DENSE_SPAN * len(roots))


def _roots_in(col, ranged, postgresql_array):
    if ranged:
        return col.between(sa.bindparam('lo'), sa.bindparam('hi'))
    return _in_param(col, 'roots', postgresql_array)


def _providers_statement(sqlite, trees, postgresql_array, ranged):
    """Providers with inventories and usage of the trees whose roots are
    in the bound list ``roots`` (or between ``lo`` and ``hi``)."""
    from_ = _RP.outerjoin(_INV, _INV.c.resource_provider_id == _RP.c.id)
    if sqlite:
        used = _used(_INV.c.resource_provider_id, _INV.c.resource_class_id)
    elif not trees:
        # Every provider is its own root: the roots are the ids.
        usage = _usage(_roots_in(_ALLOC.c.resource_provider_id, ranged,
                                 postgresql_array))
        from_ = _join_usage(from_, usage)
        used = usage.c.used
    else:
        in_trees = _RP.alias('in_trees')
        usage = _usage(_ALLOC.c.resource_provider_id.in_(
            sa.select(in_trees.c.id).where(_roots_in(
                in_trees.c.root_provider_id, ranged, postgresql_array))))
        from_ = _join_usage(from_, usage)
        used = usage.c.used
    in_roots = _roots_in(_RP.c.root_provider_id if trees else _RP.c.id,
                         ranged, postgresql_array)
    return sa.select(
        _RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id,
        _RP.c.root_provider_id, _INV.c.resource_class_id, _INV.c.total,
        _INV.c.reserved, _INV.c.allocation_ratio, _INV.c.max_unit, used,
    ).select_from(from_).where(in_roots)


def _traits_statement(trees, postgresql_array, ranged):
    """(provider id, trait id) of the providers of the trees whose roots
    are in the bound list ``roots`` (or between ``lo`` and ``hi``)."""
    sel = sa.select(_RPT.c.resource_provider_id, _RPT.c.trait_id)
    if not trees:
        return sel.where(_roots_in(_RPT.c.resource_provider_id, ranged,
                                   postgresql_array))
    return sel.select_from(_RPT.join(
        _RP, _RP.c.id == _RPT.c.resource_provider_id)).where(
        _roots_in(_RP.c.root_provider_id, ranged, postgresql_array))


class Gatherer:
    """Resolve one request against the database, window by window."""

    def __init__(self, ctx, groups, wide):
        self.ctx = ctx
        # A Core connection, not an ORM session: the session's set-up
        # and tear-down cost 0.1 ms of a 4 ms request, and it is not
        # needed for reading rows.
        self.conn = ctx.connection
        dialect = self.conn.dialect.name
        self.sqlite = dialect == 'sqlite'
        self.postgresql = dialect == 'postgresql'
        self.wide = wide
        # Without any child provider, every rule that spans a tree
        # collapses onto the provider itself: simpler SQL, better plans.
        agg_uuids = set()
        for rg in groups.values():
            for any_of in rg.member_of:
                agg_uuids |= any_of
            agg_uuids |= rg.forbidden_aggs
        self.trees = self._world_facts(agg_uuids)
        self.groups = self._resolve(groups)
        self.sharing = self._sharing_providers()
        # Per group, the rows of sharing providers able to serve it
        # (not bounded by window: their anchors are).
        self._sharing_rows = {}

    def _in_ids(self, col, ids):
        """``col IN ids`` for many ids. On PostgreSQL one array parameter
        (``= ANY``): a placeholder per id costs SQLAlchemy and psycopg2 far
        more than the query itself for hundreds of ids."""
        ids = sorted(ids)
        if self.postgresql:
            return col == sa.any_(sa.bindparam(
                None, ids, type_=postgresql.ARRAY(sa.Integer)))
        return col.in_(ids)

    # Filters over a window of providers probe indexes row by row; over
    # every provider they hash (see _linked).
    probe = False

    def _trait(self, col, ids):
        return _has_trait(col, ids, self.probe)

    def _aggs(self, col, ids):
        return _in_aggs(col, ids, self.probe)

    def _all(self, col, lists):
        return _in_all(col, lists, self.probe)

    # -- names to ids -------------------------------------------------------

    def _resolve(self, groups):
        wide = self.wide
        self.root_required = _trait_ids(self.ctx, sorted(wide.root_required))
        self.root_forbidden = _trait_ids(self.ctx, sorted(wide.root_forbidden))
        if self.root_required or self.root_forbidden:
            roots = sa.select(_RP.c.id).where(
                _RP.c.parent_provider_id.is_(None))
            for cond in self._root_ok(_RP.c.id):
                roots = roots.where(cond)
            if self.conn.execute(roots.limit(1)).first() is None:
                raise Empty()
        agg_ids = self._agg_ids
        return names.resolve(self.ctx, groups, agg_ids, self._tree_root_of,
                             self._any_in_all, self._empty_before_error)

    def _tree_root_of(self, uuid):
        return self.conn.execute(
            sa.select(_RP.c.root_provider_id).where(
                _RP.c.uuid == uuid)).scalar()

    def _any_in_all(self, member_of):
        return self.conn.execute(
            sa.select(_RP.c.id).where(self._all(_RP.c.id, member_of))
            .limit(1)).first() is not None

    def _empty_before_error(self, resolved):
        """Upstream resolves names group by group and stops at the first
        group with no candidates, answering 200 and an empty body before it
        meets a bad name further on; do the same."""
        if not resolved:
            return
        saved = self.groups if hasattr(self, 'groups') else None
        self.sharing = self._sharing_providers()
        self._sharing_rows = {}
        try:
            for g in resolved:
                if g.member_of and not all(g.member_of):
                    raise Empty()
                if g.tree_root is None and g.rg.in_tree:
                    raise Empty()
                self.groups = [g]
                lo, hi = self.id_range()
                cgroups = (self.window(lo, hi + 1, everything=True)
                           if lo is not None else None)
                if not cgroups:
                    raise Empty()
                anchors = combine.viable_anchors(cgroups)
                provs = self.providers(anchors, self.sharing)
                if next(combine.combine(provs, cgroups, anchors=anchors),
                        None) is None:
                    raise Empty()
        finally:
            self.groups = saved

    def _sharing_providers(self):
        tid = _sharing_trait_id(self.ctx)
        if tid is None or not self._any_sharing:
            return set()
        return {r[0] for r in self.conn.execute(
            sa.select(_RPT.c.resource_provider_id).where(
                _RPT.c.trait_id == tid))}

    def _world_facts(self, agg_uuids):
        """The id range of providers, whether any has a parent, whether
        any shares its inventory, in one round trip; and the ids of
        ``agg_uuids`` (those that exist, see aggregate.ids_for_uuids)."""
        tid = _sharing_trait_id(self.ctx)
        params = {'sharing_trait': tid if tid is not None else -1}
        rows = prepared.rows(self.conn, ('facts',), _facts_statement,
                             params)
        lo, hi, some_child, some_sharer = rows[0]
        self._agg_ids = agg_obj.ids_for_uuids(self.conn, agg_uuids)
        self._id_range = (lo, hi)
        _SPAN['ids'] = hi - lo + 1 if lo is not None else None
        self._any_sharing = some_sharer is not None
        return some_child is not None

    # -- filters -------------------------------------------------------------

    def _root_ok(self, root_col):
        conds = []
        if self.root_required:
            conds.extend(self._trait(root_col, {t})
                         for t in self.root_required)
        if self.root_forbidden:
            conds.append(~self._trait(root_col, self.root_forbidden))
        return conds

    def _provider_filters(self, g, rp_col, root_col):
        """WHERE terms a provider must meet to serve group ``g``."""
        conds = []
        if g.numbered:
            for any_of in g.required:
                conds.append(self._trait(rp_col, any_of))
            if g.member_of:
                conds.append(self._all(rp_col, g.member_of))
            if g.forbidden_aggs:
                conds.append(~self._aggs(rp_col, g.forbidden_aggs))
        elif not self.trees:
            if g.member_of:
                conds.append(self._all(rp_col, g.member_of))
            if g.forbidden_aggs:
                conds.append(~self._aggs(rp_col, g.forbidden_aggs))
            if g.required and not self.sharing:
                for any_of in g.required:
                    conds.append(self._trait(rp_col, any_of))
        else:
            if g.member_of:
                conds.append(sa.or_(self._all(rp_col, g.member_of),
                                    self._all(root_col, g.member_of)))
            if g.forbidden_aggs:
                conds.append(~self._aggs(rp_col, g.forbidden_aggs))
                conds.append(~self._aggs(root_col, g.forbidden_aggs))
            if g.required and not self.sharing:
                # Without sharing providers the traits must come from the
                # tree itself: drop trees lacking one of the any-of sets.
                tree = _RP.alias('tree_member')
                tree_rpt = _RPT.alias('tree_rpt')
                for any_of in g.required:
                    in_tree = sa.select(tree.c.root_provider_id).select_from(
                        tree.join(tree_rpt, tree_rpt.c.resource_provider_id
                                  == tree.c.id)).where(
                        tree_rpt.c.trait_id.in_(sorted(any_of)))
                    if self.probe:
                        conds.append(_exists(in_tree.where(
                            tree.c.root_provider_id == root_col)))
                    else:
                        conds.append(root_col.in_(in_tree))
        if g.forbidden:
            conds.append(~self._trait(rp_col, g.forbidden))
        return conds

    def _capacity_rows(self, g, extra, fence=None):
        """(rp id, root id, rc id) for each class a provider can serve.

        One class test for all classes: ``resource_class_id IN (...)`` and
        the amount picked by CASE. An OR per class would invite planners
        (SQLite's above all) to drive the query from the class index,
        reading every provider's inventory even for a small window."""
        rc_amount = {g.rc_ids[name]: amount for name, amount in g.resources}
        if len(rc_amount) == 1:
            amount = sa.literal(next(iter(rc_amount.values())))
        else:
            amount = sa.case(rc_amount, value=_INV.c.resource_class_id)
        rp = _window_rp(fence)
        from_ = rp.join(_INV, _INV.c.resource_provider_id == rp.c.id)
        if self.probe or self.sqlite:
            used = _used(_INV.c.resource_provider_id,
                         _INV.c.resource_class_id)
        else:
            usage = _usage(_ALLOC.c.resource_class_id.in_(sorted(rc_amount)))
            from_ = _join_usage(from_, usage)
            used = sa.func.coalesce(usage.c.used, 0)
        sel = sa.select(rp.c.id, rp.c.root_provider_id,
                        _INV.c.resource_class_id).select_from(from_).where(
            _INV.c.resource_class_id.in_(sorted(rc_amount)),
            _fits(used, amount, self.sqlite),
            *self._provider_filters(g, rp.c.id, rp.c.root_provider_id),
            *_on(rp, extra))
        return self.conn.execute(sel).all()

    def _resourceless_rows(self, g, extra, fence=None):
        """Providers matching a resourceless group's traits/aggregates."""
        if not (g.required or g.member_of):
            # Upstream finds nothing without a positive filter.
            return []
        rp = _window_rp(fence)
        sel = sa.select(rp.c.id, rp.c.root_provider_id, sa.null()).where(
            *self._provider_filters(g, rp.c.id, rp.c.root_provider_id),
            *_on(rp, extra))
        return self.conn.execute(sel).all()

    def _rows(self, g, extra, fence=None):
        if g.resources:
            return self._capacity_rows(g, extra, fence)
        return self._resourceless_rows(g, extra, fence)

    def _sharing_rows_for(self, g):
        """Rows of sharing providers able to serve ``g`` (any window)."""
        if g.suffix in self._sharing_rows:
            return self._sharing_rows[g.suffix]
        rows = []
        if self.sharing and not (g.tree_root is not None and not g.numbered):
            extra = [_RP.c.id.in_(sorted(self.sharing))]
            if g.tree_root is not None and g.resources:
                extra.append(_RP.c.root_provider_id == g.tree_root)
            if not g.numbered and g.member_of:
                # The sharing provider itself must be in the aggregates.
                extra.append(self._all(_RP.c.id, g.member_of))
            rows = self._rows(g, extra)
        self._sharing_rows[g.suffix] = rows
        return rows

    def _anchors_of(self, sharing_ids, lo, hi):
        """{sharing provider id: {root ids in window sharing an agg}}."""
        if not sharing_ids:
            return {}
        mine = _RPA.alias('mine')
        other = _RPA.alias('other')
        sel = sa.select(mine.c.resource_provider_id, _RP.c.root_provider_id)\
            .select_from(
                mine.join(other, other.c.aggregate_id == mine.c.aggregate_id)
                .join(_RP, _RP.c.id == other.c.resource_provider_id))\
            .where(mine.c.resource_provider_id.in_(sorted(sharing_ids)))\
            .where(_RP.c.root_provider_id >= lo)\
            .where(_RP.c.root_provider_id < hi).distinct()
        out = collections.defaultdict(set)
        for sp, root in self.conn.execute(sel).all():
            out[sp].add(root)
        return out

    def _roots_matching(self, roots, conds_for):
        if not roots:
            return set()
        sel = sa.select(_RP.c.id).where(self._in_ids(_RP.c.id, roots))
        for cond in conds_for(_RP.c.id):
            sel = sel.where(cond)
        return {r[0] for r in self.conn.execute(sel)}

    # -- one window --------------------------------------------------------

    def window(self, lo, hi, everything=False):
        """combine.Group list and the anchors seen, for roots in [lo, hi).

        A window drives its queries from the providers of its roots and
        probes every filter per row, so its cost does not grow with the
        providers outside it; ``everything`` drops the window and lets
        filters hash instead. SQLite needs the window spelled
        ``rp.id IN (roots' providers)`` to drive from it; PostgreSQL and
        MySQL get the window's providers as a fenced subquery (see
        _window_rp)."""
        self.probe = not everything
        window_conds = []
        fence = None
        if not everything and self.sqlite:
            in_window = _RP.alias('in_window')
            window_conds.append(_RP.c.id.in_(
                sa.select(in_window.c.id).where(
                    in_window.c.root_provider_id >= lo,
                    in_window.c.root_provider_id < hi)))
        elif not everything:
            fence = (lo, hi)
        window_conds.extend(self._root_ok(_RP.c.root_provider_id))
        per_group = []
        sharing_used = set()
        for g in self.groups:
            extra = list(window_conds)
            if g.tree_root is not None and g.resources:
                # in_tree is ignored by upstream for resourceless groups.
                extra.append(_RP.c.root_provider_id == g.tree_root)
            rows = self._rows(g, extra, fence)
            srows = []
            if self.sharing:
                srows = [r for r in self._sharing_rows_for(g)
                         if g.numbered or g.tree_root is None]
                sharing_used.update(r[0] for r in srows)
            if not rows and not srows:
                return None
            per_group.append((g, rows, srows))

        anchors_of = self._anchors_of(sharing_used, lo, hi)
        if anchors_of:
            anchor_roots = set().union(*anchors_of.values())
            if self.root_required or self.root_forbidden:
                good = self._roots_matching(anchor_roots, self._root_ok)
                anchors_of = {sp: roots & good
                              for sp, roots in anchors_of.items()}
        out = []
        for g, rows, srows in per_group:
            bad_roots = set()
            if srows and g.forbidden_aggs and not g.numbered:
                roots = set().union(*anchors_of.values()) \
                    if anchors_of else set()
                bad_roots = self._roots_matching(
                    roots, lambda col: [self._aggs(col, g.forbidden_aggs)])
            out.append(self._to_combine_group(g, rows, srows, anchors_of,
                                              bad_roots))
        return out

    def _to_combine_group(self, g, rows, srows, anchors_of, bad_roots):
        names = {rc_id: name for name, rc_id in g.rc_ids.items()}
        if g.numbered:
            # provider -> classes it can serve; keep those serving all.
            served = collections.defaultdict(set)
            root_of = {}
            for rp, root, rc in rows:
                served[rp].add(rc)
                root_of[rp] = root
            need = set(g.rc_ids.values())
            by_anchor = collections.defaultdict(list)
            for rp in sorted(served):
                if served[rp] >= need:
                    by_anchor[root_of[rp]].append(rp)
            s_served = collections.defaultdict(set)
            for rp, root, rc in srows:
                s_served[rp].add(rc)
            for rp in sorted(s_served):
                if s_served[rp] >= need:
                    for anchor in sorted(anchors_of.get(rp, ())):
                        lst = by_anchor[anchor]
                        if rp not in lst:
                            lst.append(rp)
            return combine.Group(g.suffix, g.resources, dict(by_anchor))
        by_anchor = collections.defaultdict(
            lambda: collections.defaultdict(list))
        for rp, root, rc in sorted(map(tuple, rows)):
            by_anchor[root][names[rc]].append(rp)
        for rp, root, rc in sorted(map(tuple, srows)):
            for anchor in sorted(anchors_of.get(rp, ())):
                if anchor in bad_roots:
                    continue
                lst = by_anchor[anchor][names[rc]]
                if rp not in lst:
                    lst.append(rp)
        return combine.Group(
            g.suffix, g.resources,
            {a: dict(per) for a, per in by_anchor.items()},
            required=[set(g_ids) for g_ids in g.rg.required],
            forbidden=set(g.rg.forbidden))

    # -- tree details -----------------------------------------------------

    def providers(self, root_ids, rp_ids=()):
        """{id: combine.Provider} for whole trees under ``root_ids`` plus
        the trees of ``rp_ids`` (sharing providers)."""
        roots = set(root_ids)
        if rp_ids:
            roots |= {r[0] for r in self.conn.execute(
                sa.select(_RP.c.root_provider_id).where(
                    self._in_ids(_RP.c.id, rp_ids)))}
        if not roots:
            return {}
        roots = sorted(roots)
        # Providers with their inventories in one query (LEFT JOIN: a
        # provider without inventory still belongs to its tree); class and
        # trait names come from the id caches, not from joins, which keeps
        # these statements cheap to plan.
        provs = {}
        rc_ids = set()
        ranged = _dense(roots)
        if ranged:
            params = {'lo': roots[0], 'hi': roots[-1]}
            wanted = set(roots)
        else:
            params = {'roots': roots}
        key = ('providers', self.sqlite, self.trees, self.postgresql, ranged)
        rows = prepared.rows(self.conn, key, lambda: _providers_statement(
            self.sqlite, self.trees, self.postgresql, ranged), params)
        for row in rows:
            if row[4] is not None:
                rc_ids.add(row[4])
        rc_names = rc_obj.names_for_ids(self.ctx, rc_ids) if rc_ids else {}
        for (rid, uuid, parent, root, rc_id, total, reserved, ratio,
             max_unit, used) in rows:
            if ranged and root not in wanted:
                continue
            prov = provs.get(rid)
            if prov is None:
                prov = provs[rid] = combine.Provider(rid, uuid, parent, root)
            if rc_id is not None:
                prov.inventory[rc_names[rc_id]] = (
                    int((total - reserved) * ratio), int(used or 0),
                    max_unit)
        key = ('traits', self.trees, self.postgresql, ranged)
        trait_rows = prepared.rows(
            self.conn, key, lambda: _traits_statement(
                self.trees, self.postgresql, ranged), params)
        if ranged:
            trait_rows = [r for r in trait_rows if r[0] in provs]
        _set_traits(self.ctx, provs, _trait_ids_by_provider(trait_rows))
        return provs

    def id_range(self):
        return self._id_range


@prepared.retry_unprepared
@db_api.replica_reader(recheck=(exception.ResourceClassNotFound,
                                exception.TraitNotFound))
def find(ctx, groups, wide, nested_aware=True, max_candidates=-1,
         strategy='depth-first', randomize=False):
    """The allocation candidates for ``groups`` (request.RequestGroup by
    suffix) and ``wide`` (request.RequestWide).

    Returns (candidates, providers, has_trees): a list of
    combine.Candidate, {id: combine.Provider} for every provider of every
    tree involved, and whether any provider has a parent.

    Without randomization generation stops at ``limit`` (or
    ``max_candidates``). With randomization and a limit, the search
    explores every root in a random order and stops at ``limit``, a random
    sample of the whole answer (upstream samples ``limit`` of up to
    ``max_candidates`` generated); a flat world's answer is sampled.
    Randomized without a limit, up to ``max_candidates`` are shuffled.

    A database that counts its changes (placement.objects.changes) is
    answered from this process's in-memory world (search.py). Otherwise,
    in SQL: a request a flat world could answer goes to flat_answer first
    when it wants every candidate or when flat_covers its cap; the search
    answers otherwise, and when the world turns out not to be flat.
    """
    answer = _from_world(ctx, groups, wide, nested_aware, max_candidates,
                         strategy, randomize)
    if answer is not None:
        return answer
    cap = max_candidates if (max_candidates is not None and
                             max_candidates >= 0) else None
    # Randomized and limited, the search explores in a random order
    # (combine's rng) and stops at the limit: a random sample of the
    # whole answer, drawn without generating the rest.
    rng = random if randomize and wide.limit is not None else None
    search_cap = cap
    if wide.limit is not None:
        search_cap = wide.limit if cap is None else min(cap, wide.limit)
        if not randomize:
            cap = search_cap
    if flat_shaped(groups, wide) and flat_covers(cap):
        answer = _flat_answer_unpinged(ctx, next(iter(groups.values())),
                                       wide)
        if answer is not None:
            found, providers = answer
            if cap is not None and len(found) > cap:
                # The search's first ``cap``: it walks roots by id too.
                found = found[:cap]
                providers = {c.sole: providers[c.sole] for c in found}
            return _randomized(found, wide, randomize), providers, False
    return _search(ctx, groups, wide, search_cap, nested_aware, strategy,
                   randomize, rng)


# Answer from the in-memory world when the database allows it; tests of
# the SQL gatherer turn it off.
USE_WORLD = True


def _from_world(ctx, groups, wide, nested_aware, max_candidates, strategy,
                randomize):
    """search.find over this process's world of the database, brought up
    to date first; None if the database does not count its changes."""
    if not USE_WORLD:
        return None
    with db_api.one_statement_reader(ctx) as conn:
        the_world = world.for_connection(conn)
        if the_world is None:
            return None
        with the_world.lock:
            the_world.refresh(ctx, conn)
            return search.find(
                ctx, conn, the_world, groups, wide,
                nested_aware=nested_aware, max_candidates=max_candidates,
                strategy=strategy, randomize=randomize)


def _flat_answer_unpinged(ctx, rg, wide):
    """flat_answer on a pooled connection handed over without a liveness
    check; if it was lost meanwhile (a database restart), again on a
    checked one. It only reads: running it twice is harmless."""
    try:
        with db_api.one_statement_reader(ctx, ping=False) as conn:
            return flat_answer(ctx, conn, rg, wide)
    except Exception as exc:
        if not db_api.is_disconnect(exc):
            raise
    with db_api.one_statement_reader(ctx) as conn:
        return flat_answer(ctx, conn, rg, wide)


@db_api.reader_connection
def _search(ctx, groups, wide, cap, nested_aware, strategy, randomize,
            rng=None):
    """Any world: gather windows of roots, combine depth first, stop at
    ``cap`` candidates; with ``rng``, over all roots in a random order."""
    try:
        gatherer = Gatherer(ctx, groups, wide)
    except Empty:
        return [], {}, False
    has_trees = gatherer.trees
    isolate = wide.group_policy == 'isolate'
    lo, hi = gatherer.id_range()
    if lo is None:
        return [], {}, has_trees
    hi += 1
    step = (max(_MIN_WINDOW, _ROOTS_PER_CANDIDATE * cap)
            if cap is not None and rng is None else hi - lo)
    found = []
    providers = {}
    seen = set()
    start = lo
    while start < hi and (cap is None or len(found) < cap):
        end = min(hi, start + step)
        cgroups = gatherer.window(start, end,
                                  everything=cap is None or rng is not None)
        start = end
        step *= 4
        if cgroups is None:
            continue
        anchors = combine.viable_anchors(cgroups)
        if not anchors:
            continue
        used_sharing = set()
        for cg in cgroups:
            for per in cg.by_anchor.values():
                if cg.same_provider:
                    used_sharing.update(rp for rp in per
                                        if rp in gatherer.sharing)
                else:
                    for lst in per.values():
                        used_sharing.update(rp for rp in lst
                                            if rp in gatherer.sharing)
        # Trees are loaded in batches of anchors: with a limit, a few
        # anchors usually give enough candidates, so the rest of the
        # window's trees are never read.
        if rng is not None:
            rng.shuffle(anchors)
        batch = len(anchors)
        if cap is not None and strategy != 'breadth-first':
            batch = max(_MIN_BATCH, 2 * (cap - len(found)))
        while anchors and (cap is None or len(found) < cap):
            now, anchors = anchors[:batch], anchors[batch:]
            batch *= 4
            providers.update(gatherer.providers(
                now, used_sharing - set(providers)))
            gen = combine.combine(
                providers, cgroups, isolate=isolate,
                same_subtrees=wide.same_subtrees,
                one_provider_per_tree=not nested_aware and has_trees,
                strategy=strategy, anchors=now, seen=seen,
                shared_ids=gatherer.sharing, rng=rng)
            for cand in gen:
                found.append(cand)
                if cap is not None and len(found) >= cap:
                    break
    return _randomized(found, wide, randomize), providers, has_trees


def _randomized(found, wide, randomize):
    if not randomize:
        return found
    if wide.limit is not None and len(found) > wide.limit:
        return random.sample(found, wide.limit)
    random.shuffle(found)
    return found
