"""A uniform random sample of the allocation candidates, drawn without
generating them all: ``randomize_allocation_candidates`` with a limit.

Upstream generates every candidate, then keeps ``random.sample(candidates,
limit)``: every set of ``limit`` candidates of the whole answer is equally
likely, listed in a random order. Both engines answer with that
distribution (walk.py's sample, with the attempts of search.py over the
world and sql.py in SQL); this module is what they share.

The draw. Under each anchor root r, the combiner picks, per position of
its search (``combine.Checker.groups``: a numbered group, or one class of
the unnumbered group), one provider of a list: the providers that can
serve it there. The product of r's lists, of size P_r, holds every
candidate of r, and combinations that break a rule (capacity summed over
groups, isolate, traits, same_subtree). One attempt:

1. takes an anchor r with probability proportional to P_r: uniformly
   among R roots, then keeps on with probability P_r / C, where C is at
   least every P_r (the world, which knows P_r of the roots it looked at
   only, see search.py's bound); or straight in proportion to P_r when
   every P_r is known (the SQL engine reads all the lists at once);
2. takes one element of r's product, uniformly;
3. keeps it if it is a candidate (``combine.Checker``: the combiner's own
   rules) not kept before.

A candidate x of anchor r comes out of one attempt with probability
(1/R) (P_r/C) (1/P_r) = 1/(R C) -- or P_r/sum(P) * 1/P_r = 1/sum(P) --
the same for every candidate, independently of the other attempts. The
candidates kept are thus the distinct values of an i.i.d. uniform
sequence over the whole answer, and the first ``limit`` distinct values
of such a sequence are a uniformly random ``limit``-subset (in a
uniformly random order): random.sample's distribution.

That needs each candidate to belong to one anchor. A candidate using a
provider that is not a sharing provider does: that provider is listed
under its own root only. A candidate made of sharing providers alone can
come from every root they share an aggregate with, and would be drawn
that many times more often; a request that may have such candidates
(every position servable by a sharing provider) is answered by
enumerating every candidate and sampling, as upstream.

Stopping early. Whatever happened in the attempts so far, the rest of
the draw would be a uniform sample without replacement of the candidates
not kept yet: it depends on the past only through what was kept. So the
engine may stop attempting at any point, on any rule (``budget``
attempts, every root looked at), enumerate the whole answer and take the
missing ones with random.sample from what was not kept (``fill``): the
answer has the same distribution. A limit larger than the answer ends
there too, with every candidate.
"""
import random

# Attempts before enumerating instead: per anchor root, plus this many.
BUDGET_PER_ROOT = 8
BUDGET_MIN = 4096


def budget(roots):
    return BUDGET_PER_ROOT * roots + BUDGET_MIN


def shape(groups):
    """Per group in search order: (numbered, how many lists)."""
    return [(g.same_provider, 1 if g.same_provider else len(g.resources))
            for g in groups]


def lists_of(groups, anchor):
    """``anchor``'s lists, one per position in search order; None when a
    group has none there."""
    out = []
    for g in groups:
        per = g.by_anchor.get(anchor)
        if not per:
            return None
        if g.same_provider:
            out.append(per)
            continue
        for rc, _amount in g.resources:
            lst = per.get(rc)
            if not lst:
                return None
            out.append(lst)
    return out


def size(lists):
    """How many elements the product of ``lists`` has (0 for None)."""
    if lists is None:
        return 0
    n = 1
    for lst in lists:
        n *= len(lst)
    return n


def decode(layout, lists, u):
    """Element ``u`` (0 <= u < size(lists)) of the product of ``lists``,
    as picks: a provider per numbered group, a tuple per class for the
    unnumbered one (``layout`` is shape())."""
    picks = []
    pos = 0
    for numbered, width in layout:
        if numbered:
            lst = lists[pos]
            u, i = divmod(u, len(lst))
            picks.append(lst[i])
        else:
            one = []
            for lst in lists[pos:pos + width]:
                u, i = divmod(u, len(lst))
                one.append(lst[i])
            picks.append(tuple(one))
        pos += width
    return tuple(picks)


def draw(limit, attempts, checker, most):
    """{picks: Candidate} kept from ``attempts`` (an iterator of (anchor,
    picks), or None for an attempt that drew nothing), in the order drawn,
    until ``limit`` are kept, ``attempts`` ends or ``most`` were made."""
    kept = {}
    ok = checker.ok
    made = 0
    for attempt in attempts:
        made += 1
        if attempt is not None:
            anchor, picks = attempt
            if picks not in kept and ok(anchor, picks):
                kept[picks] = checker.candidate(picks)
                if len(kept) >= limit:
                    break
        if made >= most:
            break
    return kept


def fill(kept, limit, everything):
    """The answer: ``kept`` ({picks: Candidate}) completed to ``limit``
    candidates with a uniform sample of the others of ``everything``
    (every candidate of the answer, as combine yields them), in a random
    order."""
    found = list(kept.values())
    if len(found) < limit:
        rest = [c for c in everything if c.picks not in kept]
        found += random.sample(rest, min(limit - len(found), len(rest)))
    random.shuffle(found)
    return found
