"""What a search looks providers up by: id (``rps``), tree (``trees``),
trait and aggregate (``by_trait``, ``by_agg``), uuid (``by_uuid``), and
the trees that have each of a set of traits and aggregates
(``roots_with_each``) -- each reading the snapshot and what changed since
as one, so that no index is rebuilt by a refresh -- with the memos a
search keeps between requests (fits, class filters, picks).
"""
import array
import collections.abc
import itertools

from placement.objects.candidates import per_tree
from placement.objects.candidates.world import settings

# Not in World.changed (None there is a provider gone).
_BASE = object()


class Searches:
    """World.searches: get(root) -> the picks kept (a tuple), None if
    none; put(root, picks) once a search under ``root`` is done."""

    __slots__ = ('world', 'request')

    def __init__(self, world, request):
        self.world = world
        self.request = request

    def get(self, root):
        mine = self.world._searched.get(root)
        return None if mine is None else mine.get(self.request)

    def put(self, root, picks):
        if len(picks) > settings.SEARCHED_PER_TREE:
            return
        world = self.world
        world._searched.setdefault(root, {})[self.request] = tuple(picks)
        world._searched_size += len(picks) + 1


class Providers(collections.abc.Mapping):
    """``World.rps``: id -> Rec, what changed first, then the snapshot."""

    def __init__(self, world):
        self.world = world

    def __getitem__(self, rid):
        world = self.world
        rec = world.changed.get(rid, _BASE)
        if rec is _BASE:
            rec = world._cache.get(rid)
            if rec is None:
                pos = world.base.pos_of(rid)
                if pos is None:
                    raise KeyError(rid)
                rec = world._rec_at(pos)
        elif rec is None:
            raise KeyError(rid)
        return rec

    # get: collections.abc.Mapping's (self[rid], default on KeyError).

    def __contains__(self, rid):
        return self.get(rid) is not None

    def __len__(self):
        return self.world.count

    def __bool__(self):
        return self.world.count > 0

    def __iter__(self):
        world = self.world
        changed = world.changed
        for rid in world.base.byid:
            if rid not in changed:
                yield rid
        for rid, rec in list(changed.items()):
            if rec is not None:
                yield rid


class Trees:
    """``World.trees``: root id -> the ids of its tree, ascending."""

    def __init__(self, world):
        self.world = world

    def get(self, root, default=None):
        world = self.world
        ids = world._tree_ov.get(root)
        if ids is None:
            start, end = world.base.tree(root)
            return world.base.ids[start:end].tolist() if end else default
        return ids or default

    def __contains__(self, root):
        return self.get(root) is not None

    def items(self):
        for root in self.world.roots:
            yield root, self.get(root)


class Members:
    """``World.by_trait`` / ``World.by_agg``: key -> set of provider ids,
    made on first use and then kept up to date by each refresh."""

    def __init__(self, world, of):
        self.world = world
        self.of = of
        self.attr = 'traits' if of == 'trait' else 'aggs'
        self._sets = {}

    def reset(self):
        self._sets = {}

    def get(self, key, default=None):
        ids = self._sets.get(key)
        if ids is None:
            world = self.world
            changed = world.changed
            ids = {rid for rid in world.base.members(self.of, key)
                   if rid not in changed}
            attr = self.attr
            ids.update(rid for rid, rec in changed.items()
                       if rec is not None and key in getattr(rec, attr))
            self._sets[key] = ids
        return ids if ids else default

    def edit(self, keys, rid, present):
        for key in keys:
            ids = self._sets.get(key)
            if ids is not None:
                if present:
                    ids.add(rid)
                else:
                    ids.discard(rid)


class Uuids:
    """``World.by_uuid``: uuid -> provider id (exact case)."""

    def __init__(self, world):
        self.world = world

    def ids(self, uuid, any_case=False):
        """Ids of the providers with ``uuid`` (in any case if ``any_case``),
        exact matches first."""
        world = self.world
        changed = world.changed
        exact, other = [], []
        rid = world._uuid_ov.get(uuid)
        if rid is not None:
            exact.append(rid)
        for same, rid in world.base.ids_with_uuid(uuid):
            if rid not in changed and (same or any_case):
                (exact if same else other).append(rid)
        if any_case and not exact:
            wanted = uuid.lower()
            other += [i for u, i in world._uuid_ov.items()
                      if u.lower() == wanted]
        return exact + other

    def __getitem__(self, uuid):
        found = self.ids(uuid)
        if not found:
            raise KeyError(uuid)
        return found[0]

    def __contains__(self, uuid):
        return bool(self.ids(uuid))


def positions_of_ones(marks, offset):
    """The positions of the 1s in ``marks`` (bytes of 0s and 1s), plus
    ``offset``: the lengths of the parts between them are the gaps. A
    C call per 1, where compressing a range makes an int per byte (a
    run of a thousand hosts' trees is 19,000 bytes, 1,000 of them 1)."""
    gaps = marks.split(b'\x01')
    gaps.pop()
    kept = list(itertools.accumulate(map((1).__add__, map(len, gaps)),
                                     initial=offset - 1))
    del kept[0]
    return kept


