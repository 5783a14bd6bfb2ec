"""Why a GET /allocation_candidates query answers what it answers.

Everything is read from one snapshot of the world the answer comes from
(engine.snapshot): the real answer is searched in it (search.py), and
every reason comes from the verdicts of the rules that search applies
(rules.py). An explanation therefore agrees with the answer by
construction; ordinary candidate queries never pay for it.

Shape of the explanation:

* per request group, the providers each rule kept, in a fixed order
  (class present, capacity left, min/max unit and step size, required
  and forbidden traits, member_of and its forbidden aggregates, in_tree,
  root_required). A numbered group judges one provider; the unnumbered
  group judges a provider with its root for aggregates and with its
  tree (or the sharing providers) for amounts and required traits;
* then what combining the groups removed, worked out by searching the
  same world again with one rule relaxed at a time (limit, group_policy
  isolate, same_subtree, one provider per tree before 1.29): a provider
  used only once a rule is relaxed was removed by that rule; what no
  relaxation brings back is explained from the per-group survivors
  (nothing in its tree serves another group, a sharing provider with no
  tree to serve, or the picks do not fit together);
* the first reason for every provider, in words and numbers;
* when nothing fits, what dropping one constraint would bring back.

Kept providers are exactly those the real answer allocates from or maps
a group to; every other provider has one reason, so the counts add up.
"""
import collections
import copy


from placement import exception
from placement.objects import aggregate_rules
from placement.objects.candidates import engine as engine_mod
from placement.objects.candidates import names as names_mod
from placement.objects.candidates import reasons
from placement.objects.candidates import rules
from placement.objects.candidates import search
from placement.objects.candidates import suggestions

# Steps after the groups are combined, in the order they are attributed.
COMBINATION = [
    ('limit', 'limit'),
    ('isolate', 'group_policy=isolate'),
    ('same_subtree', 'same_subtree'),
    ('one_per_tree', 'one provider per tree (before 1.29)'),
    ('tree', 'rest of the tree cannot serve the request'),
    ('sharing', 'sharing provider: no tree to serve'),
    ('together', 'picks do not fit together'),
]
# Relaxed searches stop here: enough to see which providers some
# candidate uses.
_RELAXED_CAP = 20000


def _used_by_group(cands):
    """{suffix: {provider id}} over candidates (allocations, and the
    mappings of resourceless groups)."""
    out = collections.defaultdict(set)
    for cand in cands:
        for group, pick in zip(cand.groups, cand.picks):
            if group.same_provider:
                out[group.suffix].add(pick)
            else:
                out[group.suffix].update(pick)
    return out


def _flat_used(by_group):
    return set().union(*by_group.values()) if by_group else set()


class Engine:
    """The handler's options, for the real search and the relaxed ones,
    all in one snapshot of the world (``explain`` sets ``world``)."""

    def __init__(self, ctx, nested_aware, max_candidates, strategy,
                 randomize):
        self.ctx = ctx
        self.nested_aware = nested_aware
        self.max_candidates = max_candidates
        self.strategy = strategy
        self.randomize = randomize
        self.world = self.conn = None

    def real(self, groups, wide):
        """The answer, as engine.find gives it from this world."""
        return search.find_in_world(
            self.ctx, self.conn, self.world, groups, wide,
            nested_aware=self.nested_aware,
            max_candidates=self.max_candidates, strategy=self.strategy,
            randomize=self.randomize)

    def relaxed(self, groups, wide, nested_aware=None):
        """Providers used per group, with no limit. A name that does not
        exist gives nothing: the real query answered 200 only because an
        earlier group was empty (upstream's order), which a relaxed
        query may no longer be."""
        wide = copy.copy(wide)
        wide.limit = None
        try:
            cands, _p, _t = search.find_in_world(
                self.ctx, self.conn, self.world, groups, wide,
                nested_aware=(self.nested_aware if nested_aware is None
                              else nested_aware),
                max_candidates=_RELAXED_CAP, strategy='depth-first')
        except (exception.ResourceClassNotFound, exception.TraitNotFound):
            return {}
        return _used_by_group(cands)


