"""What each request group may use, read from the database, for the
walk (walk.py) over the database (sql.py): names resolved (names.py),
per anchor root the rows of the providers that pass the group's rules
(their SQL forms: trait_rules.py, aggregate_rules.py, capacity_rules.py)
and can serve its amounts alone, the sharing providers and
the roots they anchor to, windows of roots, and the whole trees behind
the anchors (``providers``).
"""
import collections
import functools

from oslo_log import log as logging
import os_traits
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from placement.db import models
from placement import exception
from placement.objects import aggregate as agg_obj
from placement.objects import aggregate_rules
from placement.objects.candidates import model
from placement.objects.candidates import names
from placement.objects.candidates import rules
from placement.objects.candidates import sql_terms
from placement.objects import capacity_rules
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj
from placement.objects import trait_rules

_RP, _INV, _ALLOC = models.RP, models.INV, models.ALLOC
_RPT = models.RPT

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE
# Under a limit, the groups' rows are first gathered for this many roots
# or four times the limit, whichever is more; then for the rest.
_MIN_WINDOW = 64
# Trees of at least _DENSE_MIN roots less than _DENSE_SPAN ids apart on
# average, or more than _MAX_LIST roots, are read by id range (see _dense).
_DENSE_MIN = 64
_DENSE_SPAN = 16
_MAX_LIST = 10000

Empty = names.Empty


def _sharing_trait_id(ctx):
    """The sharing trait's id; None if the trait table lacks it."""
    try:
        return trait_obj.id_for_name(ctx, SHARING_TRAIT)
    except exception.TraitNotFound:
        return None


def _dense(roots):
    """Whether sorted ``roots`` are many and close together, or too many
    to list: then their trees are read by id range and the trees in
    between dropped in Python. A long list of ids costs the database more
    to parse and plan than the rows it skips, and SQLite refuses more than
    32,766 parameters (capacity reads every tree). (A smaller span made
    MySQL much slower, for a reason not understood yet, so the tried
    value stays: doc/source/candidates-figures.rst.)"""
    return len(roots) >= _DENSE_MIN and (
        roots[-1] - roots[0] < _DENSE_SPAN * len(roots) or
        len(roots) > _MAX_LIST)


def _window_terms(root_col, window):
    """``root_col`` in ``window`` (see Request.windows), as WHERE terms."""
    low, high = window or (None, None)
    terms = []
    if low is not None:
        terms.append(root_col > low)
    if high is not None:
        terms.append(root_col <= high)
    return terms


def _inside(window):
    """Whether a root id is in ``window`` (see Request.windows)."""
    low, high = window or (None, None)
    return lambda root: ((low is None or root > low) and
                         (high is None or root <= high))


def _set_traits(ctx, provs, trait_rows):
    """Set ``provs``' traits from (provider id, trait id) rows, in trait id
    order (see model.Traits). Providers with the same traits share one
    Traits."""
    by_rp = collections.defaultdict(list)
    for rid, tid in trait_rows:
        if rid in provs:
            by_rp[rid].append(tid)
    names_of = model.OnFirstUse(
        functools.partial(trait_obj.name_for_id, ctx))
    shared = {}
    for rid, tids in by_rp.items():
        key = tuple(sorted(tids))
        traits = shared.get(key)
        if traits is None:
            traits = shared[key] = model.Traits([names_of[t] for t in key])
        provs[rid].traits = traits


