"""GET /allocation_candidates, ours against upstream 16.0.0, on random worlds.

Each world is written once into a fresh database of the kind under test
(SQLite unless ``PLACEMENT_TEST_DB_URL`` names a server) whose schema
upstream's own migrations created; our app and upstream's (in
``.upstream-venv/``, in a subprocess running ``upstream_runner.py``) then
answer the same random queries over the same database, and the answers must
match: the same status, the same error text, the same *set* of allocation
requests (upstream's order is undefined) and the same provider summaries.

Upstream's venv is built by a module fixture calling
``tools/bootstrap-upstream-venv`` (see ``upstream_venv``): a fixture rather
than a step of ``tools/run-tests`` so a direct pytest run builds it too;
once built, the call costs a stamp check. ``.ci/run`` builds it before the
timed suites. If it cannot be built the tests fail under ``CI=true`` and
are skipped, with the reason, elsewhere. The default run is short; the
full one is::

    PLACEMENT_DIFF_CASES=1000 .venv/bin/python -m pytest -q \
        placement/tests/functional/test_candidates_differential.py
"""
import ast
import contextlib
import json
import os
import random
import subprocess

import pytest
import webob

from placement.db import api as db_api
from placement.db import migration
from placement import deploy
from placement.tests import db as test_db
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import upstream_venv

UPSTREAM_PY = upstream_venv.executable('upstream')
RUNNER = os.path.join(os.path.dirname(__file__), 'upstream_runner.py')
CASES = int(os.environ.get('PLACEMENT_DIFF_CASES', '60'))
QUERIES_PER_WORLD = 10
SEED = int(os.environ.get('PLACEMENT_DIFF_SEED', '20240601'))

AGGS = ['aaaaaaaa-0000-0000-0000-00000000000%d' % i for i in range(3)]
TRAITS = ['CUSTOM_A', 'CUSTOM_B', 'HW_CPU_X86_AVX']
RCS = ['VCPU', 'MEMORY_MB', 'DISK_GB', 'CUSTOM_X']


@pytest.fixture(scope='module', autouse=True)
def _upstream_built():
    upstream_venv.require('upstream')


def random_world(rnd, flat=False, sharing=True):
    """Random trees, sharing providers, inventories, usages, traits and
    aggregates. ``flat``: more roots, no child, no sharing provider;
    ``sharing`` False: no sharing provider (the shapes of the world's fast
    path, see search._sole)."""
    w = cw.WorldBuilder()
    names = []
    for r in range(rnd.randint(2, 10) if flat else rnd.randint(1, 4)):
        root = 'cn%d' % r
        w.provider(root)
        names.append(root)
        for c in range(0 if flat else rnd.choice([0, 0, 1, 2, 3])):
            child = '%s_c%d' % (root, c)
            w.provider(child, parent=root)
            names.append(child)
            if rnd.random() < 0.3:
                grand = child + '_g'
                w.provider(grand, parent=child)
                names.append(grand)
    for _ in range(0 if flat or not sharing else rnd.choice([0, 0, 1, 2])):
        ss = 'ss%d' % len(w.rps)
        w.provider(ss)
        w.trait(ss, cw.SHARES)
        w.aggregate(ss, rnd.choice(AGGS))
        names.append(ss)
    for name in names:
        for rc in RCS:
            if rnd.random() < 0.45:
                total = rnd.randint(1, 8)
                w.inventory(name, rc, total,
                            reserved=rnd.choice([0, 0, 1]),
                            max_unit=rnd.choice([None, None, 2]),
                            allocation_ratio=rnd.choice([1.0, 1.0, 1.5]))
                if rnd.random() < 0.3:
                    w.usage(name, rc, rnd.randint(1, total))
        for t in TRAITS:
            if rnd.random() < 0.3:
                w.trait(name, t)
        for a in AGGS:
            if rnd.random() < 0.25:
                w.aggregate(name, a)
    return w


def _traits_value(rnd, allow_any):
    parts = []
    for t in rnd.sample(TRAITS, rnd.randint(1, 2)):
        parts.append(('!' if rnd.random() < 0.3 else '') + t)
    if allow_any and rnd.random() < 0.2:
        return 'in:' + ','.join(rnd.sample(TRAITS, 2))
    if all(p.startswith('!') for p in parts) or len(
            {p.lstrip('!') for p in parts}) < len(parts):
        parts = [parts[0].lstrip('!')]
    return ','.join(parts)


