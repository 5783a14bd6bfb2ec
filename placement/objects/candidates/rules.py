"""The filters of GET /allocation_candidates, one function per rule.

Each rule is named after the query parameter or inventory field it
applies and judges plain values (a provider's trait ids, aggregate ids,
one inventory). It answers None when the provider passes, or what the
provider misses -- the particulars of its reason (the any-of set it
lacks, the forbidden traits it holds, ...). ``group_verdict`` strings the
per-provider rules of a request group together and names the one that
refused in a ``Verdict``.

The rules on traits, aggregates and an inventory's capacity and units
are defined once, each with its SQL form beside it, in
placement/objects/trait_rules.py, aggregate_rules.py and
capacity_rules.py; this module strings them into the rules of a request
group and a tree. Callers: the world search (search.py) filters with
them; explain (explain.py) builds its reasons from the same verdicts, so
an explanation cannot disagree with the answer about a rule; the SQL
engine (sql_request.py) states them with their SQL forms;
tests/functional/test_candidates_world.py and test_rulebook_agreement.py
run the engines, explain and the capacity report on the same random
worlds and compare.

What the rules see:

* numbered group (``resources1=...``): one provider holds every
  resource, every required trait, none of the forbidden ones, and is
  itself in the member_of aggregates and in no forbidden one;
* unnumbered group: each class may come from another provider of the
  tree or from a sharing provider; a provider qualifies for member_of
  when it or its root is in the aggregates (a root's aggregates span its
  tree); forbidden aggregates exclude a provider in them or under a root
  in them; required traits must be somewhere among the tree and the
  sharing providers (combine.py checks the providers actually picked);
* in_tree and root_required judge the provider's root.
"""
import collections
import typing

from placement.objects import aggregate_rules
from placement.objects import capacity_rules
from placement.objects import trait_rules


class Inventory(typing.NamedTuple):
    """One inventory of one provider, with its usage.

    ``limit`` is capacity_rules.capacity as the database computes it
    (see ``inventory``): the capacity rule compares with it exactly as
    upstream's SQL does."""
    limit: float
    used: int
    min_unit: int
    max_unit: int
    step_size: int
    total: int
    reserved: int
    allocation_ratio: float


def inventory(total, reserved, allocation_ratio, min_unit, max_unit,
              step_size, used, single_precision=False):
    """An Inventory whose limit is rounded as the database rounds it:
    ``single_precision`` for MySQL, whose allocation_ratio column is a
    FLOAT."""
    ratio = capacity_rules.stored_ratio(allocation_ratio, single_precision)
    limit = capacity_rules.capacity(total, reserved, ratio)
    return Inventory(limit, used, min_unit, max_unit, step_size, total,
                     reserved, allocation_ratio)


class Room(typing.NamedTuple):
    """One inventory as the combiner judges it (model.Provider's): a
    candidate's amounts summed per provider and class must stay within
    ``capacity - used`` and ``max_unit``. ``capacity`` is
    capacity_rules.usable, as upstream's Python check has it;
    the filters before compare with Inventory.limit, as its SQL does.
    ``most`` is what one candidate may take: an amount fits when it is
    at most ``min(capacity - used, max_unit)`` (made by ``room``)."""
    capacity: int
    used: int
    max_unit: int
    most: int


def room(capacity, used, max_unit):
    return Room(capacity, used, max_unit, min(capacity - used, max_unit))


def fits_alone(inventory, resources):
    """``inventory`` ({class name: Room}) has room for each of
    ``resources`` ((class name, amount) pairs), nothing else taken."""
    for rc, amount in resources:
        room_ = inventory.get(rc)
        if room_ is None or amount > room_.most:
            return False
    return True


class Verdict(typing.NamedTuple):
    """The filter that refused a provider (its FILTERS key) and what the
    provider misses for it (see each rule)."""
    rule: str
    detail: object


