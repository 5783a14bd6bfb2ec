"""The queries of the freshness check (freshness.py): a random GET
/allocation_candidates over what the database holds, mostly about what
the last write touched (Focus); answers normalised where the API leaves
the order open, and their differences shown.
"""
import json

from placement.tests.functional.freshness_writes import AGGS
from placement.tests.functional.freshness_writes import CUSTOM_RCS
from placement.tests.functional.freshness_writes import LATEST
from placement.tests.functional.freshness_writes import mv
from placement.tests.functional.freshness_writes import seeded_uuid
from placement.tests.functional.freshness_writes import STANDARD_TRAITS


# -- queries -----------------------------------------------------------------

class Focus:
    """What a write touched: provider uuids (those it wrote and those a
    consumer it wrote had allocations on), aggregate uuids, trait and
    class names. A query about them right after the write shows a stale
    world sooner than one about anything (a later write to the same
    provider may mend it before a random query comes by)."""

    def __init__(self):
        self.rps, self.aggs = set(), set()
        self.traits, self.classes = set(), set()

    def __bool__(self):
        return bool(self.rps or self.aggs or self.traits or self.classes)

    def note(self, value, snap):
        """Sort a name or uuid seen in a write into its kind."""
        if not isinstance(value, str):
            return
        if value in snap.rp_by_uuid:
            self.rps.add(value)
        elif value in snap.allocs:
            self.rps.update(snap.rps[rp].uuid
                            for rp, _rc in snap.allocs[value]
                            if rp in snap.rps)
        elif value in AGGS or value in snap.agg_ids:
            self.aggs.add(value)
        elif value in snap.rc_ids or value in CUSTOM_RCS:
            self.classes.add(value)
        elif value.startswith('CUSTOM_') or value in STANDARD_TRAITS:
            self.traits.add(value)

    def note_all(self, data, snap):
        if isinstance(data, dict):
            for k, v in data.items():
                self.note(k, snap)
                self.note_all(v, snap)
        elif isinstance(data, list):
            for v in data:
                self.note_all(v, snap)
        else:
            self.note(data, snap)


def focus_of(w, snap):
    """The Focus of write ``w`` (``snap``: the database before it)."""
    f = Focus()
    if w.act is not None or (w.sql is None and w.manage is not None):
        return f
    if w.sql is None:
        for part in w.path.split('/'):
            f.note(part, snap)
        f.note_all(w.body, snap)
    else:
        for text, params in w.sql:
            _note_emptied(f, text, snap)
            for key, value in (params or {}).items():
                if key in ('rp', 'to', 'id', 'p') or (
                        key == 'v' and 'resource_provider_id = :v' in text):
                    if value in snap.rps:
                        f.rps.add(snap.rps[value].uuid)
                elif key == 't' or (key == 'v' and 'trait_id' in text):
                    f.note(snap.trait_names.get(value), snap)
                elif key == 'a' or (key == 'v' and 'aggregate_id' in text):
                    f.note(snap.agg_uuids.get(value), snap)
                else:
                    f.note(value, snap)
    # A provider's old place: its parent's tree.
    for u in list(f.rps):
        rp = snap.rps[snap.rp_by_uuid[u]]
        if rp.parent_provider_id in snap.rps:
            f.rps.add(snap.rps[rp.parent_provider_id].uuid)
    return f


def _note_emptied(f, text, snap):
    """A table emptied (TRUNCATE, or DELETE with no WHERE): everything it
    held."""
    words = text.split()
    if words[0] == 'TRUNCATE' or (words[0] == 'DELETE' and
                                  'WHERE' not in words):
        table = words[-1]
        rows = {'allocations': snap.used, 'inventories': snap.inv}.get(table)
        if rows is not None:
            f.rps.update(snap.rps[rp].uuid for rp, _rc in rows
                         if rp in snap.rps)
        elif table == 'resource_provider_traits':
            for ids in snap.rp_traits.values():
                f.traits.update(snap.trait_names.get(t) for t in ids)
            f.traits.discard(None)
        elif table == 'resource_provider_aggregates':
            for ids in snap.rp_aggs.values():
                f.aggs.update(snap.agg_uuids[a] for a in ids)


