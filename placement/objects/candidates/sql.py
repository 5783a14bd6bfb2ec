"""Allocation candidates in SQL: the engine of a database that does not
count its changes.

engine.find answers from this process's in-memory world (world/,
search.py) when the database counts its changes
(placement.objects.changes); one that does not -- made by upstream's
placement-manage, not yet upgraded by ours -- is answered here: the same
rules (rules.py) stated as SQL terms named after them (sql_terms.py:
``sql_terms.required_traits`` is ``rules.required_traits``), names resolved the same way (names.py),
the same combiner (combine.py). tests/functional/test_candidates_world.py
checks that both engines answer alike on random worlds. capacity.py
counts over this engine too.

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
* ``_MIN_BATCH``: trees are read and combined in growing batches of
  anchors, so a limit is met without reading every tree;
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
    from the database.

    Without randomization generation stops at ``limit`` (or
    ``max_candidates``). With randomization and a limit, ``limit``
    candidates are drawn, a uniform random sample of the whole answer
    (sample.py), as upstream's random.sample of every candidate; with
    ``max_candidates`` too, as upstream, a sample of the first
    ``max_candidates`` generated. Randomized without a limit, up to
    ``max_candidates`` are shuffled.
    """
    cap = max_candidates if (max_candidates is not None and
                             max_candidates >= 0) else None
    if randomize and wide.limit is not None and cap is None:
        found, providers, has_trees = _sample(ctx, groups, wide, wide.limit,
                                              nested_aware)
    else:
        if wide.limit is not None and not randomize:
            cap = wide.limit if cap is None else min(cap, wide.limit)
        found, providers, has_trees = _search(ctx, groups, wide, cap,
                                              nested_aware, strategy)
        found = _randomized(found, wide, randomize)
    # The providers of the trees looked at: whole trees, which the
    # summaries are made from.
    if type(providers) is not model.Providers:
        providers = model.Providers(providers)
    return found, providers, has_trees


def _gatherer(ctx, groups, wide):
    """The Request of ``groups``; None when no provider can match."""
    try:
        return sql_request.Request(ctx, groups, wide)
    except Empty:
        return None


def _request(ctx, groups, wide):
    """(Request, its combine groups over every root) for the sample;
    (None, the empty answer) when no provider can match."""
    gatherer = _gatherer(ctx, groups, wide)
    if gatherer is None:
        return None, ([], {}, False)
    cgroups = gatherer.combine_groups()
    if not cgroups:
        return None, ([], {}, gatherer.trees)
    return gatherer, cgroups


@db_api.reader_connection
def _search(ctx, groups, wide, cap, nested_aware, strategy):
    """Gather the groups' rows, then combine anchor batch after anchor
    batch, stopping at ``cap`` candidates. Under a cap the rows are
    gathered a window of roots at a time (Request.windows): the first
    trees' rows answer a small limit without reading every tree's."""
    gatherer = _gatherer(ctx, groups, wide)
    if gatherer is None:
        return [], {}, False
    windows = (None,)
    if cap is not None and strategy != 'breadth-first':
        windows = gatherer.windows(cap)
    found = []
    providers = {}
    seen = set()
    for window in windows:
        cgroups = gatherer.combine_groups(window=window)
        if not cgroups:
            continue
        anchors = combine.viable_anchors(cgroups)
        sharing = _sharing_listed(gatherer, cgroups)
        batch = len(anchors)
        if cap is not None and strategy != 'breadth-first':
            batch = max(_MIN_BATCH, 2 * (cap - len(found)))
        while anchors and (cap is None or len(found) < cap):
            now, anchors = anchors[:batch], anchors[batch:]
            batch *= 4
            providers.update(gatherer.providers(now,
                                                sharing - set(providers)))
            for cand in combine.combine(
                    providers, cgroups,
                    isolate=wide.group_policy == 'isolate',
                    same_subtrees=wide.same_subtrees,
                    one_provider_per_tree=not nested_aware and gatherer.trees,
                    strategy=strategy, anchors=now, seen=seen,
                    shared_ids=gatherer.sharing):
                found.append(cand)
                if cap is not None and len(found) >= cap:
                    break
        if cap is not None and len(found) >= cap:
            break
    return found, model.Providers(providers, elsewhere=gatherer.elsewhere), \
        gatherer.trees


def _sharing_listed(gatherer, cgroups):
    """The sharing providers some group may use; their trees are read
    with the first batch."""
    return gatherer.sharing & {
        rp for cg in cgroups for per in cg.by_anchor.values()
        for rp in (per if cg.same_provider else
                   (rp for lst in per.values() for rp in lst))}


def _randomized(found, wide, randomize):
    """As upstream: a sample of what max_allocation_candidates let be
    generated, or all of it shuffled."""
    if not randomize:
        return found
    if wide.limit is not None and len(found) > wide.limit:
        return random.sample(found, wide.limit)
    random.shuffle(found)
    return found


@db_api.reader_connection
def _sample(ctx, groups, wide, limit, nested_aware):
    """``limit`` candidates, a uniform random sample of the whole answer
    (sample.py): every anchor's lists are known from the rows, so an
    anchor is drawn in proportion to its lists' product, and trees are
    read for the anchors drawn, a batch at a time."""
    gatherer, cgroups = _request(ctx, groups, wide)
    if gatherer is None:
        return cgroups
    providers = {}
    options = dict(isolate=wide.group_policy == 'isolate',
                   same_subtrees=wide.same_subtrees,
                   one_provider_per_tree=not nested_aware and gatherer.trees)
    checker = combine.Checker(providers, cgroups, **options)
    anchors = combine.viable_anchors(cgroups)
    lists = [sample.lists_of(checker.groups, a) for a in anchors]
    sizes = [sample.size(lsts) for lsts in lists]
    sharing = _sharing_listed(gatherer, cgroups)
    read = set()
    kept = {}
    if sum(sizes) > limit and not _sharing_alone(lists, sharing):
        kept = sample.draw(
            limit, _attempts(gatherer, anchors, lists, sizes, checker,
                             providers, sharing, read, limit),
            checker, sample.budget(len(anchors)))
    everything = ()
    if len(kept) < limit:
        providers.update(gatherer.providers(
            [a for a in anchors if a not in read],
            sharing - set(providers)))
        everything = combine.combine(
            providers, cgroups, anchors=anchors,
            shared_ids=gatherer.sharing, **options)
    return (sample.fill(kept, limit, everything),
            model.Providers(providers, elsewhere=gatherer.elsewhere),
            gatherer.trees)


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


def _attempts(gatherer, anchors, lists, sizes, checker, providers,
              sharing, read, limit):
    """sample.py's attempts: an anchor in proportion to its lists'
    product, then an element of that product uniformly. Anchors are
    drawn a batch ahead, so that their trees are read in one go (first
    batch: twice the limit, then four times more each)."""
    layout = sample.shape(checker.groups)
    cum = list(itertools.accumulate(sizes))
    total = cum[-1]
    randrange = random.randrange
    batch = max(_MIN_BATCH, 2 * limit)
    while True:
        drawn = [bisect.bisect_right(cum, randrange(total))
                 for _ in range(batch)]
        need = {anchors[i] for i in drawn} - read
        if need:
            providers.update(gatherer.providers(
                need, sharing - set(providers)))
            read |= need
        for i in drawn:
            yield anchors[i], sample.decode(layout, lists[i],
                                            randrange(sizes[i]))
        batch *= 4
