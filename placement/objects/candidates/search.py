"""The in-memory world (``world/``) as a source of walk.py's walk.

The walk (walk.py: limit, batches, breadth-first, the random sample) is
the SQL engine's too; what is the world's is here and in
world_request.py:

1. names resolved to ids (``world_request.Request``, through names.py);
   names that do not exist answer as upstream does (400, or an empty
   answer when an earlier group has no candidates anyway);
2. the roots walked by id a batch at a time (``_batches``, sized by the
   rate candidates come), per batch and per request group, per anchor
   root, the providers able to serve the group on their own (the
   functions of rules.py), plus the sharing providers anchored to the
   root by an aggregate (``Request.groups_for``); every provider is in
   memory, so a batch of anchors is combined in one go.

One fast path, behind one seam (``_sole``): one unnumbered group, no
sharing providers, over trees each with at most one provider having a
class it asks for (every tree of a flat world; a host's compute node
when its NUMA nodes and devices have other classes): each tree's
candidate is that provider holding the whole request, or none. A batch
with a tree of two such providers goes the general way. Its answers are
the general path's (``test_sole_fast_path_answers_as_the_general_path``
checks they agree).

How it stays flat in the number of providers under a limit: the walk
stops as soon as ``limit`` candidates are found. With randomize on, a
``limit`` is a uniform random sample of the whole answer, as upstream's
random.sample of every candidate: ``_attempts`` draw it root by root
(sample.py has the method and why it is exact), looking at a root when it
is first drawn, so the work grows with the roots drawn, not with the
world, as long as most roots fit. The bound it needs, the most choices a
root can offer, comes from the world's counts of providers per class and
tree (per_tree.PerTree) and the sharing providers (``Request.bound``).
When that bound is 1 every root is one candidate or none (every flat
world; the plain request over hosts whose compute node alone has its
classes), and the first ``limit`` found by the walk over a lazily
shuffled order of the roots (``_random_order``) are already such a
sample, found at the plain walk's cost.
"""
import itertools
import random

from placement.objects.candidates import combine
from placement.objects.candidates import model
from placement.objects.candidates import names
from placement.objects.candidates import sample
from placement.objects.candidates import walk
from placement.objects.candidates import world_request

# Roots looked at in the first batch of a walk (each next is four times
# more), and at least this many per candidate still wanted.
_FIRST_BATCH = 8
# Roots looked at per batch when a sample enumerates after all.
_LOOK_CHUNK = 4096


Empty = names.Empty