class SearchIndexes:
    """World's part that answers a search's lookups and keeps its memos."""

    def fits(self, amounts):
        """{index of a Kind: what its inventory serves of ``amounts``}, a
        search's memo (world_request.Request._fitting) for one group's amounts,
        kept as long as the kinds: a Kind never changes once made (a new
        inventory or usage is a new one)."""
        memo = self._fits.get(amounts)
        if memo is None:
            if len(self._fits) >= settings.FIT_MEMOS:
                self._fits = {}
            memo = self._fits[amounts] = {}
        return memo

    def _class_filter(self, classes):
        """bytes.translate's table for the snapshot's cls column: 1 for
        the sets of classes with one of ``classes`` (a frozenset), and for
        a set the column does not name."""
        table = self._class_filters.get(classes)
        if table is None:
            if len(self._class_filters) >= settings.FIT_MEMOS:
                self._class_filters = {}
            sets = self.base.class_sets
            table = self._class_filters[classes] = bytes(
                i >= len(sets) or not classes.isdisjoint(sets[i])
                for i in range(256))
        return table

    def _marks(self, keep):
        """The snapshot's cls column through ``keep`` (a _class_filter):
        1 at the positions it keeps. A byte per provider: a few are kept
        (a megabyte each at a million providers)."""
        marks = self._class_marks.get(keep)
        if marks is None:
            if len(self._class_marks) >= settings.MARKS:
                self._class_marks = {}
            marks = self._class_marks[keep] = bytes(self.base.cls).translate(
                keep)
        return marks

    def _kinds_serving(self, classes):
        """1 at the index of each Kind with inventory of one of
        ``classes`` (a bytearray, extended as kinds are made: a Kind
        never changes)."""
        marks = self._kind_marks.get(classes)
        if marks is None:
            if len(self._kind_marks) >= settings.FIT_MEMOS:
                self._kind_marks = {}
            marks = self._kind_marks[classes] = bytearray()
        kinds = self.kinds
        if len(marks) < len(kinds):
            marks.extend(not classes.isdisjoint(kind.inv)
                         for kind in kinds[len(marks):])
        return marks

    def roots_with_each(self, wanted):
        """The roots, in id order, of the trees that have, for each (of,
        keys) of ``wanted`` (a frozenset), a provider with one of ``keys``
        (a frozenset of trait ids, ``of`` 'trait'; of aggregate ids,
        'agg'). None when those are most of the trees (MOST_TREES): a
        walk finds their candidates about as soon without the list, which
        costs a pass over it.

        The snapshot's trees are judged once per snapshot, from its
        indexes; the trees changed since, when first asked and then as
        they change (the roots edited since the last ask,
        ``_edited_roots``, judged again). A request pays for neither: only
        a pass leaving the changed trees' snapshot state out."""
        overlay = self._tree_ov
        log = self._edited_roots
        entry = self._each.get(wanted)
        if entry is None:
            if len(self._each) >= settings.EACH_MEMOS:
                self._each = {}
            entry = self._each[wanted] = [
                self._base_roots_with_each(wanted),
                {root for root in overlay
                 if self._tree_has_each(root, wanted)},
                len(log)]
        base, changed, seen = entry
        if base is None or not overlay:
            return base
        if seen < len(log):
            for root in set(log[seen:]):
                if root in overlay and self._tree_has_each(root, wanted):
                    changed.add(root)
                else:
                    changed.discard(root)
            entry[2] = len(log)
        out = [root for root in base if root not in overlay]
        if changed:
            out += changed
            out.sort()
        return out

    def _base_roots_with_each(self, wanted):
        """roots_with_each of the snapshot alone (an array, or None)."""
        base = self.base
        sets = []
        for of, keys in wanted:
            roots = set()
            for key in keys:
                roots.update(base.members(of, key, 'roots'))
            sets.append(roots)
        sets.sort(key=len)
        found = sets[0].intersection(*sets[1:])
        if len(found) >= settings.MOST_TREES * len(base.troot):
            return None
        return array.array('q', sorted(found))

    def _tree_has_each(self, root, wanted):
        kinds = [self.kinds[k] for k in set(self.tree_kinds(root))]
        return all(any(not keys.isdisjoint(
            kind.traits if of == 'trait' else kind.aggs) for kind in kinds)
            for of, keys in wanted)

    def _traits_in_tree(self, root):
        kinds = self.kinds
        return frozenset().union(*(kinds[k].traits
                                   for k in set(self.tree_kinds(root))))

    def root_of(self, uuid, any_case=False):
        """The root id of the tree of provider ``uuid`` (in_tree), None if
        there is none; ``any_case``: MySQL's collation matches a uuid in
        any case."""
        found = self.by_uuid.ids(uuid, any_case)
        return self.rps[found[0]].root if found else None

    def per_tree(self):
        """PerTree of this world: counted on first use after a full load,
        then for the trees changed since."""
        if self._per_tree is None:
            self._per_tree = per_tree.PerTree(self)
        return self._per_tree

    def searches(self, request):
        """The searches of trees for ``request`` (a key naming all a
        search under one anchor reads of a request, see search.py): the
        combiner's picks under a root, kept until the tree changes
        (_edited) -- a thousand anchors of nova's NUMA-aware requests,
        request after request, most trees unchanged since."""
        return Searches(self, request)