def random_query(rnd, world):
    version = rnd.choice(['1.39', '1.39', '1.39', '1.36', '1.33', '1.29',
                          '1.25', '1.17', '1.12', '1.10'])
    minor = int(version.split('.')[1])
    params = []
    n_numbered = rnd.choice([0, 0, 1, 2]) if minor >= 25 else 0
    use_unnumbered = n_numbered == 0 or rnd.random() < 0.6

    def res():
        return ','.join('%s:%d' % (rc, rnd.randint(1, 3))
                        for rc in rnd.sample(RCS, rnd.randint(1, 2)))

    groups = ([''] if use_unnumbered else []) + [
        str(i + 1) for i in range(n_numbered)]
    for s in groups:
        params.append(('resources' + s, res()))
        if minor >= 17 and rnd.random() < 0.35:
            params.append(('required' + s, _traits_value(rnd, minor >= 39)))
        if minor >= 21 and rnd.random() < 0.3:
            if minor >= 32 and rnd.random() < 0.3:
                params.append(('member_of' + s, '!' + rnd.choice(AGGS)))
            else:
                params.append(('member_of' + s,
                               'in:' + ','.join(rnd.sample(AGGS, 2))))
        if minor >= 31 and rnd.random() < 0.1:
            params.append(('in_tree' + s, rnd.choice(world.rps)['uuid']))
    if n_numbered > 1 or (n_numbered and rnd.random() < 0.5):
        params.append(('group_policy', rnd.choice(['none', 'isolate'])))
    if minor >= 35 and rnd.random() < 0.15:
        params.append(('root_required', rnd.choice(
            ['CUSTOM_A', '!CUSTOM_B', 'HW_CPU_X86_AVX'])))
    if minor >= 36 and n_numbered == 2 and rnd.random() < 0.3:
        params.append(('same_subtree', '1,2'))
    qs = '&'.join('%s=%s' % kv for kv in params)
    return '/allocation_candidates?' + qs, version


def upstream_shares_amount_objects(path):
    """Upstream 16.0.0 consolidates groups by adding into the very
    AllocationRequestResource objects it reuses across candidates unless
    group_policy=none (copy_arr_if_needed), so when one class is asked by
    several groups its answers carry amounts nobody requested (and its
    capacity filter judges those). We do not reproduce that; such queries
    are counted, not compared."""
    qs = path.split('?', 1)[1]
    params = [kv.split('=', 1) for kv in qs.split('&') if '=' in kv]
    if ('group_policy', 'none') in [tuple(p) for p in params]:
        return False
    seen = set()
    for key, value in params:
        if key.startswith('resources'):
            for rc in {pair.split(':')[0] for pair in value.split(',')}:
                if rc in seen:
                    return True
                seen.add(rc)
    return False


def upstream_keeps_one_anchor_for_sharing_pick(path, world):
    """True when upstream 16.0.0 may drop candidates we rightly return.

    For the unnumbered group upstream builds its answers tree by tree into
    one set of AllocationRequest, whose equality ignores the anchor
    (_alloc_candidates_multiple_providers). A pick made only of sharing
    providers is the same under every tree sharing an aggregate with them,
    so the set keeps it under one anchor: the first tree met in set
    iteration order, which follows hashes of uuid strings and so changes
    from one process to the next (PYTHONHASHSEED). Numbered groups then
    combine with that pick only under that anchor: which candidates come
    out is random. We offer the pick under every anchor (the union of all
    of upstream's possible answers). Only the unnumbered group mixed with
    numbered groups is affected, when sharing providers hold every class
    the unnumbered group asks for; there, upstream's answer must be a
    subset of ours."""
    qs = path.split('?', 1)[1]
    params = [kv.split('=', 1) for kv in qs.split('&')]
    unnumbered = None
    numbered = False
    for key, value in params:
        if key == 'resources':
            unnumbered = {pair.split(':')[0] for pair in value.split(',')}
        elif key.startswith('resources'):
            numbered = True
    if not unnumbered or not numbered:
        return False
    sharing = {rp for rp, trait in world.rpt if trait == cw.SHARES}
    offered = {i['resource_class'] for i in world.inv
               if i['resource_provider_id'] in sharing}
    return unnumbered <= offered


def upstream_compares_trait_ids_with_names(theirs):
    """Upstream 16.0.0, for forbidden traits of the unnumbered group in a
    world with trees, compares ``trait_id`` with the trait *names*
    (``rptt_forbidden.trait_id IN ('CUSTOM_A')``): SQLite and MySQL
    quietly match nothing, PostgreSQL refuses the statement and upstream
    answers 500. Nothing to compare with then."""
    if theirs['status'] != 500:
        return False
    errors = theirs['body'].get('errors', [{}])
    return any('invalid input syntax for type integer' in
               (e.get('detail') or '') for e in errors)