def _random_order(items):
    """``items`` (distinct) in a uniformly random order, drawn lazily:
    taking k of them costs O(k) whatever len(items). The order in which
    items first come up in uniform draws with replacement is uniformly
    random (random.choices: a fifth of randrange's cost); once half have
    come up, the rest follow shuffled."""
    n = len(items)
    seen = set()
    choices = random.choices
    while 2 * len(seen) < n:
        for item in choices(items, k=max(_FIRST_BATCH, len(seen) // 4)):
            if item not in seen:
                seen.add(item)
                yield item
    rest = [item for item in items if item not in seen]
    random.shuffle(rest)
    yield from rest


def _sole(req, g, roots):
    """Seam of the fast path: the candidates of the trees under ``roots``
    (in that order) for ``g``, req.sole_group, when each tree has at most
    one provider with inventory of a class ``g`` asks for (a flat world's
    trees; or the compute node of a host whose NUMA nodes and devices
    have other classes): its candidate is then that provider holding
    every class and passing the group's rules as the only provider it
    draws on, or none. None when some tree has two (the general path
    answers the batch). One look at each tree's row, no lists by anchor,
    no search: what the general path answers
    (test_sole_fast_path_answers_as_the_general_path)."""
    batch = req.batch(roots)
    tree_roots = batch.roots
    if len(set(tree_roots)) < len(tree_roots):
        return None
    whole = req.fitting(g, batch, whole=True)
    picked = dict(zip(itertools.compress(tree_roots, whole),
                      itertools.compress(batch.ids, whole)))
    if g.tree_root is not None:
        picked = {g.tree_root: picked[g.tree_root]} \
            if g.tree_root in picked else {}
    if g.required or g.forbidden or g.member_of or g.forbidden_aggs:
        rps = req.rps
        picked = {root: rid for root, rid in picked.items()
                  if req.passes(g, rps[rid], alone=True)}
    # tree_rows gives the trees changed since the snapshot last.
    chosen = [picked[root] for root in roots if root in picked]
    return model.Candidate.wholes(req.sole_combine_group, chosen)


def _batches(roots, cap, found):
    """``roots`` (an iterator) in lists for the walk: ``_FIRST_BATCH`` at
    first; then, under a ``cap``, as many as the candidates still wanted
    need at the rate the trees looked at so far gave them (``found``: the
    walk's list), a fiftieth more (one batch more costs less than
    looking at trees for nothing), at least ``_FIRST_BATCH``; four times
    more than the last when none came yet, or without a cap. A thousand
    candidates over trees giving one each look at about 1,020 trees; over
    trees giving 24 each (same_subtree over NUMA nodes and devices), at
    about 45, not a thousand."""
    size = _FIRST_BATCH
    looked = 0
    while True:
        batch = list(itertools.islice(roots, size))
        if not batch:
            return
        yield batch
        looked += len(batch)
        if cap is not None and found:
            wanted = cap - len(found)
            size = max(_FIRST_BATCH,
                       -(-wanted * looked * 51 // (len(found) * 50)))
        else:
            size *= 4


class World:
    """The in-memory world as walk.py's source: every provider in memory
    (``models``: made as the combiner looks at them), the roots walked in
    batches growing with the rate candidates come (``_batches``), the fast
    path (``_sole``), and the sample's rejection by a bound: the world
    knows an anchor's lists once it looked at its tree only."""

    def __init__(self, req):
        self.req = req
        self.sharing = req.sharing
        self.trees = req.trees
        self.models = req.providers()
        self._looked = {}

    # -- the walk ---------------------------------------------------------

    def batches(self, roots, cap, found, breadth_first):
        if roots is None:
            roots = self.req.anchor_roots
            if roots is None:
                roots = self.req.world.roots
        if breadth_first:
            return iter([list(roots)])
        return _batches(iter(roots), cap, found)

    def fast(self, batch):
        sole = self.req.sole_group
        return None if sole is None else _sole(self.req, sole, batch)

    def groups_for(self, batch):
        return self.req.groups_for(batch)

    def anchors(self, batch, groups):
        viable = set(combine.viable_anchors(groups))
        return [r for r in batch if r in viable] if viable else []

    def ready(self, anchors, groups, cap, found, breadth_first):
        # Every tree is in memory: the batch is combined in one go.
        return (anchors,)

    def searches(self, nested_aware):
        return self.req.searches(nested_aware)

    # -- the sample ---------------------------------------------------------

    def random_order(self):
        req = self.req
        if req.bound() > 1 or req.sharing_alone():
            return None
        return _random_order(req.sample_roots())

    def sample_groups(self):
        req = self.req
        self._roots = req.sample_roots()
        self._bound = req.bound() if self._roots else 0
        if not self._bound:
            # Some class no provider has.
            return None
        self._master = [g.combine_group({}) for g in req.groups]
        return self._master

    def attempts(self, checker, limit):
        roots = self._roots
        if len(roots) * self._bound <= limit or self.req.sharing_alone():
            return None
        return _attempts(self.req, roots, self._master, checker,
                         self._bound, self._looked, limit), len(roots)

    def complete(self, groups):
        rest = [r for r in self._roots if r not in self._looked]
        for i in range(0, len(rest), _LOOK_CHUNK):
            _look(self.req, rest[i:i + _LOOK_CHUNK], groups)
        return combine.viable_anchors(groups)


def _look(req, roots, master):
    """Add to ``master`` (model.Group per group, lists by anchor) the
    lists of the anchors among ``roots`` that every group can use."""
    cgroups = req.groups_for(roots)
    if cgroups is None:
        return
    viable = combine.viable_anchors(cgroups)
    for whole, cg in zip(master, cgroups):
        for anchor in viable:
            whole.by_anchor[anchor] = cg.by_anchor[anchor]


def _attempts(req, roots, master, checker, bound, looked, limit):
    """sample.py's attempts over ``roots``: a root uniformly (with
    replacement), kept with probability P_r / ``bound``, then an element
    of its lists' product uniformly. Roots are drawn a batch ahead
    (``limit`` or 8 at first, then an eighth of as many as drawn so far:
    when most attempts keep a candidate, the first batch leaves only the
    few its duplicates lost to draw, and a tree looked at costs about 9 us
    at a million providers) and those not seen yet looked at together
    (``looked``: root -> (P_r, lists)), their lists added to ``master``.
    Once every root was looked at, ``bound`` is the largest P_r, and the
    attempts end if the products hold no more than ``limit`` elements
    (``fill`` takes them all)."""
    groups = checker.groups
    layout = sample.shape(groups)
    randrange = random.randrange
    choices = random.choices
    batch = max(_FIRST_BATCH, limit)
    done = 0
    while True:
        # random.choices: roots[floor(random() * len(roots))], off
        # uniform by less than len(roots) / 2**53 (1e-7 for a billion),
        # at a fifth of randrange's cost.
        drawn = choices(roots, k=batch)
        new = sorted(set(drawn).difference(looked))
        if new:
            _look(req, new, master)
            for root in new:
                lists = sample.lists_of(groups, root)
                looked[root] = (sample.size(lists), lists)
            if len(looked) == len(roots):
                sizes = [n for n, _lists in looked.values()]
                if sum(sizes) <= limit:
                    return
                bound = max(sizes)
        for root in drawn:
            n, lists = looked[root]
            u = randrange(bound) if bound > 1 else 0
            yield (root, sample.decode(layout, lists, u)) if u < n else None
        done += batch
        batch = max(_FIRST_BATCH, done // 8)


def find_in_world(ctx, conn, world, groups, wide, nested_aware=True,
                  max_candidates=-1, strategy='depth-first',
                  randomize=False, rendered_as=None):
    """(candidates, providers, has_trees) as engine.find answers, from
    ``world`` (refreshed by the caller, its lock held)."""
    try:
        req = world_request.Request(ctx, conn, world, groups, wide)
    except Empty:
        return [], model.Providers(), world.children > 0
    found = walk.find(World(req), wide, nested_aware, max_candidates,
                      strategy, randomize)
    return found, world.answer(found, rendered_as), req.trees
