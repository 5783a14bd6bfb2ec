"""What the random sample needs to know of every tree, kept per world.

The sample (sample.py) needs a true bound on the choices any root offers a
request group; the most providers one tree has with a class, or with a
trait, is one. ``PerTree`` counts them per tree, from the kinds of the
tree's providers (world.Kind), for the whole world on first use and then
for the trees changed since.
"""
import collections


class PerTree:
    """The most providers one tree has with inventory of a class
    (``most``; class None: providers of any kind), or with a trait
    (``most_with_trait``): true bounds on the choices a root offers a
    group, which the random sample needs (world_request.Request.bound,
    sample.py). Counts, not capacity, so usage changes leave them alone.

    Kept per tree as a summary shared by alike trees (a cloud's trees are
    alike: little memory), and settled for the trees changed since
    (``touch``) when next asked."""

    _ANY = (0, None)

    def __init__(self, world):
        self.world = world
        # root -> ((key, providers), ...): key (0, None) for the tree's
        # size, (1, class id), (2, trait id)
        self.of_tree = {}
        # key -> {providers in one tree: trees with that many}
        self.trees = collections.defaultdict(collections.Counter)
        # key -> the roots of the trees with at least one such provider
        self.roots = collections.defaultdict(set)
        self.changed = set()
        self._unsettled = True          # every tree: see _settle_all
        # kind index -> the index of what the counts read of it (its
        # classes and traits, not its usage): a kind per usage makes
        # nearly every used tree's kinds its own, not its counts.
        self._counted_as = []
        self._counted_index = {}
        self._same = {}

    def touch(self, root):
        self.changed.add(root)

    def _counted(self, kinds):
        """``kinds`` (indexes of world.Kind) as what the counts read."""
        counted_as = self._counted_as
        if len(counted_as) < len(self.world.kinds):
            index = self._counted_index
            for kind in self.world.kinds[len(counted_as):]:
                counted_as.append(index.setdefault(
                    (frozenset(kind.inv), kind.traits), len(index)))
        return tuple(map(counted_as.__getitem__, kinds))

    def _summary(self, kinds):
        """The counts of a tree whose providers are of ``kinds``."""
        key = self._counted(kinds)
        summary = self._same.get(key)
        if summary is None:
            counts = collections.Counter()
            counts[self._ANY] = len(kinds)
            for k in kinds:
                kind = self.world.kinds[k]
                counts.update((1, rc) for rc in kind.inv)
                counts.update((2, tid) for tid in kind.traits)
            summary = self._same[key] = tuple(sorted(counts.items()))
        return summary

    def _settle_all(self):
        """Count every tree: trees alike counted together (a million
        providers in a fraction of a second, not the seconds a tree at a
        time took: the first random sample of a worker, and of every
        process after each new snapshot file, waited for it)."""
        alike = collections.defaultdict(list)
        for root, kinds in self.world.kinds_by_tree():
            if kinds:
                alike[self._summary(kinds)].append(root)
        hists, of_tree = self.trees, self.of_tree
        for summary, roots in alike.items():
            of_tree.update(dict.fromkeys(roots, summary))
            for key, n in summary:
                hists[key][n] += len(roots)
                self.roots[key].update(roots)
        self._unsettled = False
        self.changed.clear()

    def _settle(self):
        if self._unsettled:
            self._settle_all()
            return
        hists = self.trees
        for root in self.changed:
            for key, n in self.of_tree.pop(root, ()):
                hist = hists[key]
                hist[n] -= 1
                if not hist[n]:
                    del hist[n]
                self.roots[key].discard(root)
            kinds = self.world.tree_kinds(root)
            if not kinds:
                continue
            summary = self.of_tree[root] = self._summary(kinds)
            for key, n in summary:
                hists[key][n] += 1
                self.roots[key].add(root)
        self.changed.clear()

    def _most(self, key):
        if self.changed or self._unsettled:
            self._settle()
        hist = self.trees.get(key)
        return max(hist) if hist else 0

    def most(self, rc):
        """The most providers with class ``rc`` (None: any) in one tree;
        0 if none has it."""
        return self._most(self._ANY if rc is None else (1, rc))

    def most_with_trait(self, trait_id):
        return self._most((2, trait_id))

    def roots_with(self, rc):
        """The roots of the trees with a provider of class ``rc``."""
        if self.changed or self._unsettled:
            self._settle()
        return self.roots.get((1, rc), ())
