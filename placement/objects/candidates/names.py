"""Request groups with their names resolved to ids.

Both engines -- search.py over the in-memory world and sql.py -- resolve
a request the same way and must refuse or empty it alike (the
differential tests compare them with upstream); this is that one
resolution. What differs -- how a tree is found, how "some provider is
in all these aggregates" is checked, how a group's candidates are found
-- the engine supplies (see ``resolve``). Explain resolves leniently
(``leniently``): it explains queries whose later names do not exist.
"""
from oslo_log import log as logging

from placement import exception
from placement.objects.candidates import combine
from placement.objects.candidates import model
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj


LOG = logging.getLogger(__name__)


class Empty(Exception):
    """Nothing can match: answer with no candidates."""


class ResolvedGroup:
    """A request group (lib_query.RequestGroup ``rg``) with its names
    resolved to ids."""

    def __init__(self, rg, rc_ids, required, forbidden, member_of,
                 forbidden_aggs, tree_root):
        self.rg = rg
        self.suffix = rg.suffix
        self.numbered = rg.use_same_provider
        self.resources = list(rg.resources.items())     # [(name, amount)]
        self.amounts = [(rc_ids[name], amount)
                        for name, amount in self.resources]
        self.rc_ids = rc_ids                            # {name: id}
        self.required = required                        # [set(ids)]
        self.forbidden = forbidden                      # set(ids)
        self.member_of = member_of                      # [set(agg ids)]
        self.forbidden_aggs = forbidden_aggs            # set(agg ids)
        self.tree_root = tree_root                      # root id or None

    def log_matches(self, by_anchor, sharing_rows, where):
        """At DEBUG, how many providers matched this group (``by_anchor``
        as model.Group has it), so that an operator can follow a
        request group by group, as upstream logs it."""
        if self.numbered:
            n = sum(map(len, by_anchor.values()))
        else:
            n = len({rp for per in by_anchor.values()
                     for lst in per.values() for rp in lst})
        LOG.debug('%d providers under %d trees matched group %r, and %d '
                  'sharing providers (%s)', n, len(by_anchor), self.suffix,
                  len({r[0] for r in sharing_rows}), where)

    def combine_group(self, by_anchor):
        """model.Group of this group with the providers it may use per
        anchor (``by_anchor``); the unnumbered group's traits by name, for
        the combiner to judge on the providers picked."""
        if self.numbered:
            return model.Group(self.suffix, self.resources, by_anchor)
        return model.Group(
            self.suffix, self.resources, by_anchor,
            required=[set(any_of) for any_of in self.rg.required],
            forbidden=set(self.rg.forbidden))


def trait_ids(ctx, names):
    return {trait_obj.id_for_name(ctx, name) for name in names}


def root_traits(ctx, wide):
    """root_required's trait ids: (required, forbidden)."""
    return (trait_ids(ctx, sorted(wide.root_required)),
            trait_ids(ctx, sorted(wide.root_forbidden)))


def resolve(ctx, groups, agg_ids, engine):
    """[ResolvedGroup] for ``groups`` (lib_query.RequestGroup by suffix).

    :param agg_ids: {aggregate uuid: id} of every aggregate named.
    :param engine: the engine resolving: ``tree_root_of(uuid)`` (in_tree's
        root id, None if unknown), ``any_in_all([set(agg ids)])`` (a
        provider is in one of each set), ``combine_groups(groups)``,
        ``providers(roots, rp_ids)`` and ``sharing``.
    Raises Empty when nothing can match, ResourceClassNotFound or
    TraitNotFound for a bad name -- unless a group resolved before it has
    no candidates: upstream resolves names group by group and stops at
    the first empty group, answering 200 and an empty body before it
    meets a bad name further on.
    """
    resolved = []
    empty = False
    for rg in groups.values():
        try:
            rc_ids = {name: rc_obj.id_for_name(ctx, name)
                      for name in rg.resources}
        except exception.ResourceClassNotFound:
            _empty_before_error(engine, resolved)
            raise
        member_of = _agg_sets(rg, agg_ids)
        if not all(member_of):
            empty = True
        try:
            required = [trait_ids(ctx, sorted(any_of))
                        for any_of in rg.required]
            forbidden = trait_ids(ctx, sorted(rg.forbidden))
        except exception.TraitNotFound:
            # Upstream looks at member_of before traits.
            if empty or (member_of and not engine.any_in_all(member_of)):
                raise Empty()
            _empty_before_error(engine, resolved)
            raise
        tree_root = None
        if rg.in_tree:
            tree_root = engine.tree_root_of(rg.in_tree)
            if tree_root is None:
                empty = True
        resolved.append(ResolvedGroup(
            rg, rc_ids, required, forbidden, member_of,
            {agg_ids[u] for u in rg.forbidden_aggs if u in agg_ids},
            tree_root))
    if empty:
        raise Empty()
    return resolved


def _agg_sets(rg, agg_ids):
    return [{agg_ids[u] for u in any_of if u in agg_ids}
            for any_of in rg.member_of]


def _empty_before_error(engine, resolved):
    """Raise Empty when one of the groups ``resolved`` so far has no
    candidate on its own."""
    for g in resolved:
        if g.member_of and not all(g.member_of):
            raise Empty()
        if g.tree_root is None and g.rg.in_tree:
            raise Empty()
        cgroups = engine.combine_groups([g])
        if not cgroups:
            raise Empty()
        anchors = combine.viable_anchors(cgroups)
        provs = engine.providers(anchors, engine.sharing)
        if next(combine.combine(provs, cgroups, anchors=anchors),
                None) is None:
            raise Empty()


def leniently(ctx, groups, agg_ids, tree_root_of):
    """[ResolvedGroup] with unknown names left out (an any-of set of
    unknown traits is then empty, met by no provider), for explaining a
    query whatever its names."""
    def known(names):
        out = set()
        for name in names:
            try:
                out.add(trait_obj.id_for_name(ctx, name))
            except exception.TraitNotFound:
                pass
        return out

    out = []
    for rg in groups.values():
        rc_ids = {}
        for name in rg.resources:
            try:
                rc_ids[name] = rc_obj.id_for_name(ctx, name)
            except exception.ResourceClassNotFound:
                rc_ids[name] = None
        out.append(ResolvedGroup(
            rg, rc_ids, [known(any_of) for any_of in rg.required],
            known(rg.forbidden), _agg_sets(rg, agg_ids),
            {agg_ids[u] for u in rg.forbidden_aggs if u in agg_ids},
            tree_root_of(rg.in_tree) if rg.in_tree else None))
    return out