def explain(engine, groups, wide, names=(), sample=10):
    """The explanation (a JSON-able dict) of the query ``groups`` /
    ``wide`` (lib_query.RequestGroup by suffix, lib_query.RequestWide).

    ``names``: providers (uuid or name) to explain whatever their fate;
    ``sample``: how many others to explain. Raises what engine.find
    raises for a name that does not exist.
    """
    with engine_mod.snapshot(engine.ctx) as (world, conn):
        engine.world, engine.conn = world, conn
        try:
            view = reasons.View(engine.ctx, conn, world, groups)
            return _explain(engine, view, groups, wide, names, sample)
        finally:
            engine.world = engine.conn = None


def _explain(engine, view, groups, wide, names, sample):
    real = engine.real(groups, wide)
    cands = real[0]
    judge = reasons.Judge(view, wide)
    egroups = names_mod.leniently(engine.ctx, groups, view.agg_ids,
                                  view.tree_root_of)
    rps = view.rps
    ids = sorted(rps)

    # Per-group steps.
    verdicts = {}                   # suffix -> {rp: (key, text) | None}
    group_out = []
    for g in egroups:
        per = {rp: judge.judge(g, rps[rp]) for rp in ids}
        verdicts[g.suffix] = per
        removed = collections.Counter(v[0] for v in per.values() if v)
        steps = []
        left = len(ids)
        for key, label, applies in rules.FILTERS:
            if key not in removed and not applies(g.rg, wide):
                continue
            steps.append({'step': key, 'label': label, 'in': left,
                          'removed': removed[key],
                          'kept': left - removed[key]})
            left -= removed[key]
        group_out.append({'group': g.suffix, 'name': reasons.group_name(g),
                          'request': suggestions.describe(g.rg), 'steps': steps,
                          'kept': left})
    survivors = {s: {rp for rp, v in per.items() if v is None}
                 for s, per in verdicts.items()}
    union = set().union(*survivors.values()) if survivors else set()

    used_by_group = _used_by_group(cands)
    kept = _flat_used(used_by_group)

    # Combination: what each relaxation brings back.
    comb_reason = {}                # rp -> (key, text)
    pending = union - kept
    seen = set(kept)
    if pending:
        later = _relaxations(engine, groups, wide, real[2])
        for key, run in later:
            if not pending:
                break
            back = _flat_used(run()) & pending
            for rp in sorted(back):
                comb_reason[rp] = (key, _COMB_TEXT[key])
            pending -= back
            seen |= back
        pairing = _Pairing(judge, egroups, survivors)
        for rp in sorted(pending):
            comb_reason[rp] = pairing.why(rps[rp])
    comb_removed = collections.Counter(v[0] for v in comb_reason.values())
    comb_steps = []
    left = len(union)
    for key, label in COMBINATION:
        if comb_removed[key] or _comb_applies(key, wide, engine, real[2]):
            comb_steps.append({'step': key, 'label': label, 'in': left,
                               'removed': comb_removed[key],
                               'kept': left - comb_removed[key]})
            left -= comb_removed[key]

    # Every provider's first reason.
    why = {}
    for rp in ids:
        if rp in kept:
            continue
        if rp in comb_reason:
            key, text = comb_reason[rp]
            why[rp] = (key, None, text)
            continue
        best = None
        for g in egroups:
            key, text = verdicts[g.suffix][rp]
            if best is None or _order_key(key) > _order_key(best[0]):
                best = (key, g.suffix, text)
        why[rp] = best
    counts = collections.Counter(r[0] for r in why.values())

    explained = _pick(view, names, why, kept, sample)
    out_providers = []
    for rp, asked in explained:
        if rp is None:
            out_providers.append({'provider': asked, 'uuid': None,
                                  'name': None, 'kept': False,
                                  'step': None, 'group': None,
                                  'reason': '%s: no such provider' % asked,
                                  'groups': {}})
            continue
        label = view.label(rp)
        entry = {'provider': label, 'uuid': rps[rp].uuid,
                 'name': view.name.get(rp), 'kept': rp in kept}
        if rp in kept:
            entry.update(step=None, group=None, reason='%s: kept' % label)
        else:
            key, suffix, text = why[rp]
            entry.update(step=key, group=suffix,
                         reason='%s: %s' % (label, text))
        entry['groups'] = {
            g.suffix: (None if verdicts[g.suffix][rp] is None else
                       {'step': verdicts[g.suffix][rp][0],
                        'reason': verdicts[g.suffix][rp][1]})
            for g in egroups}
        entry['used_for'] = sorted(s for s, rps in used_by_group.items()
                                   if rp in rps)
        out_providers.append(entry)

    body = {
        'candidates': len(cands),
        'providers': {'total': len(ids), 'kept': len(kept),
                      'excluded': len(ids) - len(kept)},
        'groups': group_out,
        'combination': {'in': len(union), 'steps': comb_steps,
                        'kept': left},
        'reasons': dict(sorted(counts.items(),
                               key=lambda kv: _order_key(kv[0]))),
        'explained': out_providers,
        'not_shown': len(ids) - sum(1 for rp, _ in explained
                                    if rp is not None),
        'suggestions': [],
    }
    if not cands:
        body['suggestions'] = suggestions.suggestions(
            lambda g2, w2: _flat_used(engine.relaxed(g2, w2)), groups, wide,
            egroups, judge, verdicts)
    return body


