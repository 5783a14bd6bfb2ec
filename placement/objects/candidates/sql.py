"""Allocation candidates in SQL: the engine of a database that does not
count its changes.

engine.find answers from this process's in-memory world (world/,
search.py) when the database counts its changes
(placement.objects.changes); one that does not -- made by upstream's
placement-manage, not yet upgraded by ours -- is answered here: the same
rules (rules.py) stated as SQL terms named after them (sql_terms.py:
``sql_terms.required_traits`` is ``rules.required_traits``), names
resolved the same way (names.py), the same combiner (combine.py), the
same walk (walk.py), of which this module is the source that reads the
database. tests/functional/test_candidates_world.py checks that both
engines answer alike on random worlds. capacity.py counts over this
engine too.

The algorithm:

1. per request group, one query returns compact (provider, root, class)
   rows for the providers that can serve each requested amount on their
   own (capacity minus usage, min_unit, max_unit, step_size) and pass the
   group's rules; sharing providers (trait MISC_SHARES_VIA_AGGREGATE) are
   looked up once, with the roots of every tree they share an aggregate
   with ("anchors");
2. the anchors every group can use are combined, ascending, after
   reading their whole trees (providers, inventories with usage, traits);
3. the walk stops at the limit. Under randomize with a limit, candidates
   are drawn instead, a uniform random sample of the whole answer
   (sample.py), reading the trees of the anchors drawn only.

Three seams make it cheaper without changing the answer, each with a test
that it answers as without it (test_candidate_gather.py):

* ``sql_request.Request.windows``: under a limit, step 1 is run for a first window of
  roots, then for the rest if the limit is not met, so a small limit does
  not gather every fitting provider's rows;
* ``_MIN_BATCH``: trees are read and combined in batches of anchors
  sized by the rate candidates come (``Database.ready``), so a limit is
  met without reading every tree, nor twice the trees it needs;
* ``sql_request._dense``: many close roots are read by id range rather than by list.
"""
import bisect
import itertools
import random

import os_traits

from placement.db import api as db_api
from placement.db import models
from placement.objects.candidates import combine
from placement.objects.candidates import model
from placement.objects.candidates import sample
from placement.objects.candidates import sql_request
from placement.objects.candidates import walk

_RP, _INV, _ALLOC = models.RP, models.INV, models.ALLOC
_RPT, _RPA = models.RPT, models.RPA

SHARING_TRAIT = os_traits.MISC_SHARES_VIA_AGGREGATE
# Under a limit, trees are first read for this many anchors or twice the
# limit, whichever is more; each next batch is four times larger.
_MIN_BATCH = 8

Empty = sql_request.Empty


def find_in_database(ctx, groups, wide, nested_aware=True,
                     max_candidates=-1, strategy='depth-first',
                     randomize=False):
    """(candidates, providers, has_trees) as engine.find answers, read
    from the database (walk.find says what a limit, ``max_candidates``
    and randomize make of them)."""
    found, providers, has_trees = _find(ctx, groups, wide, nested_aware,
                                        max_candidates, strategy, randomize)
    # The providers of the trees looked at: whole trees, which the
    # summaries are made from.
    if type(providers) is not model.Providers:
        providers = model.Providers(providers)
    return found, providers, has_trees


@db_api.reader_connection
def _find(ctx, groups, wide, nested_aware, max_candidates, strategy,
          randomize):
    try:
        gatherer = sql_request.Request(ctx, groups, wide)
    except Empty:
        return [], {}, False
    source = Database(gatherer)
    found = walk.find(source, wide, nested_aware, max_candidates, strategy,
                      randomize)
    return found, model.Providers(source.models,
                                  elsewhere=gatherer.elsewhere), \
        gatherer.trees