class Filter(typing.NamedTuple):
    """One filter of a request group: ``key``, its name in the query's
    words (a Verdict's rule, explain's step), explain's ``label``, and
    ``applies(rg, wide)``: whether the query asks it of the group
    (lib_query.RequestGroup, lib_query.RequestWide)."""
    key: str
    label: str
    applies: typing.Callable


def _asks_amounts(rg, wide):
    return bool(rg.resources)


# The filters of a request group, in the order they are judged and
# explained: a provider is refused by the first it fails.
FILTERS = (
    Filter('resourceless', 'positive filter (resourceless group)',
           lambda rg, wide: not rg.resources),
    Filter('resources', 'class present', _asks_amounts),
    Filter('capacity', 'capacity left', _asks_amounts),
    Filter('units', 'min/max unit, step size', _asks_amounts),
    Filter('required', 'required traits', lambda rg, wide: bool(rg.required)),
    Filter('forbidden', 'forbidden traits',
           lambda rg, wide: bool(rg.forbidden)),
    Filter('member_of', 'member_of aggregates',
           lambda rg, wide: bool(rg.member_of)),
    Filter('forbidden_aggs', 'forbidden aggregates',
           lambda rg, wide: bool(rg.forbidden_aggs)),
    Filter('in_tree', 'in_tree',
           lambda rg, wide: bool(rg.in_tree and rg.resources)),
    Filter('root_required', 'root_required',
           lambda rg, wide: bool(wide.root_required or wide.root_forbidden)),
)


# -- amounts: resources=CLASS:AMOUNT against one inventory ----------------

def capacity_left(inv, amount):
    """Room for ``amount`` more (capacity_rules.has_room under the
    limit); the room there is, when there is too little."""
    if capacity_rules.has_room(inv.used, amount, inv.limit):
        return None
    return inv.limit - inv.used


def min_max_unit(inv, amount):
    """capacity_rules.unit_bound: (name, value) of the bound broken."""
    return capacity_rules.unit_bound(amount, inv.min_unit, inv.max_unit)


def step_size(inv, amount):
    """capacity_rules.step_fits; the step when not."""
    if capacity_rules.step_fits(amount, inv.step_size):
        return None
    return inv.step_size


def serves(inv, amount):
    """True when ``inv`` passes capacity_left, min_max_unit and step_size
    for ``amount``: the three at once, for the search's inner loops."""
    limit, used, min_unit, max_unit, step = inv[:5]
    return (_has_room(used, amount, limit)
            and _units_allow(amount, min_unit, max_unit, step))


_has_room = capacity_rules.has_room
_units_allow = capacity_rules.units_allow


# Levels of ``amount_level``: how far an inventory gets with an amount.
NO_INVENTORY, NO_ROOM, OUTSIDE_UNITS, SERVES = 0, 1, 2, 3


def amount_level(inventories, rc, amount):
    """How far ``inventories`` ({class id: Inventory}) get with ``amount``
    of ``rc``: NO_INVENTORY, NO_ROOM (capacity_left), OUTSIDE_UNITS
    (min_max_unit, step_size) or SERVES."""
    inv = inventories.get(rc)
    if inv is None:
        return NO_INVENTORY
    if capacity_left(inv, amount) is not None:
        return NO_ROOM
    if min_max_unit(inv, amount) or step_size(inv, amount) is not None:
        return OUTSIDE_UNITS
    return SERVES


# -- trees: in_tree=UUID, same_subtree=1,2 --------------------------------

def in_tree(root, tree_root):
    """The provider's tree is the one ``in_tree`` names (``tree_root``,
    its root id; None when the uuid names no provider); the root it is
    under instead."""
    return None if root == tree_root else root


def same_subtree(ancestors, rp_ids):
    """``same_subtree``: one of ``rp_ids`` is an ancestor-or-self of all
    of them. ``ancestors``: provider id -> frozenset of its
    ancestors-or-self (see combine's cache)."""
    rp_ids = set(rp_ids)
    if len(rp_ids) <= 1:
        return True
    return subtree_met(common_ancestors(ancestors, rp_ids), rp_ids)


