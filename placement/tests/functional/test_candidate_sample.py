"""``randomize_allocation_candidates`` with a ``limit``: a uniform random
sample of the whole answer, as upstream's ``random.sample``.

Statistics over many requests, with fixed seeds, for both engines (the
in-memory world, search.py; the SQL one, sql.py), against what a
uniform ``limit``-subset gives exactly:

* few roots fit, each with ten candidates: the number of distinct roots
  an answer spans (taking a root's candidates before moving on, as the
  engines once did, spans about half as many), and each candidate as
  often as any other;
* roots offering uneven numbers of candidates (one, or ten; sharing
  providers adding some; a request sharing providers can serve alone):
  each candidate in about ``limit / answer`` of the answers.

Each bound is five standard deviations of the uniform sample's figure.
"""
import collections
import json
import math
import random

import pytest
import webob

from placement.objects.candidates import engine as candidates_engine
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits

RANDOMIZED = {('placement', 'randomize_allocation_candidates'): True}
AGG = 'cccccccc-0000-0000-0000-000000000001'


@pytest.fixture(params=['world', 'sql'])
def engine(request, monkeypatch):
    """Which engine answers, and the module ``random`` the engines draw
    from seeded (and put back afterwards)."""
    monkeypatch.setattr(candidates_engine, 'USE_WORLD',
                        request.param == 'world')
    state = random.getstate()
    random.seed(20261125)
    yield request.param
    random.setstate(state)


def _answer(app, path):
    resp = webob.Request.blank(path, headers={
        'x-auth-token': 'admin',
        'openstack-api-version': 'placement 1.39'}).get_response(app)
    assert resp.status_int == 200, resp.body
    return [json.dumps(ar['allocations'], sort_keys=True)
            for ar in json.loads(resp.body)['allocation_requests']]


def _whole(app, path, monkeypatch):
    """The whole answer, without randomize."""
    with monkeypatch.context() as m:
        m.setattr(candidates_engine, 'USE_WORLD', True)
        return set(_answer(app, path))


def _chi_square_ok(counts, whole, draws, limit):
    """Each of ``whole`` kept ``counts[c]`` times in ``draws`` answers of
    ``limit``: the sum of squared deviations over the binomial variance
    is about len(whole) (its mean, exactly) for a uniform sample; within
    five of its standard deviations (about sqrt(2 len(whole)))."""
    p = limit / len(whole)
    expected = draws * p
    stat = sum((counts[c] - expected) ** 2 for c in whole) / (
        draws * p * (1 - p))
    spread = 5 * math.sqrt(2 * len(whole))
    return abs(stat - len(whole)) < spread, stat


# -- few roots fit -----------------------------------------------------------

HOSTS, CHILDREN, FITTING = 200, 10, 20
FEW = ('/allocation_candidates?resources=VCPU:1&root_required=CUSTOM_X'
       '&limit=50')