def within(mine, theirs):
    """Upstream's answer is part of ours (see
    upstream_keeps_one_anchor_for_sharing_pick)."""
    if mine[0] != 200 or theirs[0] != 200:
        return mine == theirs
    sums_mine = json.loads(mine[2])
    sums_theirs = json.loads(theirs[2])
    return (set(theirs[1]) <= set(mine[1]) and
            all(sums_mine.get(k) == v for k, v in sums_theirs.items()))


def normalize(status, body):
    if status != 200:
        errs = body.get('errors', [{}]) if isinstance(body, dict) else [{}]
        details = []
        for e in errs:
            detail = e.get('detail') or ''
            # Upstream names the first unknown trait of a set, in set
            # order (random per process); compare only the kind.
            if 'No such trait(s): ' in detail:
                detail = detail.split('No such trait(s): ')[0] + 'TRAIT'
            # Upstream lists unknown same_subtree suffixes in set order
            # too (random per process); ours are sorted, one of its
            # orders.
            if 'Real suffixes' in detail:
                head, rest = detail.split('`same_subtree`: ', 1)
                listed, tail = rest.split(' not found', 1)
                detail = '%s`same_subtree`: %s not found%s' % (
                    head, sorted(ast.literal_eval(listed)), tail)
            details.append((detail, e.get('code')))
        return status, details
    areqs = set()
    for ar in body['allocation_requests']:
        if isinstance(ar['allocations'], list):
            allocs = {a['resource_provider']['uuid']: a['resources']
                      for a in ar['allocations']}
        else:
            allocs = ar['allocations']
        maps = {k: sorted(v) for k, v in ar.get('mappings', {}).items()}
        areqs.add(json.dumps([allocs, maps], sort_keys=True))
    # Summaries as they are: the order of each provider's traits counts
    # (trait id order, see model.Traits).
    return status, sorted(areqs), json.dumps(body['provider_summaries'],
                                             sort_keys=True)


class _Upstream:
    def __init__(self, db_path):
        self.proc = subprocess.Popen(
            [UPSTREAM_PY, RUNNER, db_path], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, cwd='/')

    def get(self, path, version):
        self.proc.stdin.write(json.dumps({'path': path,
                                          'version': version}) + '\n')
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _ours(app, path, version):
    req = webob.Request.blank(path, headers={
        'x-auth-token': 'admin', 'accept': 'application/json',
        'openstack-api-version': 'placement %s' % version})
    resp = req.get_response(app)
    return {'status': resp.status_int, 'body': json.loads(resp.body)}


def test_random_worlds_match_upstream():
    _compare_with_upstream(random.Random(SEED), CASES, random_world)


def test_flat_worlds_match_upstream():
    """Worlds without trees or sharing providers, where the unnumbered
    group alone is answered by the world's fast path (search._sole)."""
    _compare_with_upstream(random.Random(SEED + 1), max(CASES // 2, 30),
                           lambda rnd: random_world(rnd, flat=True))


def _same(mine, theirs, path, world):
    """Normalized answers agree (see upstream_keeps_one_anchor_...)."""
    if upstream_keeps_one_anchor_for_sharing_pick(path, world):
        return within(mine, theirs)
    return mine == theirs


@contextlib.contextmanager
def _both_over(world):
    """(our app, upstream) over a fresh database holding ``world``, whose
    schema upstream's migrations made."""
    db = test_db.TestDatabase(schema=False)
    subprocess.run([UPSTREAM_PY, RUNNER, db.url, 'init'], check=True,
                   cwd='/')
    # Then ours, as "placement-manage db sync" would: the change counters
    # that let our processes answer from memory.
    migration.upgrade('head', engine=db.engine)
    world.write(db.engine)
    conf = gabbits.build_test_conf(db.url)
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)
    upstream = _Upstream(db.url)
    try:
        yield deploy.loadapp(conf), upstream
    finally:
        upstream.close()
        undo()
        db.drop()