class Database:
    """The database as walk.py's source: rows gathered per window of roots
    (Request.windows), the trees of the anchors read in growing batches
    (``models``: the trees read so far), and for the sample every
    anchor's lists known from the rows, so anchors are drawn in
    proportion to their lists' product."""

    def __init__(self, gatherer):
        self.gatherer = gatherer
        self.sharing = gatherer.sharing
        self.trees = gatherer.trees
        self.models = {}
        self._listed = (None, set())

    def _read(self, anchors, groups):
        """Read the trees of ``anchors``, and of the sharing providers
        some of ``groups`` may use with the first batch."""
        listed, sharing = self._listed
        if listed is not groups:
            sharing = _sharing_listed(self.gatherer, groups)
            self._listed = (groups, sharing)
        self.models.update(self.gatherer.providers(
            anchors, sharing - set(self.models)))

    # -- the walk ---------------------------------------------------------

    def batches(self, roots, cap, found, breadth_first):
        if cap is not None and not breadth_first:
            return self.gatherer.windows(cap)
        return (None,)

    def fast(self, batch):
        return None

    def groups_for(self, window):
        return self.gatherer.combine_groups(window=window)

    def anchors(self, window, groups):
        return combine.viable_anchors(groups)

    def ready(self, anchors, groups, cap, found, breadth_first):
        """``anchors`` in batches, each one's trees read before it is
        combined. Under a cap the first holds a quarter more anchors than
        candidates still wanted (at least _MIN_BATCH), each next as many
        as the rate of candidates per anchor so far says are still
        needed, a quarter more (four times the last when none came)."""
        if cap is None or breadth_first:
            self._read(anchors, groups)
            yield anchors
            return
        start, read = len(found), 0
        batch = _more(cap - start, 1.0)
        while anchors:
            now, anchors = anchors[:batch], anchors[batch:]
            self._read(now, groups)
            yield now
            read += len(now)
            rate = (len(found) - start) / read
            batch = _more(cap - len(found), rate) if rate else 4 * batch

    def searches(self, nested_aware):
        return None

    # -- the sample ---------------------------------------------------------

    def random_order(self):
        return None

    def sample_groups(self):
        groups = self.gatherer.combine_groups()
        if not groups:
            return None
        return groups

    def attempts(self, checker, limit):
        groups = checker.groups
        self._anchors = anchors = combine.viable_anchors(groups)
        lists = [sample.lists_of(groups, a) for a in anchors]
        sizes = [sample.size(lsts) for lsts in lists]
        self._sharing = _sharing_listed(self.gatherer, groups)
        self._drawn = set()
        if sum(sizes) <= limit or _sharing_alone(lists, self._sharing):
            return None
        return _attempts(self, anchors, lists, sizes, checker,
                         limit), len(anchors)

    def complete(self, groups):
        self.models.update(self.gatherer.providers(
            [a for a in self._anchors if a not in self._drawn],
            self._sharing - set(self.models)))
        return self._anchors


def _more(wanted, rate):
    """How many anchors to read for ``wanted`` candidates at ``rate``
    candidates per anchor: a quarter more, at least _MIN_BATCH."""
    return max(_MIN_BATCH, int(wanted / rate * 1.25) + 1)


def _sharing_listed(gatherer, cgroups):
    """The sharing providers some group may use; their trees are read
    with the first batch."""
    return gatherer.sharing & {
        rp for cg in cgroups for per in cg.by_anchor.values()
        for rp in (per if cg.same_provider else
                   (rp for lst in per.values() for rp in lst))}


def _sharing_alone(lists, sharing):
    """Whether a candidate may be made of sharing providers alone (and
    so come from several anchors): every position has one in some
    anchor's list."""
    if not sharing or not lists:
        return False
    width = len(next(lsts for lsts in lists if lsts is not None))
    return all(any(lsts is not None and not sharing.isdisjoint(lsts[pos])
                   for lsts in lists)
               for pos in range(width))


def _attempts(source, anchors, lists, sizes, checker, limit):
    """sample.py's attempts: an anchor in proportion to its lists'
    product, then an element of that product uniformly. Anchors are
    drawn a batch ahead, so that their trees are read in one go (first
    batch: twice the limit, then four times more each)."""
    layout = sample.shape(checker.groups)
    cum = list(itertools.accumulate(sizes))
    total = cum[-1]
    randrange = random.randrange
    batch = max(_MIN_BATCH, 2 * limit)
    gatherer, models, sharing, read = (source.gatherer, source.models,
                                       source._sharing, source._drawn)
    while True:
        drawn = [bisect.bisect_right(cum, randrange(total))
                 for _ in range(batch)]
        need = {anchors[i] for i in drawn} - read
        if need:
            models.update(gatherer.providers(need, sharing - set(models)))
            read |= need
        for i in drawn:
            yield anchors[i], sample.decode(layout, lists[i],
                                            randrange(sizes[i]))
        batch *= 4