def random_query(rnd, snap, focus=None):
    """(path, version) of a random GET /allocation_candidates over what
    the database holds now: resources (often small, so that most providers
    show up with their usage; sometimes beyond any capacity or naming a
    class that does not exist), traits, aggregates, in_tree,
    root_required, numbered groups, same_subtree and limit, each at the
    microversions that have it. With a ``focus`` (a Focus), mostly about
    what it names."""
    if focus and rnd.random() < 0.6:
        query = _focused_query(rnd, snap, focus)
        if query:
            return query
    minor = rnd.choice([LATEST, LATEST, 36, rnd.randint(10, LATEST)])
    held = sorted({snap.rc_names[rc] for _, rc in snap.inv}) or ['VCPU']
    classes = held + (snap.custom_rcs() if rnd.random() < 0.1 else [])
    if rnd.random() < 0.04:
        classes = classes + ['CUSTOM_NONE']

    def amount(name):
        rc = snap.rc_ids.get(name)
        rows = [r for (_, c), r in snap.inv.items() if c == rc]
        if not rows or rnd.random() < 0.1:
            return rnd.choice([1, 2, 10000])
        row = rnd.choice(rows)
        base = max(row.min_unit, row.step_size)
        return base * rnd.choice([1, 1, 1, 2]) if base <= row.max_unit \
            else base

    def resources(n):
        names = rnd.sample(classes, min(n, len(classes)))
        return ','.join('%s:%d' % (n, amount(n)) for n in names)

    traits = sorted(snap.trait_names.values()) or STANDARD_TRAITS
    if rnd.random() < 0.04:
        traits = traits + ['CUSTOM_NONE']

    def trait_value():
        picks = rnd.sample(traits, min(len(traits), rnd.randint(1, 2)))
        if minor >= 39 and len(picks) > 1 and rnd.random() < 0.3:
            return 'in:' + ','.join(picks)
        if minor >= 22:
            picks = [('!' if rnd.random() < 0.3 else '') + t for t in picks]
        return ','.join(picks)

    aggs = AGGS + [seeded_uuid(rnd)]

    def member_of():
        if minor >= 32 and rnd.random() < 0.25:
            return '!' + rnd.choice(aggs)
        if rnd.random() < 0.5:
            return 'in:' + ','.join(rnd.sample(aggs, 2))
        return rnd.choice(aggs)

    params = []
    if rnd.random() < 0.45:
        # A wide query: every provider of a class, with its usage and
        # traits; or those of some aggregates (which no summary shows).
        params.append(('resources', resources(rnd.choice([1, 1, 2]))))
        if minor >= 21 and rnd.random() < 0.3:
            params.append(('member_of', member_of()))
    else:
        numbered = rnd.choice([0, 0, 1, 2, 3]) if minor >= 25 else 0
        names = []
        for i in range(numbered):
            if minor >= 33 and rnd.random() < 0.3:
                names.append(rnd.choice(['_NUMA', '_ACCEL', '_X']) + str(i))
            else:
                names.append(str(i + 1))
        groups = ([''] if not numbered or rnd.random() < 0.6 else []) + names
        resourceless = set()
        if minor >= 36 and len(names) > 1 and rnd.random() < 0.3:
            resourceless.add(rnd.choice(names))
        for s in groups:
            if s not in resourceless:
                params.append(('resources' + s,
                               resources(rnd.choice([1, 1, 2, 3]))))
            if minor >= 17 and (rnd.random() < 0.3 or s in resourceless):
                params.append(('required' + s, trait_value()))
            if minor >= 21 and rnd.random() < 0.4:
                params.append(('member_of' + s, member_of()))
                if minor >= 24 and rnd.random() < 0.2:
                    params.append(('member_of' + s, member_of()))
            if minor >= 31 and rnd.random() < 0.1 and snap.rps:
                params.append(('in_tree' + s, snap.rps[rnd.choice(
                    sorted(snap.rps))].uuid if rnd.random() < 0.9
                    else rnd.choice(aggs)))
        if len(names) > 1 or (names and rnd.random() < 0.3):
            if rnd.random() < 0.97:
                params.append(('group_policy',
                               rnd.choice(['none', 'isolate'])))
        if minor >= 35 and rnd.random() < 0.15:
            params.append(('root_required', trait_value()))
        if minor >= 36 and len(names) > 1 and (resourceless or
                                               rnd.random() < 0.3):
            params.append(('same_subtree', ','.join(
                rnd.sample(names, rnd.randint(2, len(names))))))
    if minor >= 16 and rnd.random() < 0.3:
        params.append(('limit', rnd.choice([1, 2, 3, 5])))
    return ('/allocation_candidates?' + '&'.join('%s=%s' % kv
                                                 for kv in params),
            mv(minor))