class Request:
    """One request resolved against the database: the rows each group
    can use (``combine_groups``) and the trees behind them
    (``providers``)."""

    def __init__(self, ctx, groups, wide):
        self.ctx = ctx
        # A Core connection, not an ORM session: reading rows needs none.
        self.conn = ctx.connection
        self.sqlite = self.conn.dialect.name == 'sqlite'
        self.postgresql = self.conn.dialect.name == 'postgresql'
        self.wide = wide
        # Whether any provider has a parent (before microversion 1.29 a
        # candidate then uses one provider per tree).
        self.trees = self.conn.execute(
            sa.select(_RP.c.id).where(_RP.c.parent_provider_id.isnot(None))
            .limit(1)).first() is not None
        agg_uuids = set()
        for rg in groups.values():
            agg_uuids = agg_uuids.union(rg.forbidden_aggs, *rg.member_of)
        self._agg_ids = agg_obj.ids_for_uuids(self.conn, agg_uuids)
        # id -> uuid of the parents of the trees read that are not in
        # them (SQL by hand can put a provider in another tree).
        self.elsewhere = {}
        self.sharing = self._sharing_providers()
        self.groups = self._resolve(groups)

    def _in_ids(self, col, ids):
        """``col IN ids`` for many ids. On PostgreSQL one array parameter
        (``= ANY``): a placeholder per id costs SQLAlchemy and psycopg2 far
        more than the query itself for hundreds of ids."""
        ids = sorted(ids)
        if self.postgresql:
            return col == sa.any_(sa.bindparam(
                None, ids, type_=postgresql.ARRAY(sa.Integer)))
        return col.in_(ids)

    def _sharing_providers(self):
        tid = _sharing_trait_id(self.ctx)
        if tid is None:
            return set()
        return {r[0] for r in self.conn.execute(
            sa.select(_RPT.c.resource_provider_id).where(
                _RPT.c.trait_id == tid))}

    # -- names to ids -------------------------------------------------------

    def _resolve(self, groups):
        self.root_required, self.root_forbidden = names.root_traits(
            self.ctx, self.wide)
        if self.root_required or self.root_forbidden:
            roots = sa.select(_RP.c.id).where(
                _RP.c.parent_provider_id.is_(None),
                *self._root_ok(_RP.c.id))
            if self.conn.execute(roots.limit(1)).first() is None:
                raise Empty()
        return names.resolve(self.ctx, groups, self._agg_ids, self)

    def tree_root_of(self, uuid):
        return self.conn.execute(
            sa.select(_RP.c.root_provider_id).where(
                _RP.c.uuid == uuid)).scalar()

    def any_in_all(self, member_of):
        return self.conn.execute(
            sa.select(_RP.c.id).where(aggregate_rules.member_of_sql(_RP.c.id, member_of))
            .limit(1)).first() is not None

    # -- filters -------------------------------------------------------------

    def _root_ok(self, root_col):
        """rules.root_required."""
        return trait_rules.root_required_sql(root_col, self.root_required,
                                             self.root_forbidden)

    def _provider_filters(self, g, rp_col, root_col, window=None):
        """WHERE terms a provider must meet to serve group ``g``:
        rules.group_verdict. ``window``: the range of root ids the
        providers are in (see windows), which their trees' are read in."""
        conds = []
        if g.numbered:
            conds.extend(trait_rules.required_traits_sql(rp_col, g.required))
            if g.member_of:
                conds.append(aggregate_rules.member_of_sql(rp_col, g.member_of))
            if g.forbidden_aggs:
                conds.append(aggregate_rules.forbidden_aggregates_sql(
                    rp_col, g.forbidden_aggs))
        else:
            if g.member_of:
                conds.append(sa.or_(
                    aggregate_rules.member_of_sql(rp_col, g.member_of),
                    aggregate_rules.member_of_sql(root_col, g.member_of)))
            if g.forbidden_aggs:
                for col in (rp_col, root_col):
                    conds.append(aggregate_rules.forbidden_aggregates_sql(
                        col, g.forbidden_aggs))
            if g.required and not self.sharing:
                # Without sharing providers the traits must come from the
                # tree itself: drop trees lacking one of the any-of sets.
                def in_window(tree):
                    return _window_terms(tree.c.root_provider_id, window)
                for any_of in g.required:
                    conds.append(trait_rules.tree_has_trait_sql(
                        root_col, any_of, in_window))
        if g.forbidden:
            conds.append(trait_rules.forbidden_traits_sql(rp_col, g.forbidden))
        return conds

    # -- rows per group -----------------------------------------------------

    def _rows(self, g, extra, window=None):
        """(rp id, root id, rc id) for each class a provider can serve;
        for a resourceless group, (rp id, root id, None) per provider
        matching its traits and aggregates. ``window``: the range of root
        ids ``extra`` keeps to; a bounded one's usage is summed there only
        (summing it all costs the first window of a million providers 0.2
        s of its 0.21).

        One class test for all classes: ``resource_class_id IN (...)`` and
        the amount picked by CASE. An OR per class would invite planners
        to drive the query from the class index."""
        filters = self._provider_filters(g, _RP.c.id, _RP.c.root_provider_id,
                                         window)
        if not g.resources:
            if not rules.resourceless_group(g):
                return []
            return self.conn.execute(sa.select(
                _RP.c.id, _RP.c.root_provider_id, sa.null()).where(
                *filters, *extra)).all()
        rc_amount = {g.rc_ids[name]: amount for name, amount in g.resources}
        if len(rc_amount) == 1:
            amount = sa.literal(next(iter(rc_amount.values())))
        else:
            amount = sa.case(rc_amount, value=_INV.c.resource_class_id)
        usage_conds = [_ALLOC.c.resource_class_id.in_(sorted(rc_amount))]
        if window is not None and window[1] is not None:
            in_window = _RP.alias('in_window')
            usage_conds.append(_ALLOC.c.resource_provider_id.in_(
                sa.select(in_window.c.id).where(*_window_terms(
                    in_window.c.root_provider_id, window))))
        from_, used = sql_terms.with_usage(
            _RP.join(_INV, _INV.c.resource_provider_id == _RP.c.id),
            self.sqlite, *usage_conds)
        return self.conn.execute(sa.select(
            _RP.c.id, _RP.c.root_provider_id, _INV.c.resource_class_id,
        ).select_from(from_).where(
            _INV.c.resource_class_id.in_(sorted(rc_amount)),
            sql_terms.serves(used, amount, self.sqlite), *filters, *extra)).all()

    def _sharing_rows(self, g):
        """Rows of sharing providers able to serve ``g``, whatever their
        tree: their anchors are the roots they share an aggregate with."""
        if not self.sharing or (g.tree_root is not None and not g.numbered):
            return []
        extra = [_RP.c.id.in_(sorted(self.sharing))]
        if g.tree_root is not None and g.resources:
            extra.append(_RP.c.root_provider_id == g.tree_root)
        if not g.numbered and g.member_of:
            # The sharing provider itself must be in the aggregates.
            extra.append(aggregate_rules.member_of_sql(_RP.c.id, g.member_of))
        return self._rows(g, extra)

    def _anchors_of(self, sharing_ids):
        """{sharing provider id: {root ids sharing an aggregate with it}}."""
        if not sharing_ids:
            return {}
        out = collections.defaultdict(set)
        for sp, root in self.conn.execute(
                aggregate_rules.shares_via_aggregate_sql(sharing_ids)).all():
            out[sp].add(root)
        return out

    def _roots_matching(self, roots, conds_for):
        if not roots:
            return set()
        sel = sa.select(_RP.c.id).where(self._in_ids(_RP.c.id, roots),
                                        *conds_for(_RP.c.id))
        return {r[0] for r in self.conn.execute(sel)}

    def windows(self, cap):
        """Ranges of root ids ``(low, high]`` (None: unbounded), ascending
        and together covering every id, for gathering the rows of the
        first trees before the others': anchors are combined in ascending
        order, so a limit is mostly met from the first window, which
        holds _MIN_WINDOW roots or four times ``cap``; the second holds
        the rest. (More, growing windows cost a request that finds few
        candidates a query per window, each dearer than its share of
        one: the database's plans for a middle-sized range were the
        slowest.) One window of every id when a group keeps to one tree
        (in_tree): its rows are few already."""
        if any(g.tree_root is not None for g in self.groups):
            return [(None, None)]
        high = self.conn.execute(
            sa.select(_RP.c.id).where(_RP.c.parent_provider_id.is_(None))
            .order_by(_RP.c.id).offset(max(_MIN_WINDOW, 4 * cap) - 1)
            .limit(1)).scalar()
        if high is None:
            return [(None, None)]
        return [(None, high), (high, None)]

    def combine_groups(self, groups=None, window=None):
        """model.Group per request group (``groups``, default the
        request's), with the anchors each can use; None when some group
        has no provider at all. ``window``: only the anchors of a range
        of root ids (see windows)."""
        root_ok = self._root_ok(_RP.c.root_provider_id)
        inside = _inside(window)
        if window is not None:
            root_ok.extend(_window_terms(_RP.c.root_provider_id, window))
        per_group = []
        sharing_used = set()
        for g in self.groups if groups is None else groups:
            extra = list(root_ok)
            if g.tree_root is not None and g.resources:
                # in_tree is ignored by upstream for resourceless groups.
                extra.append(_RP.c.root_provider_id == g.tree_root)
            rows = self._rows(g, extra, window)
            srows = self._sharing_rows(g)
            sharing_used.update(r[0] for r in srows)
            if names.LOG.isEnabledFor(logging.DEBUG):
                g.log_matches(_by_anchor(g, rows), srows, 'SQL engine')
            if not rows and not srows:
                return None
            per_group.append((g, rows, srows))
        anchors_of = self._anchors_of(sharing_used)
        if window is not None:
            anchors_of = {sp: {root for root in roots if inside(root)}
                          for sp, roots in anchors_of.items()}
        if anchors_of and (self.root_required or self.root_forbidden):
            good = self._roots_matching(set().union(*anchors_of.values()),
                                        self._root_ok)
            anchors_of = {sp: roots & good
                          for sp, roots in anchors_of.items()}
        out = []
        for g, rows, srows in per_group:
            bad_roots = set()
            if srows and g.forbidden_aggs and not g.numbered:
                bad_roots = self._roots_matching(
                    set().union(*anchors_of.values()),
                    lambda col: [aggregate_rules.in_aggregates_sql(
                        col, g.forbidden_aggs)])
            out.append(g.combine_group(rules.add_sharing(
                g, _by_anchor(g, rows), srows, anchors_of, bad_roots)))
        return out

    # -- whole trees ----------------------------------------------------------

    def providers(self, root_ids, rp_ids=()):
        """{id: model.Provider} for whole trees under ``root_ids`` plus
        the trees of ``rp_ids`` (sharing providers)."""
        roots = set(root_ids)
        if rp_ids:
            roots |= {r[0] for r in self.conn.execute(
                sa.select(_RP.c.root_provider_id).where(
                    self._in_ids(_RP.c.id, rp_ids)))}
        if not roots:
            return {}
        roots = sorted(roots)
        ranged = _dense(roots)
        wanted = set(roots)

        def in_roots(col):
            if ranged:
                return col.between(roots[0], roots[-1])
            return self._in_ids(col, roots)

        # Providers with their inventories in one query (LEFT JOIN: a
        # provider without inventory still belongs to its tree); class and
        # trait names come from the id caches, not from joins.
        in_trees = _RP.alias('in_trees')
        from_, used = sql_terms.with_usage(
            _RP.outerjoin(_INV, _INV.c.resource_provider_id == _RP.c.id),
            self.sqlite, _ALLOC.c.resource_provider_id.in_(
                sa.select(in_trees.c.id).where(
                    in_roots(in_trees.c.root_provider_id))))
        rows = self.conn.execute(sa.select(
            _RP.c.id, _RP.c.uuid, _RP.c.parent_provider_id,
            _RP.c.root_provider_id, _INV.c.resource_class_id, _INV.c.total,
            _INV.c.reserved, _INV.c.allocation_ratio, _INV.c.max_unit, used,
        ).select_from(from_).where(in_roots(_RP.c.root_provider_id))).all()
        rc_names = model.OnFirstUse(
            functools.partial(rc_obj.name_for_id, self.ctx))
        provs = {}
        for (rid, uuid, parent, root, rc_id, total, reserved, ratio,
             max_unit, used) in rows:
            if root not in wanted:
                continue
            prov = provs.get(rid)
            if prov is None:
                prov = provs[rid] = model.Provider(rid, uuid, parent, root)
            if rc_id is not None:
                prov.inventory[rc_names[rc_id]] = rules.room(
                    capacity_rules.usable(total, reserved, ratio),
                    int(used or 0), max_unit)
        _set_traits(self.ctx, provs, self.conn.execute(
            sa.select(_RPT.c.resource_provider_id, _RPT.c.trait_id)
            .select_from(_RPT.join(
                _RP, _RP.c.id == _RPT.c.resource_provider_id))
            .where(in_roots(_RP.c.root_provider_id))).all())
        missing = {p.parent_id for p in provs.values()
                   if p.parent_id is not None and p.parent_id not in provs}
        missing.difference_update(self.elsewhere)
        if missing:
            self.elsewhere.update(self.conn.execute(
                sa.select(_RP.c.id, _RP.c.uuid).where(
                    self._in_ids(_RP.c.id, missing))).all())
        return provs


def _by_anchor(g, rows):
    """What ``g`` may use per anchor root, from its rows: {root:
    [providers serving every class]} for a numbered group, {root: {class
    name: [providers]}} for the unnumbered one."""
    if g.numbered:
        served = collections.defaultdict(set)
        root_of = {}
        for rp, root, rc in rows:
            served[rp].add(rc)
            root_of[rp] = root
        need = set(g.rc_ids.values())
        by_anchor = {}
        for rp in sorted(served):
            if served[rp] >= need:
                by_anchor.setdefault(root_of[rp], []).append(rp)
        return by_anchor
    rc_names = {rc_id: name for name, rc_id in g.rc_ids.items()}
    by_anchor = {}
    for rp, root, rc in sorted(map(tuple, rows)):
        by_anchor.setdefault(root, {}).setdefault(rc_names[rc], []).append(rp)
    return by_anchor