def _compare_with_upstream(rnd, cases, make_world):
    mismatches = []
    checked = 0
    skipped = 0
    wi = -1
    while checked < cases:
        wi += 1
        world = make_world(rnd)
        with _both_over(world) as (app, upstream):
            for _ in range(QUERIES_PER_WORLD):
                path, version = random_query(rnd, world)
                if upstream_shares_amount_objects(path):
                    skipped += 1
                    continue
                theirs = upstream.get(path, version)
                if upstream_compares_trait_ids_with_names(theirs):
                    skipped += 1
                    continue
                mine = _ours(app, path, version)
                a = normalize(mine['status'], mine['body'])
                b = normalize(theirs['status'], theirs['body'])
                checked += 1
                if not _same(a, b, path, world):
                    mismatches.append((wi, path, version, a, b))
    report = '\n'.join('world %d %s @%s\n ours:     %s\n upstream: %s'
                       % m for m in mismatches[:5])
    assert not mismatches, '%d/%d differ:\n%s' % (
        len(mismatches), checked, report)
    assert checked >= skipped


# One way to get a query wrong per entry: (name, the microversions it is
# a mistake at (lowest, highest minor), a function of (rnd, params,
# world) changing the list of (key, value) pairs of a valid query).
def _set(key, value):
    def change(rnd, params, world):
        params[:] = [kv for kv in params if kv[0] != key]
        params.append((key, value))
    return change


def _add(key, value):
    def change(rnd, params, world):
        params.append((key, value))
    return change


def _resources(value):
    def change(rnd, params, world):
        keys = [i for i, kv in enumerate(params)
                if kv[0].startswith('resources')]
        i = rnd.choice(keys)
        params[i] = (params[i][0], value)
    return change


def _in_tree_upper(rnd, params, world):
    params[:] = [kv for kv in params if not kv[0].startswith('in_tree')]
    params.append(('in_tree', rnd.choice(world.rps)['uuid'].upper()))


def _drop_group_policy(rnd, params, world):
    params[:] = [kv for kv in params if kv[0] != 'group_policy']
    params.extend([('resources1', 'VCPU:1'), ('resources2', 'VCPU:1')])


def _drop_resources(rnd, params, world):
    params[:] = [kv for kv in params if not kv[0].startswith('resources')]