def _order_key(key):
    if key in reasons.STEP_INDEX:
        return reasons.STEP_INDEX[key]
    return len(reasons.STEPS) + [k for k, _ in COMBINATION].index(key)


def _comb_applies(key, wide, engine, has_trees):
    return {
        'limit': wide.limit is not None or (
            engine.max_candidates is not None and
            engine.max_candidates >= 0),
        'isolate': wide.group_policy == 'isolate',
        'same_subtree': bool(wide.same_subtrees),
        'one_per_tree': not engine.nested_aware and has_trees,
        'tree': False, 'sharing': False, 'together': False,
    }[key]


_COMB_TEXT = {
    'limit': 'passes every filter, but the answer was cut by limit (or '
             'max_allocation_candidates) before it',
    'isolate': 'passes every filter, but group_policy=isolate keeps the '
               'numbered groups on distinct providers and no such '
               'combination uses it',
    'same_subtree': 'passes every filter, but no combination using it '
                    'keeps the same_subtree groups below one provider',
    'one_per_tree': 'passes every filter, but before microversion 1.29 a '
                    'candidate may use only one provider of a tree',
}


def _relaxations(engine, groups, wide, has_trees):
    """(key, run) in attribution order; each run relaxes one rule more
    than the previous."""
    steps = []
    cur = copy.copy(wide)
    if _comb_applies('limit', wide, engine, has_trees):
        steps.append(('limit', cur))
    if wide.group_policy == 'isolate':
        cur = copy.copy(cur)
        cur.group_policy = 'none'
        steps.append(('isolate', cur))
    if wide.same_subtrees:
        cur = copy.copy(cur)
        cur.same_subtrees = []
        steps.append(('same_subtree', cur))
    out = [(key, (lambda w=w: engine.relaxed(groups, w)))
           for key, w in steps]
    if not engine.nested_aware and has_trees:
        out.append(('one_per_tree', lambda w=cur: engine.relaxed(
            groups, w, nested_aware=True)))
    return out


