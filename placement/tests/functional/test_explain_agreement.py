"""The explanation agrees with the answer it explains, on random worlds.

For random worlds and queries (the differential test's generators, with a
random limit added now and then), GET /ops/explain/allocation_candidates
must agree with our own GET /allocation_candidates, both in-process over
the same database:

* bad input: the same status and error body;
* the providers marked kept are exactly those the answer uses
  (allocations and mappings), and the candidate count is the answer's;
* each provider the answer maps to a group passed that group's steps;
* every other provider has a reason, and the counts add up: per group
  step, through the combination steps, and over all providers;
* a combination rule is blamed only when the query (or microversion)
  has it.

The database is SQLite unless ``PLACEMENT_TEST_DB_URL`` names a server;
``PLACEMENT_EXPLAIN_WORLDS`` sets how many worlds (default 30, ten
queries each).
"""
import importlib.machinery
import importlib.util
import json
import os
import random

import webob

from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidates_differential as diff

WORLDS = int(os.environ.get('PLACEMENT_EXPLAIN_WORLDS', '30'))
QUERIES_PER_WORLD = 10
SEED = int(os.environ.get('PLACEMENT_EXPLAIN_SEED', '20261124'))
EVERYONE = '&explain_sample=100000'


def _get(app, path, version):
    req = webob.Request.blank(path, headers={
        'x-auth-token': 'admin', 'accept': 'application/json',
        'openstack-api-version': 'placement %s' % version})
    resp = req.get_response(app)
    return resp.status_int, json.loads(resp.body)


def _errors(body):
    return [{k: v for k, v in e.items() if k != 'request_id'}
            for e in body['errors']]


def _answer_uses(body):
    """(every provider uuid used, {suffix: uuids mapped}, or None when
    the microversion has no mappings)."""
    used = set()
    mapped = {}
    has_mappings = False
    for ar in body['allocation_requests']:
        allocs = ar['allocations']
        if isinstance(allocs, list):
            used.update(a['resource_provider']['uuid'] for a in allocs)
        else:
            used.update(allocs)
        if 'mappings' in ar:
            has_mappings = True
            for suffix, uuids in ar['mappings'].items():
                used.update(uuids)
                mapped.setdefault(suffix, set()).update(uuids)
    return used, (mapped if has_mappings else None)


def disagreements(answer, explained, path, version):
    """What is wrong with ``explained`` (status, body) as an explanation
    of ``answer`` (status, body); [] when they agree."""
    (status, body), (estatus, ebody) = answer, explained
    if status != 200 or estatus != 200:
        if status != estatus or _errors(body) != _errors(ebody):
            return ['errors differ: %s %s / %s %s'
                    % (status, body, estatus, ebody)]
        return []
    wrong = []
    used, mapped = _answer_uses(body)
    provs = ebody['explained']
    by_uuid = {p['uuid']: p for p in provs}
    kept = {p['uuid'] for p in provs if p['kept']}
    total = ebody['providers']['total']
    if ebody['not_shown'] != 0 or len(provs) != total:
        return ['not every provider explained']
    if kept != used:
        wrong.append('kept %s, answer uses %s' % (sorted(kept),
                                                   sorted(used)))
    if ebody['candidates'] != len(body['allocation_requests']):
        wrong.append('candidates %s, answer has %s' % (
            ebody['candidates'], len(body['allocation_requests'])))
    if ebody['providers']['kept'] != len(used):
        wrong.append('kept count %s' % ebody['providers']['kept'])
    for p in provs:
        if not p['kept'] and not (p['reason'] and p['step']):
            wrong.append('no reason for %s' % p['provider'])
    # Each provider the answer uses for a group passed that group.
    if mapped is not None:
        for suffix, uuids in mapped.items():
            for u in uuids:
                if by_uuid[u]['groups'].get(suffix) is not None:
                    wrong.append('%s used for group %r but excluded: %s'
                                 % (by_uuid[u]['provider'], suffix,
                                    by_uuid[u]['groups'][suffix]))
    else:
        for u in used:
            if all(v is not None for v in by_uuid[u]['groups'].values()):
                wrong.append('%s used but excluded by every group'
                             % by_uuid[u]['provider'])
    # Counts add up.
    reasons = ebody['reasons']
    if sum(reasons.values()) + len(kept) != total:
        wrong.append('reasons %s + kept %d != %d' % (reasons, len(kept),
                                                     total))
    steps_seen = {}
    for p in provs:
        if not p['kept']:
            steps_seen[p['step']] = steps_seen.get(p['step'], 0) + 1
    if steps_seen != reasons:
        wrong.append('reason counts %s, providers say %s'
                     % (reasons, steps_seen))
    passing = {p['uuid'] for p in provs
               if any(v is None for v in p['groups'].values())}
    for g in ebody['groups']:
        left = total
        for step in g['steps']:
            if step['in'] != left or step['kept'] != left - step['removed']:
                wrong.append('group %r step %s does not add up'
                             % (g['group'], step['step']))
            left = step['kept']
        passed = {p['uuid'] for p in provs
                  if p['groups'][g['group']] is None}
        if left != g['kept'] or len(passed) != left:
            wrong.append('group %r keeps %s, %d passed'
                         % (g['group'], g['kept'], len(passed)))
    comb = ebody['combination']
    left = comb['in']
    if left != len(passing):
        wrong.append('combination in %d, %d passed a group'
                     % (left, len(passing)))
    for step in comb['steps']:
        if step['in'] != left:
            wrong.append('combination step %s in' % step['step'])
        left -= step['removed']
    if left != comb['kept'] or left != len(kept):
        wrong.append('combination keeps %d of %d' % (left, len(kept)))
    # Rules blamed only when asked for.
    qs = path.split('?', 1)[1]
    minor = int(version.split('.')[1])
    present = {
        'limit': 'limit=' in qs,
        'isolate': 'group_policy=isolate' in qs,
        'same_subtree': 'same_subtree=' in qs,
        'one_per_tree': minor < 29,
    }
    for key, asked in present.items():
        if reasons.get(key) and not asked:
            wrong.append('blames %s, not in the query' % key)
    return wrong


