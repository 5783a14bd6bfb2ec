"""Request groups with their names resolved to ids.

Both engines -- search.py over the in-memory world and gather.py in SQL --
resolve a request the same way and must refuse or empty it alike (the
differential tests compare them with upstream); this is that one
resolution. What differs, how a tree is found and how "some provider is in
all these aggregates" is checked, the engine passes in.
"""
from placement import exception
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj


class Empty(Exception):
    """Nothing can match: answer with no candidates."""


class Group:
    """A request group with names resolved to ids."""

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


def trait_ids(ctx, names):
    return {trait_obj.id_for_name(ctx, name) for name in names}


def resolve(ctx, groups, agg_ids, tree_root_of, any_in_all,
            empty_before_error):
    """[Group] for ``groups`` (request.RequestGroup by suffix).

    :param agg_ids: {aggregate uuid: id} of every aggregate named.
    :param tree_root_of: in_tree uuid -> its root's id, None if unknown.
    :param any_in_all: [set(agg ids)] -> whether a provider is in one of
        each set.
    :param empty_before_error: called with the groups resolved so far
        before a bad name raises; raises Empty when one of them already
        matches nothing (upstream answers an empty 200 then).
    Raises Empty when nothing can match, ResourceClassNotFound or
    TraitNotFound for a bad name.
    """
    resolved = []
    empty = False
    for rg in groups.values():
        try:
            rc_ids = {name: rc_obj.id_for_name(ctx, name)
                      for name in rg.resources}
        except exception.ResourceClassNotFound:
            empty_before_error(resolved)
            raise
        member_of = []
        for any_of in rg.member_of:
            ids = {agg_ids[u] for u in any_of if u in agg_ids}
            if not ids:
                empty = True
            member_of.append(ids)
        try:
            required = [trait_ids(ctx, sorted(any_of))
                        for any_of in rg.required]
            forbidden = trait_ids(ctx, sorted(rg.forbidden))
        except exception.TraitNotFound:
            # Upstream looks at member_of before traits.
            if empty or (member_of and not any_in_all(member_of)):
                raise Empty()
            empty_before_error(resolved)
            raise
        forbidden_aggs = {agg_ids[u] for u in rg.forbidden_aggs
                          if u in agg_ids}
        tree_root = None
        if rg.in_tree:
            tree_root = tree_root_of(rg.in_tree)
            if tree_root is None:
                empty = True
        resolved.append(Group(rg, rc_ids, required, forbidden,
                              member_of, forbidden_aggs, tree_root))
    if empty:
        raise Empty()
    return resolved