class _Pairing:
    """Which groups the survivors under each anchor root cannot serve
    (computed once per anchor)."""

    def __init__(self, judge, egroups, survivors):
        self.judge = judge
        self.egroups = egroups
        self.survivors = survivors
        self.view = view = judge.view
        rps = view.rps
        tree_aggs = {root: frozenset().union(*(rps[i].aggs for i in ids))
                     for root, ids in view.world.trees.items()}
        # Sharing provider -> the roots it can serve (the engines'
        # anchors).
        self.anchors_of = {
            sp: {root for root, aggs in tree_aggs.items()
                 if aggregate_rules.shares_via_aggregate(rps[sp].aggs, aggs)}
            for sp in view.sharing}
        self.sharing_at = collections.defaultdict(set)
        for sp, roots in self.anchors_of.items():
            for root in roots:
                self.sharing_at[root].add(sp)
        self._missing = {}

    def missing(self, anchor):
        """What no survivor under ``anchor`` serves, as phrases."""
        if anchor in self._missing:
            return self._missing[anchor]
        out = []
        near = self.view.by_root.get(anchor, set()) | self.sharing_at[anchor]
        for g in self.egroups:
            members = near & self.survivors[g.suffix]
            if not g.numbered and g.resources:
                lacks = [rc for rc, amt in g.resources
                         if not any(_serves(self.judge, g, self.view.rps[rp],
                                            rc, amt) for rp in members)]
                if lacks:
                    out.append('%s for the %s' % (', '.join(lacks),
                                                  reasons.group_name(g)))
            elif not members:
                out.append('the %s' % reasons.group_name(g))
        self._missing[anchor] = out
        return out

    def why(self, rec):
        """Why a provider that passes a group's filters is in no
        candidate, even with every combination rule relaxed."""
        label = self.view.label
        anchors = {rec.root} | self.anchors_of.get(rec.id, set())
        own = self.missing(rec.root)
        if rec.id in self.anchors_of and all(
                self.missing(a) for a in anchors):
            others = sorted(a for a in anchors if a != rec.root)
            if not others:
                return ('sharing', 'sharing provider, but no other tree is '
                        'in an aggregate with it')
            return ('sharing', 'sharing provider, but none of the %d '
                    'trees it shares an aggregate with can serve the '
                    'rest: %s' % (len(others), '; '.join(
                        '%s lacks %s' % (label(a),
                                         ', '.join(self.missing(a)))
                        for a in others[:3])))
        if own and all(self.missing(a) for a in anchors):
            return ('tree', 'nothing in its tree (root %s) or sharing with '
                    'it can serve %s' % (label(rec.root), ', '.join(own)))
        return ('together', 'passes its filters, but no pick of providers '
                'with it fits together (amounts summed over groups on one '
                'provider, the unnumbered group\'s required traits held by '
                'the providers picked, a sharing provider\'s tree rules)')


def _serves(judge, g, rec, rc, amount):
    """``rec`` can serve ``amount`` of class name ``rc`` on its own."""
    inv = judge.inventory(g, rec, rc)
    return inv is not None and rules.serves(inv, amount)


def _pick(view, names, why, kept, sample):
    """[(provider id or None, asked name)]: the named providers, then up
    to ``sample`` others, taking reasons in turn so that each kind shows
    (kept providers last)."""
    by_uuid = {rec.uuid.lower(): rid for rid, rec in view.rps.items()}
    by_name = {}
    for rid in sorted(view.rps):
        if view.name.get(rid) is not None:
            by_name.setdefault(view.name[rid], rid)
    out = []
    chosen = set()
    for asked in names:
        rp = by_uuid.get(asked.lower(), by_name.get(asked))
        if rp in chosen:
            continue
        if rp is not None:
            chosen.add(rp)
        out.append((rp, asked))
    by_reason = collections.defaultdict(list)
    for rp in sorted(why):
        if rp not in chosen:
            by_reason[why[rp][0]].append(rp)
    queues = [collections.deque(by_reason[k])
              for k in sorted(by_reason, key=_order_key)]
    queues.append(collections.deque(sorted(kept - chosen)))
    taken = 0
    while taken < sample and any(queues):
        for q in queues:
            if q and taken < sample:
                out.append((q.popleft(), None))
                taken += 1
    return out
