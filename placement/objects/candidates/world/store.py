"""The world's store: the snapshot it was loaded from and, over it, the
providers read again since (``changed``), as the records and kinds a
search reads.

A snapshot is read in place and never changed; a write moves only the
providers it touched into ``changed`` (``_read_again``), so that a
refresh costs what changed, not what is. What providers alike share (a
Kind) is made once per snapshot and kept: a Kind never changes, a new
inventory or usage is a new one.
"""
import array
import bisect

from placement.objects.candidates import model
from placement.objects.candidates import rules
from placement.objects.candidates import snapshot
from placement.objects.candidates.world import reads
from placement.objects import capacity_rules
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj

# Keys of World._alike beside inventory rows.
_TRAITS, _AGGS = 'traits', 'aggregates'


class Kind:
    """What providers alike share: ``inv`` ({class id: rules.Inventory},
    its limit rounded as the database rounds it), ``prov_inv`` ({class
    name: rules.Room}, model.Provider's), ``traits`` and ``aggs``
    (frozensets of ids), ``names`` (model.Traits) and ``part`` (the
    model.Part provider summaries render once for them all)."""

    __slots__ = ('inv', 'prov_inv', 'traits', 'aggs', 'names', 'part')


class Rec:
    """One provider as the search reads it: its ids, its kind's ``inv``,
    ``traits`` and ``aggs`` (and ``kind``, the kind's index). Never
    changed once made: a refresh replaces it. (Its model.Provider, what
    the combiner and the summaries read, is made when asked: World.models;
    most records are made to be judged, or dropped by a catch-up.)"""

    __slots__ = ('id', 'uuid', 'parent', 'root', 'inv', 'traits', 'aggs',
                 'kind')

    def __init__(self, id, uuid, parent, root, kind, k):
        self.id = id
        self.uuid = uuid
        self.parent = parent
        self.root = root
        self.kind = k
        self.inv = kind.inv
        self.traits = kind.traits
        self.aggs = kind.aggs


def _provider(id, uuid, parent, root, kind):
    """The model.Provider of a provider of ``kind`` (a Kind)."""
    return model.Provider(id, uuid, parent, root, traits=kind.names,
                          inventory=kind.prov_inv)


class ProviderModels(dict):
    """id -> model.Provider of ``world``'s providers, what the combiner
    reads and answers are made of: made on first use (its record's, or
    from the snapshot's columns: a random sample's are new ones each
    time) and kept until the provider changes (World._drop), request
    after request. A dict, so that the combiner's lookups of the
    providers it holds cost what a dict's do."""

    def __init__(self, world):
        super().__init__()
        self.world = world

    def __missing__(self, rid):
        prov = self[rid] = self.world._model_of(rid)
        return prov

    def get(self, rid, default=None):
        try:
            return self[rid]
        except KeyError:
            return default