_MISTAKES = [
    ('unknown class', 10, 39, _resources('CUSTOM_NOPE:1')),
    ('lower-case class', 10, 39, _resources('vcpu:1')),
    ('zero amount', 10, 39, _resources('VCPU:0')),
    ('negative amount', 10, 39, _resources('VCPU:-1')),
    ('amount not a number', 10, 39, _resources('VCPU:x')),
    ('no amount', 10, 39, _resources('VCPU')),
    ('empty resources', 10, 39, _resources('')),
    ('class twice', 10, 39, _resources('VCPU:1,VCPU:2')),
    ('no resources at all', 10, 39, _drop_resources),
    ('unknown parameter', 10, 39, _add('colour', 'blue')),
    ('limit zero', 16, 39, _set('limit', '0')),
    ('limit negative', 16, 39, _set('limit', '-1')),
    ('limit not a number', 16, 39, _set('limit', 'five')),
    ('limit too early', 10, 15, _set('limit', '1')),
    ('unknown trait', 17, 39, _add('required', 'CUSTOM_NOPE')),
    ('bad trait name', 17, 39, _add('required', 'not-a-trait')),
    ('empty required', 17, 39, _add('required', '')),
    ('forbidden trait too early', 17, 21, _add('required', '!CUSTOM_A')),
    ('required and forbidden', 22, 39,
     _add('required', 'CUSTOM_A,!CUSTOM_A')),
    ('any-of too early', 17, 38, _add('required', 'in:CUSTOM_A,CUSTOM_B')),
    ('empty any-of', 39, 39, _add('required', 'in:')),
    ('any-of with forbidden', 39, 39,
     _add('required', 'in:CUSTOM_A,!CUSTOM_B')),
    ('member_of bad uuid', 21, 39, _add('member_of', 'not-a-uuid')),
    ('member_of empty', 21, 39, _add('member_of', '')),
    ('member_of in: empty', 21, 39, _add('member_of', 'in:')),
    ('member_of in: with !', 32, 39, _add('member_of', 'in:!' + AGGS[0])),
    ('member_of forbidden too early', 21, 31,
     _add('member_of', '!' + AGGS[0])),
    ('member_of too early', 10, 20, _add('member_of', AGGS[0])),
    ('in_tree bad uuid', 31, 39, _add('in_tree', 'not-a-uuid')),
    ('in_tree too early', 10, 30, _add('in_tree', AGGS[0])),
    ('numbered group too early', 10, 24, _add('resources1', 'VCPU:1')),
    ('numbered group without resources', 25, 39,
     _add('required7', 'CUSTOM_A')),
    ('member_of of a group without resources', 25, 39,
     _add('member_of7', AGGS[0])),
    ('missing group_policy', 25, 39, _drop_group_policy),
    ('bad group_policy', 25, 39, _set('group_policy', 'sometimes')),
    ('string suffix too early', 25, 32, _add('resources_NIC', 'VCPU:1')),
    ('suffix too long', 33, 39, _add('resources_' + 'X' * 65, 'VCPU:1')),
    ('suffix bad character', 33, 39, _add('resources_A.B', 'VCPU:1')),
    ('root_required too early', 10, 34, _add('root_required', 'CUSTOM_A')),
    ('root_required unknown', 35, 39, _add('root_required', 'CUSTOM_NOPE')),
    ('root_required any-of too early', 35, 38,
     _add('root_required', 'in:CUSTOM_A,CUSTOM_B')),
    ('root_required required and forbidden', 35, 39,
     _add('root_required', 'CUSTOM_A,!CUSTOM_A')),
    ('same_subtree too early', 10, 35, _add('same_subtree', '_A,_B')),
    ('same_subtree unknown suffix', 36, 39,
     _add('same_subtree', '_NOPE,_B')),
    ('same_subtree one suffix', 36, 39, _add('same_subtree', '_NOPE')),
    ('same_subtree empty', 36, 39, _add('same_subtree', '')),
    ('resources repeated', 10, 39, _add('resources', 'MEMORY_MB:1')),
    ('resources trailing comma', 10, 39, _resources('VCPU:1,')),
    ('resources two colons', 10, 39, _resources('VCPU:1:2')),
    ('resources no class', 10, 39, _resources(':1')),
    ('upper-case parameter', 10, 39, _add('RESOURCES', 'VCPU:1')),
    ('limit fraction', 16, 39, _set('limit', '1.5')),
    ('required trailing comma', 17, 39, _add('required', 'CUSTOM_A,')),
    ('member_of one bad uuid of two', 21, 39,
     _add('member_of', 'in:%s,not-a-uuid' % AGGS[0])),
    ('member_of trailing comma', 21, 39,
     _add('member_of', 'in:%s,' % AGGS[0])),
    ('in_tree empty', 31, 39, _add('in_tree', '')),
    ('root_required empty', 35, 39, _add('root_required', '')),
    ('empty suffix', 33, 39, _add('resources_', 'VCPU:1')),
    ('suffixed group_policy', 25, 39, _add('group_policy1', 'none')),
    # Not mistakes: uuids in upper case (MySQL's collations ignore case).
    ('member_of in upper case', 21, 39, _add('member_of', AGGS[0].upper())),
    ('member_of forbidden in upper case', 32, 39,
     _add('member_of', '!' + AGGS[1].upper())),
    ('in_tree in upper case', 31, 39, _in_tree_upper),
]


@pytest.mark.parametrize('flat', [False, True], ids=['trees', 'flat'])
def test_invalid_queries_match_upstream(flat):
    """Every mistake, made to random valid queries at random
    microversions: the same status, error text and code as upstream."""
    rnd = random.Random(SEED + 2 + flat)
    world = random_world(rnd, flat=flat)
    mismatches = []
    errors = 0
    with _both_over(world) as (app, upstream):
        for name, lo, hi, change in _MISTAKES * max(2, CASES // 30):
            path, version = random_query(rnd, world)
            version = '1.%d' % rnd.randint(lo, hi)
            qs = path.split('?', 1)[1]
            params = [tuple(kv.split('=', 1)) for kv in qs.split('&')]
            change(rnd, params, world)
            if not params:
                params = [('limit', '1')]
            path = '/allocation_candidates?' + '&'.join(
                '%s=%s' % kv for kv in params)
            if upstream_shares_amount_objects(path):
                continue
            theirs = upstream.get(path, version)
            mine = _ours(app, path, version)
            a = normalize(mine['status'], mine['body'])
            b = normalize(theirs['status'], theirs['body'])
            errors += b[0] != 200
            if not _same(a, b, path, world):
                mismatches.append((name, path, version, a, b))
    report = '\n'.join('%s: %s @%s\n ours:     %s\n upstream: %s'
                       % m for m in mismatches[:8])
    assert not mismatches, '%d differ:\n%s' % (len(mismatches), report)
    assert errors > len(_MISTAKES)