def subtree_met(common, rp_ids):
    """same_subtree of ``rp_ids`` given ``common``, their common
    ancestors (common_ancestors): one of them is one. (The combiner
    keeps ``common`` as it places a set's groups one by one.)"""
    return not common.isdisjoint(rp_ids)


def common_ancestors(ancestors, rp_ids, common=None):
    """The providers that are an ancestor-or-self of each of ``rp_ids``
    (``ancestors`` as same_subtree's), and in ``common`` when given:
    the common ancestors of other providers."""
    for rp in rp_ids:
        anc = ancestors[rp]
        common = anc if common is None else common & anc
        if not common:
            break
    return common or frozenset()


# -- a request group ------------------------------------------------------

def resourceless_group(g):
    """A group without resources (1.36, named in same_subtree) matches
    providers by a positive filter only: required traits or member_of.
    Upstream finds nothing otherwise."""
    return bool(g.required or g.member_of)


def group_verdict(g, rec, root, pool=None):
    """None when provider ``rec`` (world.Rec: its ``traits`` and
    ``aggs``) passes request group ``g``'s (names.ResolvedGroup) trait
    and aggregate rules, else the Verdict of the first that refuses it,
    in FILTERS' order: required, forbidden, member_of, forbidden_aggs.

    ``root`` is the record of its root (the unnumbered group reads its
    aggregates). The unnumbered group's required traits are judged on
    ``pool``, the trait sets the group can draw on with this provider
    (its tree's, the sharing providers'): each any-of set must meet one
    of them. None leaves them to the combiner, which judges the
    providers picked."""
    traits = rec.traits
    if g.numbered:
        miss = trait_rules.required_traits(traits, g.required)
        if miss is not None:
            return Verdict('required', miss)
    elif g.required and pool is not None:
        miss = trait_rules.required_traits_among(pool, g.required)
        if miss is not None:
            return Verdict('required', miss)
    if g.forbidden:
        miss = trait_rules.forbidden_traits(traits, g.forbidden)
        if miss is not None:
            return Verdict('forbidden', miss)
    aggs = rec.aggs
    if g.member_of:
        miss = aggregate_rules.member_of(aggs, g.member_of)
        # The unnumbered group: the root's aggregates span its tree.
        if miss is not None and (g.numbered or aggregate_rules.member_of(
                root.aggs, g.member_of) is not None):
            return Verdict('member_of', miss)
    if g.forbidden_aggs:
        miss = aggregate_rules.forbidden_aggregates(aggs, g.forbidden_aggs)
        if miss is None and not g.numbered:
            miss = aggregate_rules.forbidden_aggregates(root.aggs,
                                                        g.forbidden_aggs)
        if miss is not None:
            return Verdict('forbidden_aggs', miss)
    return None


def add_sharing(g, by_anchor, sharing_rows, anchors_of, bad_roots=()):
    """Add to ``by_anchor`` (see model.Group) the sharing providers of
    ``sharing_rows`` ((provider, root, class id) each can serve on its
    own) under every anchor root they share an aggregate with
    (``anchors_of``: {provider: {roots}}), except ``bad_roots``. A
    numbered group takes those serving every class. Both engines hand
    their groups to the combiner through this."""
    served = collections.defaultdict(set)
    for rp, _root, rc in sharing_rows:
        served[rp].add(rc)
    if g.numbered:
        need = set(g.rc_ids.values())
        for rp in sorted(served):
            if served[rp] >= need:
                for anchor in sorted(anchors_of.get(rp, ())):
                    lst = by_anchor.setdefault(anchor, [])
                    if rp not in lst:
                        lst.append(rp)
        return by_anchor
    names = {rc_id: name for name, rc_id in g.rc_ids.items()}
    for rp, _root, rc in sorted(sharing_rows):
        for anchor in sorted(anchors_of.get(rp, ())):
            if anchor in bad_roots:
                continue
            lst = by_anchor.setdefault(anchor, {}).setdefault(names[rc], [])
            if rp not in lst:
                lst.append(rp)
    return by_anchor
