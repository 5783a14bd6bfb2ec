"""The trees a search walks and an answer shows: each tree's providers
and kinds (read at C speed from the snapshot's runs when unchanged since),
and its model.Tree for the answer's provider summaries, made once and
kept until the tree changes.
"""
import itertools

from placement.objects.candidates import model
from placement.objects.candidates import snapshot
from placement.objects.candidates.world import indexes


class TreeBuilding:
    """World's part that reads trees and makes their model.Tree."""

    def tree_kinds(self, root):
        """The kinds of the providers of the tree under ``root``, in id
        order (a tuple; empty if there is no such tree)."""
        ids = self._tree_ov.get(root)
        if ids is None:
            start, end = self.base.tree(root)
            return tuple(self.base.kind[start:end])
        return self._changed_tree(root, ids)[0]

    def kinds_by_tree(self):
        """(root, tree_kinds) of every tree: the snapshot's unchanged
        trees read from its kind column in one pass."""
        base, overlay = self.base, self._tree_ov
        kinds = base.kind.tolist()
        starts = base.tstart.tolist()
        for i, root in enumerate(base.troot):
            if root not in overlay:
                yield root, kinds[starts[i]:starts[i + 1]]
        for root, ids in overlay.items():
            if ids:
                yield root, self._changed_tree(root, ids)[0]

    def _changed_tree(self, root, ids):
        """(kinds, over) of the tree under ``root``, changed since the
        snapshot (its providers ``ids``), kept until it changes again: its
        kinds (tree_kinds) and what _changed_in_run says of it."""
        known = self._ov_runs.get(root)
        if known is None:
            start, end = self.base.tree(root)
            over = self._changed_in_run(start, end, ids)
            if over is None:
                rps = self.rps
                kinds = tuple(rps[rid].kind for rid in ids)
            else:
                kinds = self.base.kind[start:end].tolist()
                for i, rec in over:
                    kinds[i] = rec.kind
                kinds = tuple(kinds)
            known = self._ov_runs[root] = (kinds, over)
        return known

    def _changed_in_run(self, start, end, ids):
        """[(position, Rec)] of the providers changed since the snapshot
        among ``ids``, a changed tree's providers (by id), when they are
        the snapshot's run ``start`` to ``end`` -- a write changed a
        provider's usage, not who is in the tree: the tree is then the
        run's columns with those put over them, no record made for the
        others (the rest of a tree of 19 would cost 40 us to make). None
        when the tree's providers are not the run's."""
        if self.base.ids[start:end].tolist() != ids:
            return None
        return [(i, rec) for i, rec in enumerate(map(self.changed.get, ids))
                if rec is not None]

    def tree_rows(self, roots, classes=None):
        """(ids, kinds, roots): the providers of the trees under
        ``roots`` (the trees unchanged since the snapshot first, in the
        order of ``roots``, then the others), a tree's by id; the index of
        each one's kind and its root; with ``classes`` (class ids), only
        those with inventory of one of them.

        The trees unchanged since the snapshot are runs of its positions
        (a walk's roots one after another make one run; a random sample's
        are scattered, each found in the snapshot's tree_at): they are
        read together at C speed, and the providers with none of
        ``classes`` left out by the snapshot's cls column (of a tree of
        19, the one a request for VCPU and MEMORY_MB reads)."""
        base = self.base
        overlay = self._tree_ov
        tstart = base.tstart
        keep = None if classes is None else self._class_filter(classes)
        out = ids, kinds, tree_roots = [], [], []
        if type(roots) is not list:
            roots = list(roots)
        changed = ()
        if overlay:
            changed = [root for root in roots if root in overlay]
            if changed:
                roots = [root for root in roots if root not in overlay]
        found = [i for i in map(base.tree_at.get, roots) if i is not None]
        if found:
            if found == list(range(found[0], found[0] + len(found))):
                # Trees one after another: one run.
                starts, ends = [tstart[found[0]]], [tstart[found[-1] + 1]]
            else:
                starts = list(map(tstart.__getitem__, found))
                ends = list(map(tstart.__getitem__, map((1).__add__, found)))
            self._read_runs(starts, ends, keep, *out)
        serving = None if keep is None or not changed else \
            self._kinds_serving(classes).__getitem__
        for root in changed:
            mine = overlay[root]
            mine_kinds = self.tree_kinds(root)
            if serving is not None:
                serves = list(map(serving, mine_kinds))
                mine = list(itertools.compress(mine, serves))
                mine_kinds = list(itertools.compress(mine_kinds, serves))
            ids += mine
            kinds += mine_kinds
            tree_roots += [root] * len(mine)
        return out

    def _read_runs(self, starts, ends, keep, *out):
        """Append to ``out`` (ids, kinds, roots) the snapshot's providers
        at positions ``starts`` to ``ends``, those whose cls ``keep`` (a
        _class_filter) keeps."""
        base = self.base
        columns = (base.ids, base.kind, base.root)
        slices = list(map(slice, starts, ends))
        if keep is not None and len(slices) == 1:
            kept = indexes.positions_of_ones(
                bytes(base.cls[slices[0]]).translate(keep), starts[0])
        elif keep is not None:
            # Trees apart (a random sample's, a walk's between changed
            # trees): the positions kept found in each tree's run of the
            # marks, a C call or two each.
            find = self._marks(keep).find
            kept = []
            for start, end in zip(starts, ends):
                at = find(1, start, end)
                while at >= 0:
                    kept.append(at)
                    at = find(1, at + 1, end)
        if keep is not None:
            for to, column in zip(out, columns):
                to += map(column.__getitem__, kept)
        elif len(slices) == 1:
            for to, column in zip(out, columns):
                to += column[slices[0]].tolist()
        else:
            for to, column in zip(out, columns):
                to += memoryview(b''.join(map(
                    column.__getitem__, slices))).cast(column.format).tolist()

    def answer(self, cands, rendered_as=None):
        """model.Providers of an answer: those ``cands`` pick, and the
        Trees of those they allocate from. Made here, under the lock: the
        handler renders them after it is released. With ``rendered_as``,
        the key of the caller's rendering (render_trees_with), the trees
        unchanged since the snapshot come rendered (``rendered``: runs of
        them, see Snapshot.rendered) when the snapshot's file holds that
        rendering, not as Trees."""
        models = self.models
        provs = {rid: models[rid] for rid in model.picked_providers(cands)}
        roots = {provs[rid].root_id
                 for rid in model.allocated_providers(cands)}
        runs = ()
        base = self.base
        if rendered_as is not None and base.rendered_key == rendered_as:
            changed = self._tree_ov
            runs, missing = base.rendered(sorted(
                root for root in roots if root not in changed))
            if runs:
                roots = [root for root in roots if root in changed]
                roots += missing
        return model.Providers(provs, {root: self.tree(root)
                                       for root in roots},
                               rendered=runs)

    def tree(self, root):
        """The model.Tree of the tree under ``root``, kept until the tree
        changes: a tree's providers are made only for its summaries, from
        the snapshot's columns (the combiner makes the few it looks at).
        Its Layout is the snapshot's shape of the tree, or worked out and
        kept per root until the tree changes."""
        tree = self._made_trees.get(root)
        if tree is not None:
            return tree
        start, end, shape = self.base.tree_and_shape(root)
        mine = self._tree_ov.get(root)
        if mine is None and shape >= 0:
            tree = self._base_tree(start, end, shape)
        else:
            tree = self._other_tree(root, start, end, shape, mine)
        self._made_trees[root] = tree
        self._made_trees_size += len(tree.parts)
        return tree

    def _other_tree(self, root, start, end, shape, mine):
        """tree() of a tree changed since the snapshot (its providers
        ``mine``), or with a parent in another tree (``shape`` -1)."""
        base = self.base
        if mine is None:
            ids = None
            uuids = base.uuids_between(start, end)
            kinds = base.kind[start:end].tolist()
            layout = None
            canonical = base.canonical
        else:
            ids = mine
            kinds, over = self._changed_tree(root, mine)
            uuids, parent_ids, same, canonical = self._tree_columns(
                start, end, mine, over)
            layout = self._shapes[shape] if same and shape >= 0 else None
        if layout is None:
            layout = self._layouts.get(root)
        if layout is not None:
            return model.Tree(uuids, kinds, layout, canonical=canonical,
                              table=self._parts)
        if ids is None:
            ids = base.ids[start:end].tolist()
            parent_ids = base.parent[start:end].tolist()
        tree = model.Tree.of(ids, uuids, kinds, parent_ids, root,
                             self._uuid, table=self._parts)
        if tree.layout.size == len(ids):
            self._layouts[root] = tree.layout
        return tree

    def _base_tree(self, start, end, shape):
        """The model.Tree of the snapshot's tree at positions ``start`` to
        ``end``, of shape ``shape`` (not -1): as the snapshot has it."""
        base = self.base
        return model.Tree(base.uuids_between(start, end),
                          base.kind[start:end].tolist(), self._shapes[shape],
                          canonical=base.canonical, table=self._parts)

    def _tree_columns(self, start, end, ids, over):
        """(uuids, parent ids, same, canonical) of the providers ``ids``
        of a tree changed since the snapshot, whose run there is ``start``
        to ``end`` (``over``: _changed_in_run's); ``same``: the providers
        and parents are the run's; ``canonical``: every uuid is known
        canonical (model.Tree). Mostly the snapshot's own (a write changes
        one provider's usage, not the tree): read from its columns, with
        what changed put over them (no record made for the others)."""
        base = self.base
        if over is not None:
            uuids = list(base.uuids_between(start, end))
            parents = base.parent[start:end].tolist()
            same = canonical = True
            for i, rec in over:
                uuids[i] = rec.uuid.encode()
                same = same and (rec.parent or 0) == parents[i]
                canonical = canonical and snapshot.canonical(uuids[i])
                parents[i] = rec.parent
            return uuids, parents, same, canonical and base.canonical
        recs = list(map(self.rps.__getitem__, ids))
        return ([rec.uuid.encode() for rec in recs],
                [rec.parent for rec in recs], False, False)

    def _uuid(self, rid):
        """The uuid of provider ``rid`` (encoded), None if there is none."""
        rec = self.rps.get(rid)
        return rec.uuid.encode() if rec is not None else None