@pytest.fixture(scope='module')
def few_fit():
    """200 hosts, each with 10 children having VCPU; 20 hosts have the
    root_required trait: 200 candidates, 10 per fitting root."""
    w = cw.WorldBuilder()
    for h in range(HOSTS):
        host = 'h%d' % h
        w.provider(host)
        if h % (HOSTS // FITTING) == 0:
            w.trait(host, 'CUSTOM_X')
        for c in range(CHILDREN):
            w.provider('%s_c%d' % (host, c), parent=host)
            w.inventory('%s_c%d' % (host, c), 'VCPU', 8)
    root_of = {}
    by_id = {r['id']: r for r in w.rps}
    for r in w.rps:
        root_of[r['uuid']] = by_id[r['root_provider_id']]['name']
    with gabbits.app_over_world(w, RANDOMIZED) as app:
        yield app, root_of


def _distinct_roots_expected(groups, size, limit):
    """Mean and variance of the number of groups a uniform ``limit``-subset
    of ``groups`` groups of ``size`` items meets."""
    n = groups * size
    miss1 = math.comb(n - size, limit) / math.comb(n, limit)
    miss2 = math.comb(n - 2 * size, limit) / math.comb(n, limit)
    mean = groups * (1 - miss1)
    square = mean + groups * (groups - 1) * (1 - 2 * miss1 + miss2)
    return mean, square - mean * mean


def test_few_fitting_roots_spread_as_a_uniform_sample(few_fit, engine,
                                                      monkeypatch):
    app, root_of = few_fit
    whole = _whole(app, FEW.replace('&limit=50', ''), monkeypatch)
    assert len(whole) == FITTING * CHILDREN
    draws = 120
    spans = []
    counts = collections.Counter()
    for _ in range(draws):
        answer = _answer(app, FEW)
        assert len(answer) == 50 == len(set(answer))
        assert set(answer) <= whole
        counts.update(answer)
        spans.append(len({root_of[u] for a in answer
                          for u in json.loads(a)}))
    mean, var = _distinct_roots_expected(FITTING, CHILDREN, 50)
    # 18.96 roots expected (sd 0.90 per answer); a root's candidates
    # taken together gave about 11.
    got = sum(spans) / draws
    assert abs(got - mean) < 5 * math.sqrt(var / draws), (got, mean)
    ok, stat = _chi_square_ok(counts, whole, draws, 50)
    assert ok, stat


# -- uneven roots ------------------------------------------------------------

def _uneven():
    """10 hosts with 10 VCPU children, 40 with one (the first host's first
    6 children and every other host's first one with CUSTOM_A); and 10
    more hosts with VCPU on the root, half of them with their own disk,
    all in an aggregate with a sharing disk provider."""
    w = cw.WorldBuilder()
    for h in range(50):
        host = 'n%d' % h
        w.provider(host)
        for c in range(10 if h < 10 else 1):
            w.provider('%s_c%d' % (host, c), parent=host)
            w.inventory('%s_c%d' % (host, c), 'VCPU', 8)
            if c < (6 if h == 0 else 1):
                w.trait('%s_c%d' % (host, c), 'CUSTOM_A')
    w.provider('disks')
    w.inventory('disks', 'DISK_GB', 1000)
    w.trait('disks', cw.SHARES)
    w.aggregate('disks', AGG)
    for h in range(10):
        host = 's%d' % h
        w.provider(host)
        w.inventory(host, 'MEMORY_MB', 1024)
        w.aggregate(host, AGG)
        if h < 5:
            w.inventory(host, 'DISK_GB', 100)
    return w


@pytest.fixture(scope='module')
def uneven():
    with gabbits.app_over_world(_uneven(), RANDOMIZED) as app:
        yield app


@pytest.mark.parametrize('query,total,limit', [
    # 10 x 10 + 40 x 1 candidates
    ('resources=VCPU:1', 140, 14),
    # a numbered group's trait: 6 candidates in one tree, 1 in the others
    ('resources1=VCPU:1&required1=CUSTOM_A', 55, 8),
    # 5 hosts with a disk of their own or the shared one, 5 with the
    # shared one only
    ('resources=MEMORY_MB:1,DISK_GB:1', 15, 4),
    # the shared disk alone serves it (once, whichever host shares it)
    ('resources=DISK_GB:1', 6, 2),
], ids=['one-or-ten', 'trait', 'sharing', 'sharing-alone'])
def test_every_candidate_as_likely(uneven, engine, monkeypatch, query,
                                   total, limit):
    path = '/allocation_candidates?%s&limit=%d' % (query, limit)
    whole = _whole(uneven, path.split('&limit')[0], monkeypatch)
    assert len(whole) == total
    # Fewer of the SQL engine's slower answers: the bounds are sized by
    # the number drawn.
    draws = 200 if engine == 'world' else 120
    counts = collections.Counter()
    for _ in range(draws):
        answer = _answer(uneven, path)
        assert len(answer) == limit == len(set(answer))
        counts.update(answer)
    assert set(counts) <= whole
    ok, stat = _chi_square_ok(counts, whole, draws, limit)
    assert ok, (stat, sorted(counts.values()))
    # And no candidate far off on its own: each is a binomial count.
    p = limit / total
    sd = math.sqrt(draws * p * (1 - p))
    assert all(abs(counts[c] - draws * p) < 5 * sd for c in whole), (
        sorted(counts.values()))


# -- every subset, stopping early or not -------------------------------------

@pytest.fixture(scope='module')
def one_two_three():
    """Roots with 1, 2 and 3 VCPU children, and one with none: 6
    candidates, 15 pairs of them."""
    w = cw.WorldBuilder()
    for h, kids in enumerate([1, 2, 3, 0]):
        w.provider('h%d' % h)
        w.provider('h%d_x' % h, parent='h%d' % h)
        for c in range(kids):
            w.provider('h%d_c%d' % (h, c), parent='h%d' % h)
            w.inventory('h%d_c%d' % (h, c), 'VCPU', 8)
    with gabbits.app_over_world(w, RANDOMIZED) as app:
        yield app


@pytest.mark.parametrize('budget', [None, 1], ids=['drawn', 'stopped'])
def test_every_pair_as_likely(one_two_three, engine, monkeypatch, budget):
    """limit=2: each of the 15 pairs equally likely, and either one
    first; also when the draw stops after one attempt and the rest comes
    from enumerating the answer (sample.fill)."""
    from placement.objects.candidates import sample
    if budget is not None:
        monkeypatch.setattr(sample, 'BUDGET_MIN', budget)
        monkeypatch.setattr(sample, 'BUDGET_PER_ROOT', 0)
    path = '/allocation_candidates?resources=VCPU:1&limit=2'
    draws = 300 if engine == 'world' else 150
    pairs = collections.Counter()
    firsts = collections.Counter()
    for _ in range(draws):
        answer = _answer(one_two_three, path)
        pairs[frozenset(answer)] += 1
        firsts[answer[0]] += 1
    assert len(pairs) == 15 and len(firsts) == 6
    # chi-square with 14 (5) degrees of freedom: above 50 (30) with odds
    # under 1e-5 for a uniform draw (10 or 20 of each pair expected).
    expected = draws / 15
    assert sum((n - expected) ** 2 / expected
               for n in pairs.values()) < 50, pairs
    expected = draws / 6
    assert sum((n - expected) ** 2 / expected
               for n in firsts.values()) < 30, firsts


# -- the bound follows writes ------------------------------------------------

def _most_by_brute_force(world):
    """{class id, None or ('trait', id): the most providers with it one
    tree has}."""
    per_tree = collections.defaultdict(collections.Counter)
    for rec in world.rps.values():
        per_tree[rec.root][None] += 1
        per_tree[rec.root].update(rec.inv.keys())
        per_tree[rec.root].update(('trait', t) for t in rec.traits)
    most = collections.Counter()
    for counts in per_tree.values():
        for key, n in counts.items():
            most[key] = max(most[key], n)
    return most


def test_bound_follows_writes():
    """The most providers per class one tree has (per_tree.PerTree, the
    sample's bound), and the roots whose trees hold each class, stay
    exact as providers come, move and go through the API, read provider
    by provider."""
    from placement.objects.candidates import per_tree as per_tree_mod
    from placement.objects.candidates import world as world_mod
    from placement.tests.functional import test_candidates_world as tcw
    query = '/allocation_candidates?resources=VCPU:1&limit=2'
    with gabbits.app_and_engine_over_world(cw.WorldBuilder(), RANDOMIZED
                                           ) as (app, engine):
        cloud = tcw._Cloud(app)
        with engine.connect() as conn:
            world = world_mod.for_connection(conn)

        def check():
            tcw._call(app, 'GET', query)
            expected = _most_by_brute_force(world)
            # Kept since the first request and settled tree by tree, and
            # counted afresh over the snapshot and what changed since (a
            # process's first random sample after writes).
            for per_tree in (world.per_tree(), per_tree_mod.PerTree(world)):
                assert {key: per_tree.most_with_trait(key[1])
                        if isinstance(key, tuple) else per_tree.most(key)
                        for key in expected} == expected
                # And the roots whose trees hold each class (the draw's).
                for key in expected:
                    if key is None or isinstance(key, tuple):
                        continue
                    assert set(per_tree.roots_with(key)) == {
                        root for root, ids in world.trees.items()
                        if any(key in world.rps[i].inv for i in ids)}
            return expected[None]

        a = cloud.provider('a')
        b = cloud.provider('b')
        a1 = cloud.provider('a1', parent=a)
        cloud.inventory(a1, VCPU=4)
        b1 = cloud.provider('b1', parent=b)
        cloud.inventory(b1, VCPU=4, DISK_GB=10)
        b2 = cloud.provider('b2', parent=b)
        cloud.inventory(b2, VCPU=4)
        cloud.traits(b2, 'CUSTOM_NUMA')
        assert check() == 3
        loads = world.loads
        a2 = cloud.provider('a2', parent=a)
        cloud.inventory(a2, VCPU=4)
        a3 = cloud.provider('a3', parent=a1)
        cloud.inventory(a3, VCPU=4, DISK_GB=10)
        cloud.traits(a3, 'CUSTOM_NUMA')
        cloud.traits(a1, 'CUSTOM_NUMA')
        assert check() == 4
        tcw._call(app, 'PUT', '/resource_providers/' + a1,
                  {'name': 'a1', 'parent_provider_uuid': b2})
        assert check() == 5
        tcw._call(app, 'DELETE', '/resource_providers/%s/inventories' % b1)
        assert check() == 5
        tcw._call(app, 'DELETE', '/resource_providers/' + a3)
        tcw._call(app, 'DELETE', '/resource_providers/' + a2)
        assert check() == 4
        assert world.loads == loads


def test_draws_only_on_roots_that_can_serve(monkeypatch):
    """One tree of 8 one-unit children answers 8 isolated groups (40,320
    candidates in 8^8 combinations); 300 other trees have none of the
    class. The draw looks at the one tree that can serve: its attempts
    find a candidate well inside their budget, where drawing over every
    root spent the budget and then made every candidate to sample from."""
    from placement.objects.candidates import sample
    w = cw.WorldBuilder()
    w.provider('wide')
    for i in range(8):
        w.provider('c%d' % i, parent='wide')
        w.inventory('c%d' % i, 'CUSTOM_X', 1)
    for i in range(300):
        w.provider('other%d' % i)
        w.inventory('other%d' % i, 'VCPU', 8)
    query = '&'.join('resources%d=CUSTOM_X:1' % g for g in range(1, 9))
    drawn = []
    real_draw = sample.draw

    def counting(limit, attempts, checker, most):
        kept = real_draw(limit, attempts, checker, most)
        drawn.append(len(kept))
        return kept

    monkeypatch.setattr(sample, 'draw', counting)
    monkeypatch.setattr(candidates_engine, 'USE_WORLD', True)
    with gabbits.app_over_world(w, RANDOMIZED) as app:
        for _ in range(5):
            got = _answer(app, '/allocation_candidates?%s&group_policy='
                               'isolate&limit=1' % query)
            assert len(got) == 1
    assert drawn == [1] * 5