def _with_limit(rnd, path, version):
    if int(version.split('.')[1]) >= 16 and rnd.random() < 0.25:
        path += '&limit=%d' % rnd.randint(1, 3)
    return path


def _check_worlds(rnd, worlds, make_world):
    checked = 0
    failures = []
    for wi in range(worlds):
        world = make_world(rnd)
        with gabbits.app_over_world(world) as app:
            for _ in range(QUERIES_PER_WORLD):
                path, version = diff.random_query(rnd, world)
                path = _with_limit(rnd, path, version)
                answer = _get(app, path, version)
                explained = _get(app, '/ops/explain' + path + EVERYONE,
                                 version)
                wrong = disagreements(answer, explained, path, version)
                checked += 1
                if wrong:
                    failures.append((wi, path, version, wrong[:3]))
    report = '\n'.join('world %d %s @%s: %s' % f for f in failures[:5])
    assert not failures, '%d/%d disagree:\n%s' % (len(failures), checked,
                                                  report)
    print('explain agreement: %d queries over %d worlds' % (checked, worlds))
    return checked


def test_explanations_agree_on_random_worlds():
    _check_worlds(random.Random(SEED), WORLDS, diff.random_world)


def test_explanations_agree_on_flat_worlds():
    _check_worlds(random.Random(SEED + 1), max(WORLDS // 3, 5),
                  lambda rnd: diff.random_world(rnd, flat=True))


def _bench_tool():
    """tools/bench-candidates-http as a module (its perfload world)."""
    path = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                        'tools', 'bench-candidates-http')
    loader = importlib.machinery.SourceFileLoader('bench_candidates_http',
                                                  path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_perfload_explanation():
    """Explaining nova's perfload query over 1,000 providers: the counts
    of the real answer and a reason for every other provider. (Its time
    is measured by tools/bench-explain, not here.)"""
    bench = _bench_tool()
    with gabbits.app_over_world(bench.perfload_world(1000)) as app:
        status, body = _get(app, '/ops/explain' + bench.PERFLOAD_QUERY,
                            '1.39')
    assert status == 200
    assert body['candidates'] == 167
    assert body['reasons'] == {'required': 666, 'member_of': 167}


def test_a_wrong_explanation_is_caught():
    """The checker itself: an explanation claiming a used provider was
    excluded, or with counts that do not add up, is reported."""
    rnd = random.Random(SEED + 2)
    for _ in range(50):
        world = diff.random_world(rnd)
        with gabbits.app_over_world(world) as app:
            for _ in range(QUERIES_PER_WORLD):
                path, version = diff.random_query(rnd, world)
                answer = _get(app, path, version)
                if answer[0] != 200 or not answer[1]['allocation_requests']:
                    continue
                status, ebody = _get(app, '/ops/explain' + path + EVERYONE,
                                     version)
                assert not disagreements(answer, (status, ebody), path,
                                         version)
                kept = next(p for p in ebody['explained'] if p['kept'])
                kept.update(kept=False, step='capacity', reason='x')
                for suffix in kept['groups']:
                    kept['groups'][suffix] = {'step': 'capacity'}
                assert disagreements(answer, (status, ebody), path, version)
                return
    raise AssertionError('no world gave candidates')