class Store:
    """World's part that holds the snapshot and what changed since."""

    def _read_rows(self, conn, ids):
        """Rows of providers ``ids`` (all of them if None): see
        reads.provider_rows."""
        return reads.provider_rows(conn, ids)

    def _adopt_snapshot(self, ctx, snap):
        """Make ``snap`` the base, nothing changed since: a full load."""
        self._base_on(ctx, snap)
        self.loads += 1

    def _base_on(self, ctx, snap):
        """Make ``snap`` the base, its kinds made, not counted as a load:
        a scratch world renders a new file's trees so (Rendering)."""
        self._start_over(snap)
        names = self._name_lookups(ctx)
        for raw in snap.kinds:
            self._index_of_kind(raw, names)

    def _start_over(self, snap):
        """``snap`` and nothing else: no kind made yet, nothing changed
        since, nothing kept from before."""
        self.base = snap
        self.kinds = []                 # Kind by index, the base's first
        self._parts = []                # their model.Part, by index
        self._kind_index = {}           # raw kind -> index
        self._alike = {}                # what kinds share: _index_of_kind
        self.changed = {}               # id -> Rec, None if gone
        self._tree_ov = {}              # root -> ids, trees changed
        self._uuid_ov = {}              # uuid -> id, providers changed
        self._cache = {}                # id -> Rec made from the base
        self.models = ProviderModels(self)  # id -> model.Provider
        self._made_trees = {}           # root -> model.Tree, see tree()
        self._made_trees_size = 0       # providers in them (about)
        self._searched = {}             # root -> {request: picks}
        self._searched_size = 0         # picks in them (about)
        self._layouts = {}              # root -> model.Layout, see tree()
        self._shapes = [                # the base's tree shapes
            model.Layout.of(parents, root, len(parents))
            for parents, root in snap.shapes]
        self._each = {}                 # see roots_with_each()
        self._edited_roots = []         # roots edited since the snapshot
        self._ov_runs = {}              # root -> _changed_tree, changed trees
        self._fits = {}                 # see fits()
        self._class_filters = {}        # see _class_filter()
        self._class_marks = {}          # see _marks()
        self._kind_marks = {}           # see _kinds_serving()
        self.roots = array.array('q', snap.troot)   # sorted root ids
        self.children = snap.children   # providers with a parent
        self.count = snap.n             # providers
        self.by_trait.reset()
        self.by_agg.reset()
        self.tree_traits.clear()
        self._per_tree = None           # see per_tree()

    @staticmethod
    def _name_lookups(ctx):
        """(class id -> name, trait id -> name), each name looked up once
        and only when a kind needs it."""
        return (model.OnFirstUse(lambda rc: rc_obj.name_for_id(ctx, rc)),
                model.OnFirstUse(lambda t: trait_obj.name_for_id(ctx, t)))

    def _index_of_kind(self, raw, names):
        """The index of kind ``raw`` (see snapshot.Snapshot.kinds), made
        on first sight. What kinds share is made once (``_alike``): a
        million providers' 14,000 kinds have 43,000 inventories but 135
        distinct ones, and a handful of sets of traits and aggregates (a
        node's process starts 0.3 s sooner)."""
        k = self._kind_index.get(raw)
        if k is not None:
            return k
        rc_names, trait_names = names
        inv_rows, tids, aids = raw
        alike = self._alike
        kind = Kind()
        kind.inv, kind.prov_inv = {}, {}
        for row in inv_rows:
            made = alike.get(row)
            if made is None:
                made = alike[row] = self._inventory(row, rc_names)
            rc, inv, name, room = made
            kind.inv[rc] = inv
            kind.prov_inv[name] = room
        made = alike.get((_TRAITS, tids))
        if made is None:
            # In trait id order: see model.Traits.
            made = alike[_TRAITS, tids] = (frozenset(tids), model.Traits(
                [trait_names[t] for t in tids]))
        kind.traits, kind.names = made
        kind.aggs = alike.get((_AGGS, aids))
        if kind.aggs is None:
            kind.aggs = alike[_AGGS, aids] = frozenset(aids)
        kind.part = model.Part(kind.prov_inv, kind.names)
        k = self._kind_index[raw] = len(self.kinds)
        self.kinds.append(kind)
        self._parts.append(kind.part)
        return k

    def _inventory(self, row, rc_names):
        """(class id, rules.Inventory, class name, rules.Room) of an
        inventory row of a raw kind."""
        rc, total, reserved, ratio, min_unit, max_unit, step, n = row
        return (rc, rules.inventory(total, reserved, ratio, min_unit,
                                    max_unit, step, n,
                                    single_precision=self._mysql),
                rc_names[rc],
                rules.room(capacity_rules.usable(total, reserved, ratio), n,
                           max_unit))

    def _model_of(self, rid):
        """The model.Provider of provider ``rid`` (see ProviderModels):
        its record's when it has one, else made from the snapshot's
        columns without one."""
        if rid in self.changed or rid in self._cache:
            rec = self.rps[rid]
            return _provider(rid, rec.uuid, rec.parent, rec.root,
                             self.kinds[rec.kind])
        base = self.base
        pos = base.pos_of(rid)
        if pos is None:
            raise KeyError(rid)
        return _provider(rid, base.uuid_at(pos), base.parent[pos] or None,
                         base.root[pos], self.kinds[base.kind[pos]])

    def _rec_at(self, pos):
        """The Rec of the snapshot's provider at ``pos``, kept a while."""
        base = self.base
        k = base.kind[pos]
        rid = base.ids[pos]
        rec = self._cache[rid] = Rec(rid, base.uuid_at(pos),
                                     base.parent[pos] or None,
                                     base.root[pos], self.kinds[k], k)
        return rec

    def _read_again(self, ctx, conn, ids):
        """Read providers ``ids`` again, over the snapshot."""
        rps, invs, usage, traits, aggs = self._read_rows(conn, ids)
        for rid in ids:
            self._drop(rid)
        raws = snapshot.kinds_of(invs, usage, traits, aggs)
        names = self._name_lookups(ctx)
        for rid, uuid, parent, root in sorted(rps):
            k = self._index_of_kind(raws.get(rid, snapshot.NO_KIND), names)
            self._add(Rec(rid, uuid, parent, snapshot.root_or_self(rid, root),
                          self.kinds[k], k))

    def _tree_to_edit(self, root):
        ids = self._tree_ov.get(root)
        if ids is None:
            ids = self._tree_ov[root] = self.trees.get(root, [])
        return ids

    def _add(self, rec):
        self.changed[rec.id] = rec
        self._uuid_ov[rec.uuid] = rec.id
        self.count += 1
        tree = self._tree_to_edit(rec.root)
        if not tree:
            self.roots.insert(bisect.bisect_left(self.roots, rec.root),
                              rec.root)
        bisect.insort(tree, rec.id)
        self._edited(rec, True)

    def _drop(self, rp_id):
        rec = self.rps.get(rp_id)
        if rec is None:
            return
        self.changed[rp_id] = None
        if self._uuid_ov.get(rec.uuid) == rp_id:
            del self._uuid_ov[rec.uuid]
        self._cache.pop(rp_id, None)
        self.models.pop(rp_id, None)
        self.count -= 1
        tree = self._tree_to_edit(rec.root)
        tree.remove(rp_id)
        if not tree:
            self.roots.pop(bisect.bisect_left(self.roots, rec.root))
        self._edited(rec, False)

    def _edited(self, rec, present):
        self._edited_roots.append(rec.root)
        if rec.parent is not None:
            self.children += 1 if present else -1
        self.tree_traits.pop(rec.root, None)
        self._ov_runs.pop(rec.root, None)
        self._made_trees.pop(rec.root, None)
        self._searched.pop(rec.root, None)
        self._layouts.pop(rec.root, None)
        if self._per_tree is not None:
            self._per_tree.touch(rec.root)
        self.by_trait.edit(rec.traits, rec.id, present)
        self.by_agg.edit(rec.aggs, rec.id, present)
