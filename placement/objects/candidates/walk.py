"""The one walk of GET /allocation_candidates, over either source.

Both engines answer by the same steps: cut the roots into windows and
batches, gather per request group what each anchor root may use, hand
that to the combiner (combine.py) and stop at the limit; or, randomized
under a limit, draw a uniform random sample of the whole answer
(sample.py). Those steps are written here once, so that the limit,
breadth-first, the batches and the sample cannot drift apart between the
engines; what differs is where the providers come from, which a source
tells:

* the world (search.World over world_request.Request): every provider in
  memory, roots walked in batches growing with the rate candidates come,
  a fast path for trees of one provider, rejection sampling with a bound;
* the database (sql.Database over sql_request.Request): rows gathered per
  window of roots, the trees of the anchors read in growing batches, each
  anchor's lists known up front for the sample.

A source provides:

``sharing``, ``trees``, ``models``
    the sharing provider ids (the combiner's shared_ids), whether any
    provider has a parent, and {id: model.Provider} the combiner reads
    (filled by the source as trees are read);
``batches(roots, cap, found, breadth_first)``
    the walk's batches of roots (``roots``: an order to walk, or None for
    the source's own), from ``found`` so far under ``cap``;
``fast(batch)``
    the batch's candidates when a fast path answers it, else None;
``groups_for(batch)``
    model.Group per request group for the batch, None when some group
    has nothing there;
``anchors(batch, groups)``
    the anchors every group can use, in the walk's order;
``ready(anchors, groups, cap, found, breadth_first)``
    those anchors in batches whose trees are in ``models``;
``searches(nested_aware)``
    the combiner's cache of searches by anchor, or None;
``random_order()``
    an order of the roots in which the first candidates found are already
    a uniform sample (each root one candidate or none), or None;
``sample_groups()``, ``attempts(checker, limit)``, ``complete(groups)``
    the sample's groups (None: no candidate), its attempts and how many
    roots they draw from (None: enumerate instead), and the anchors of the
    whole answer once every tree it needs is in ``models``.
"""
import itertools
import random

from placement.objects.candidates import combine
from placement.objects.candidates import sample


def find(source, wide, nested_aware, max_candidates, strategy, randomize):
    """The candidates of the request ``source`` answers, as engine.find:
    generation stops at ``limit`` (or ``max_candidates``); randomized
    with a limit, a uniform random sample of the whole answer, as
    upstream's random.sample of every candidate; with ``max_candidates``
    too, as upstream, a sample of the first ``max_candidates`` generated.
    Randomized without a limit, up to ``max_candidates`` are shuffled."""
    cap = max_candidates if (max_candidates is not None and
                             max_candidates >= 0) else None
    limit = wide.limit
    if randomize and limit is not None and cap is None:
        order = source.random_order()
        if order is None:
            return _sample(source, wide, nested_aware, limit)
        # Each root is one candidate or none, and no two roots the same
        # one: the first ``limit`` found in a uniformly random order of
        # the roots are a uniform sample, in a random order already.
        return _walk(source, order, limit, wide, nested_aware,
                     'depth-first')
    if limit is not None and not randomize:
        cap = limit if cap is None else min(cap, limit)
    found = _walk(source, None, cap, wide, nested_aware, strategy)
    if randomize:
        # As upstream: a sample of what max_allocation_candidates let be
        # generated, or all of it shuffled.
        if limit is not None and len(found) > limit:
            found = random.sample(found, limit)
        else:
            random.shuffle(found)
    return found


def _options(source, wide, nested_aware):
    return dict(isolate=wide.group_policy == 'isolate',
                same_subtrees=wide.same_subtrees,
                one_provider_per_tree=not nested_aware and source.trees)


def _walk(source, roots, cap, wide, nested_aware, strategy):
    """Candidates up to ``cap``, batch of roots after batch (breadth-first:
    one batch of every root, for its round-robin runs across every
    anchor), anchor by anchor in each batch's order: by the source's fast
    path where it answers the batch, else gathered and combined."""
    breadth = strategy == 'breadth-first'
    found = []
    seen = set()
    options = _options(source, wide, nested_aware)
    searches = source.searches(nested_aware)
    models = source.models
    for batch in source.batches(roots, cap, found, breadth):
        gens = source.fast(batch)
        if gens is not None:
            gens = (gens,)
        else:
            groups = source.groups_for(batch)
            if not groups:
                continue
            anchors = source.anchors(batch, groups)
            if not anchors:
                continue
            gens = (combine.combine(
                models, groups, strategy=strategy, anchors=now, seen=seen,
                shared_ids=source.sharing, searches=searches, **options)
                for now in source.ready(anchors, groups, cap, found,
                                        breadth))
        for gen in gens:
            if cap is None:
                found.extend(gen)
                continue
            found.extend(itertools.islice(gen, cap - len(found)))
            if len(found) >= cap:
                return found
    return found


def _sample(source, wide, nested_aware, limit):
    """``limit`` candidates, a uniform random sample of the whole answer
    (sample.py): the source's attempts while they keep candidates, then,
    if fewer than ``limit`` were kept, the whole answer enumerated."""
    groups = source.sample_groups()
    if groups is None:
        return []
    options = _options(source, wide, nested_aware)
    checker = combine.Checker(source.models, groups, **options)
    kept = {}
    plan = source.attempts(checker, limit)
    if plan is not None:
        attempts, drawn_from = plan
        kept = sample.draw(limit, attempts, checker,
                           sample.budget(drawn_from))
    everything = ()
    if len(kept) < limit:
        everything = combine.combine(
            source.models, groups, anchors=source.complete(groups),
            shared_ids=source.sharing, **options)
    return sample.fill(kept, limit, everything)
