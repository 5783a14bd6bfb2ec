"""What the engines hand to the combiner and the handler renders.

A ``Provider`` (what the rules and the combiner need of one provider,
with its ``Traits`` in the order provider summaries list them), a
``Group`` (one request group as an engine gathered it, per anchor root)
and a ``Candidate`` (one allocation request, kept as its raw picks until
rendered). The search over them is combine.py's.
"""
import itertools
import operator


class Traits(frozenset):
    """A provider's trait names: a frozenset for the checks here, which
    also keeps them in trait id order (``listed``), the order upstream's
    provider summaries list them in (standard traits as synced, then
    custom ones by creation; not by name)."""

    __slots__ = ('listed',)

    def __new__(cls, names=()):
        names = list(names)
        traits = super().__new__(cls, names)
        traits.listed = names
        return traits


_NO_TRAITS = Traits()


class OnFirstUse(dict):
    """key -> make(key), made on first use (from C code too: a missing
    key costs one call, a present one a plain dict lookup)."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        value = self[key] = self.make(key)
        return value


class Part:
    """What providers alike show in provider summaries: ``inventory``
    ({class name: rules.Room}) and ``traits`` (Traits). ``summary`` is
    the handler's cache of what they render to; a Part is never changed
    (the world makes a new one for a new inventory, usage or trait set),
    so that stays true as long as it lives. A Provider is a Part too."""

    __slots__ = ('inventory', 'traits', 'summary')

    def __init__(self, inventory, traits):
        self.inventory = inventory
        self.traits = traits
        self.summary = None


class Provider:
    """What combine needs of one provider; a Part of its own for the
    summaries (see Part)."""

    __slots__ = ('id', 'uuid', 'parent_id', 'root_id', 'traits', 'inventory',
                 'summary')

    def __init__(self, id, uuid, parent_id, root_id, traits=_NO_TRAITS,
                 inventory=None):
        self.id = id
        self.uuid = uuid
        self.parent_id = parent_id
        self.root_id = root_id
        self.traits = (traits if type(traits) is Traits
                       else Traits(traits))
        self.inventory = inventory or {}    # {class name: rules.Room}
        self.summary = None


class Layout:
    """Where, in a tree's list of uuids (model.Tree's), each provider's
    parent is (``parents``: an index, None for a root) and the root's
    (``root``); ``size``: how many uuids the list holds (the providers',
    then any parent or root that SQL by hand put in another tree). Trees
    alike share one (``of``), and with it what the handler keeps in
    ``summary`` (how to render such a tree)."""

    __slots__ = ('parents', 'root', 'size', 'summary')

    _MOST = 10000
    _made = {}

    def __init__(self, parents, root, size):
        self.parents = parents
        self.root = root
        self.size = size
        self.summary = None

    @classmethod
    def of(cls, parents, root, size):
        key = (parents, root, size)
        layout = cls._made.get(key)
        if layout is None:
            if len(cls._made) >= cls._MOST:
                cls._made = {}
            layout = cls._made[key] = cls(parents, root, size)
        return layout


class Tree:
    """A whole tree as provider summaries show it: per provider, in id
    order, its uuid (``uuids``, encoded: the world's snapshot holds them
    so) and its Part (``parts``: the Parts, or with a ``table``, their
    keys in it -- a world's trees give their kinds' indexes in its list of
    Parts, which they read from the snapshot anyway, rather than a list of
    Parts made per tree); ``layout``, where its parents and root are in
    ``uuids`` (which may end with uuids that are not the tree's
    providers', see Layout; None where there is no such provider).
    ``summary`` is the handler's cache of what the tree renders to (see
    Part): the world keeps a Tree until the tree changes. ``canonical``:
    its uuids are known to be hex digits and dashes (the handler checks
    them otherwise)."""

    __slots__ = ('uuids', 'parts', 'table', 'layout', 'summary',
                 'canonical')

    def __init__(self, uuids, parts, layout, canonical=False, table=None):
        self.uuids = uuids
        self.parts = parts
        self.table = table
        self.layout = layout
        self.summary = None
        self.canonical = canonical

    @classmethod
    def of(cls, ids, uuids, parts, parent_ids, root_id, elsewhere,
           table=None):
        """The Tree of providers ``ids`` (by id) with their ``uuids``,
        ``parts`` (keys in ``table``, if given) and parents' ids (0 or
        None: none); ``elsewhere(id)``: the uuid of a parent or root that
        is not among them."""
        index = dict(zip(ids, range(len(ids))))
        parents = tuple(map(index.get, parent_ids))
        root = index.get(root_id)
        uuids = list(uuids)
        if root is None or parents.count(None) != (
                parent_ids.count(None) + parent_ids.count(0)):
            # Some parent or the root is not among them.
            def at(rid):
                i = index.get(rid)
                if i is None:
                    i = index[rid] = len(uuids)
                    uuids.append(elsewhere(rid))
                return i
            parents = tuple(at(p) if p else None for p in parent_ids)
            root = at(root_id)
        return cls(uuids, parts, Layout.of(parents, root, len(uuids)),
                   table=table)


class Providers(dict):
    """What an engine answers besides the candidates: {id: Provider} of
    (at least) every provider a candidate picks, and ``tree(root)``, the
    Tree of each tree a candidate allocates from. An engine that keeps
    its trees (the world) gives them (``trees``); otherwise they are made
    from this dict, which then holds those whole trees, and ``elsewhere``
    ({id: uuid}) the uuids of their parents that are not in them (SQL by
    hand can put a provider in another tree). ``rendered``: [(first root,
    the summaries of a run of trees, bytes-like)], trees that come
    rendered already, as the caller asked (see world.World.answer),
    instead of in ``trees``."""

    __slots__ = ('trees', 'elsewhere', 'rendered', '_grouped')

    def __init__(self, provs=(), trees=None, elsewhere=None, rendered=None):
        super().__init__(provs)
        self.trees = trees
        self.elsewhere = elsewhere or {}
        self.rendered = rendered or ()
        self._grouped = None

    def tree(self, root):
        if self.trees is not None:
            return self.trees[root]
        if self._grouped is None:
            self._grouped = {}
            for prov in sorted(self.values(), key=operator.attrgetter('id')):
                self._grouped.setdefault(prov.root_id, []).append(prov)
        provs = self._grouped[root]
        return Tree.of([p.id for p in provs],
                       [p.uuid.encode() for p in provs], provs,
                       [p.parent_id for p in provs], root,
                       self._uuid)

    def _uuid(self, rid):
        uuid = self[rid].uuid if rid in self else self.elsewhere.get(rid)
        return None if uuid is None else uuid.encode()


class Group:
    """One request group as gathered.

    ``resources`` is a list of (rc_name, amount). For a numbered group
    (``same_provider``) ``by_anchor`` maps anchor root id -> list of
    provider ids that alone satisfy the whole group; for the unnumbered
    group it maps anchor root id -> {rc_name: [provider ids]}, each
    provider able to serve that class's amount alone. Every provider
    listed also passes the group's own trait and aggregate rules (the
    engines gather them so: rules.serves, rules.group_verdict); the
    combiner judges what the lists cannot: amounts added up where groups
    share a provider, isolate, same_subtree, one provider per tree, and
    the unnumbered group's ``required`` (list of any-of name sets) over
    the providers picked (its ``forbidden`` again where it searches).
    """

    __slots__ = ('suffix', 'same_provider', 'resources', 'amounts',
                 'per_class', 'one_provider', 'by_anchor', 'required',
                 'forbidden')

    def __init__(self, suffix, resources, by_anchor, required=(),
                 forbidden=()):
        self.suffix = suffix
        self.same_provider = bool(suffix)
        self.resources = list(resources)
        self.amounts = dict(self.resources)     # shared by candidates
        self.per_class = [{rc: amount} for rc, amount in self.resources]
        self.one_provider = {}                  # rp -> [rp], shared too
        self.by_anchor = by_anchor
        self.required = [frozenset(s) for s in required]
        self.forbidden = frozenset(forbidden)


class Candidate:
    """One allocation request, kept as the raw picks until rendered.

    ``picks`` holds, per group in search order, the provider id (numbered
    group) or the tuple of provider ids per resource class (unnumbered).
    The candidates of one answer come from several combine calls (one
    per batch of anchors), each with a group list of its own, but those
    lists are alike position by position (same suffix, resources,
    amounts: the order is _Plan's, a function of the request alone),
    which is all that readers of a whole answer rely on.
    ``allocations`` ({provider id: {rc: amount}}) and ``mappings``
    ({suffix: [provider ids]}) are computed on first use.
    """

    __slots__ = ('groups', 'picks', 'sole', '_alloc', '_maps')

    def __init__(self, groups, picks):
        self.groups, self.picks = groups, picks
        self.sole = self._alloc = self._maps = None

    @classmethod
    def wholes(cls, group, rps):
        """The candidates where each provider of ``rps`` (``sole``) alone
        serves ``group`` (the only group; a flat world's answers, a
        thousand at a time): allocations and mappings are made only if
        asked for. Built without __init__: this is per provider."""
        groups = (group,)
        width = len(group.resources)
        new = cls.__new__
        out = []
        for rp in rps:
            cand = new(cls)
            cand.groups, cand.picks, cand.sole = groups, ((rp,) * width,), rp
            cand._alloc = cand._maps = None
            out.append(cand)
        return out

    def _build(self):
        """Sum the picks into allocations and mappings.

        A provider serving one group gets that group's own ``amounts``
        dict, shared with every other candidate using it the same way
        (a wide request renders tens of thousands of candidates); the dict
        is copied only when a second group adds to the same provider.
        Callers must treat both results as read-only."""
        alloc = {}
        maps = {}
        copied = ()
        for group, pick in zip(self.groups, self.picks):
            if group.same_provider:
                one = group.one_provider
                lst = one.get(pick)
                if lst is None:
                    lst = one[pick] = [pick]
                maps[group.suffix] = lst
                if not group.resources:
                    continue
                res = alloc.get(pick)
                if res is None:
                    alloc[pick] = group.amounts
                    continue
                if pick not in copied:
                    copied = set(copied) | {pick}
                    res = alloc[pick] = dict(res)
                for rc, amt in group.resources:
                    res[rc] = res.get(rc, 0) + amt
            else:
                maps[group.suffix] = list(dict.fromkeys(pick))
                for rp, (rc, amt) in zip(pick, group.resources):
                    res = alloc.get(rp)
                    if res is None:
                        alloc[rp] = {rc: amt}
                        copied = set(copied) | {rp}
                        continue
                    if rp not in copied:
                        copied = set(copied) | {rp}
                        res = alloc[rp] = dict(res)
                    res[rc] = res.get(rc, 0) + amt
        self._alloc = alloc
        self._maps = maps

    @property
    def allocations(self):
        if self._alloc is None:
            self._build()
        return self._alloc

    @property
    def mappings(self):
        if self._maps is None:
            self._build()
        return self._maps

    def provider_ids(self):
        ids = set()
        for group, pick in zip(self.groups, self.picks):
            if group.same_provider:
                ids.add(pick)
            else:
                ids.update(pick)
        return ids

    def key(self):
        return (frozenset((rp, rc, amt)
                          for rp, res in self.allocations.items()
                          for rc, amt in res.items()),
                frozenset((s, frozenset(rps))
                          for s, rps in self.mappings.items()))


_PICKS = operator.attrgetter('picks')


def picked_providers(cands, allocating=False):
    """Ids of every provider the candidates pick (allocating from it or
    only mapping a resourceless group to it; with ``allocating``, those
    they allocate from): a union per group position, at C speed. The
    candidates of one answer have group lists alike position by position
    (see Candidate)."""
    sole = [cand.sole for cand in cands]
    if None not in sole:
        return set(sole)
    picks = list(map(_PICKS, cands))
    used = set()
    for pos, group in enumerate(cands[0].groups):
        column = map(operator.itemgetter(pos), picks)
        if not group.same_provider:
            used.update(itertools.chain.from_iterable(column))
        elif group.resources or not allocating:
            used.update(column)
    return used


def allocated_providers(cands):
    """Ids of the providers the candidates allocate from."""
    return picked_providers(cands, allocating=True)