def _focused_query(rnd, snap, focus):
    """A query about one provider the write touched (mostly the classes
    it holds itself, so that its own traits and aggregates count; else
    its tree's; the provider as in_tree), as the unnumbered group or a
    numbered one, and the aggregates, traits and classes the write
    named; None when none of them is left."""
    minor = rnd.choice([LATEST, rnd.randint(29, LATEST),
                        rnd.randint(10, LATEST)])
    rps = {snap.rp_by_uuid[u] for u in focus.rps if u in snap.rp_by_uuid}
    # Else those holding the traits or in the aggregates it named (a
    # trait renamed by hand, say).
    trait_ids = {i for i, n in snap.trait_names.items() if n in focus.traits}
    agg_ids = {snap.agg_ids[u] for u in focus.aggs if u in snap.agg_ids}
    rps = sorted(rps or {r for r in snap.rps if snap.rp_traits[r] & trait_ids
                         or snap.rp_aggs[r] & agg_ids})
    held = {}                           # class name -> a provider's row
    if rps:
        rp = rnd.choice(rps)
        root = snap.rps[rp].root_provider_id or rp
        tree = set(snap.subtree(root)) | {rp}
        for mine in ({rp} if rnd.random() < 0.7 else tree, tree):
            held = {snap.rc_names[c]: row for (r, c), row in
                    sorted(snap.inv.items()) if r in mine}
            if held:
                break
    named = {n: row for (r, c), row in sorted(snap.inv.items())
             for n in [snap.rc_names[c]] if n in focus.classes}
    held.update(named if rnd.random() < 0.7 else {})
    if not held:
        return None
    suffix = '1' if minor >= 25 and rnd.random() < 0.3 else ''
    names = rnd.sample(sorted(held), min(len(held), rnd.choice([1, 1, 2])))
    params = [('resources' + suffix, ','.join(
        '%s:%d' % (n, max(held[n].min_unit, held[n].step_size))
        for n in names))]
    if rps and minor >= 31 and rnd.random() < 0.3:
        params.append(('in_tree' + suffix, snap.rps[rp].uuid))
    if focus.aggs and minor >= 21 and rnd.random() < 0.6:
        agg = rnd.choice(sorted(focus.aggs))
        params.append(('member_of' + suffix, '!' + agg if minor >= 32 and
                       rnd.random() < 0.3 else agg))
    if focus.traits and minor >= 17 and rnd.random() < 0.4:
        trait = rnd.choice(sorted(focus.traits))
        params.append(('required' + suffix, '!' + trait if minor >= 22 and
                       rnd.random() < 0.3 else trait))
    return ('/allocation_candidates?' + '&'.join('%s=%s' % kv
                                                 for kv in params),
            mv(minor))


def normalize(answer):
    """An answer with the orders the API leaves undefined sorted, and
    error request ids dropped."""
    status, body = answer['status'], answer['body']
    if status != 200 or not isinstance(body, dict):
        if isinstance(body, dict):
            body = {'errors': [{k: v for k, v in e.items()
                                if k != 'request_id'}
                               for e in body.get('errors', [])]}
        return {'status': status, 'body': body}
    areqs = []
    for ar in body.get('allocation_requests', []):
        ar = dict(ar)
        if isinstance(ar.get('allocations'), list):
            ar['allocations'] = sorted(ar['allocations'],
                                       key=lambda a: json.dumps(
                                           a, sort_keys=True))
        if 'mappings' in ar:
            ar['mappings'] = {k: sorted(v)
                              for k, v in ar['mappings'].items()}
        areqs.append(ar)
    areqs.sort(key=lambda a: json.dumps(a, sort_keys=True))
    sums = {}
    for rp, s in body.get('provider_summaries', {}).items():
        s = dict(s)
        if 'traits' in s:
            s['traits'] = sorted(s['traits'])
        sums[rp] = s
    return {'status': status, 'body': {'allocation_requests': areqs,
                                       'provider_summaries': sums}}


def diff(expected, got, names=None):
    """What differs between SQL's answer and a world's: each provider's
    summary, and the allocation requests only one of them gives
    (providers named after ``names``, {uuid: name})."""
    names = names or {}

    def text(value, limit=1500):
        out = json.dumps(value, sort_keys=True)
        for u, name in names.items():
            out = out.replace(u, '%s(%s)' % (name, u[:8]))
        return out if len(out) <= limit else out[:limit] + '...'

    if expected['status'] != 200 or got['status'] != 200:
        return '  sql:   %s\n  world: %s' % (text(expected), text(got))
    lines = []
    sums = expected['body']['provider_summaries'], got['body'][
        'provider_summaries']
    for u in sorted(set(sums[0]) | set(sums[1])):
        if sums[0].get(u) != sums[1].get(u):
            lines.append('  summary of %s(%s):\n    sql:   %s\n    world: %s'
                         % (names.get(u, ''), u, text(sums[0].get(u)),
                            text(sums[1].get(u))))
    areqs = [{json.dumps(a, sort_keys=True) for a in answer['body'][
        'allocation_requests']} for answer in (expected, got)]
    for title, only in (('only SQL gives', areqs[0] - areqs[1]),
                        ('only the world gives', areqs[1] - areqs[0])):
        if only:
            lines.append('  %d allocation requests %s, e.g. %s' % (
                len(only), title, text(json.loads(min(only)))))
    return '\n'.join(lines)
