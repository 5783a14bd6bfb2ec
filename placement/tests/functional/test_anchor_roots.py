"""Which trees a search looks at (world_request.Request.anchor_roots).

In a large cloud most trees cannot anchor a candidate asked for with
in_tree, required traits or member_of; the search tells which can from
the world's indexes (roots per trait and per aggregate) and walks only
those. These tests check both halves: the answer is the SQL engine's,
and the trees looked at are only the ones that could serve.
"""
import pytest
import sqlalchemy as sa

from placement.objects.candidates import world_request
from placement.objects.candidates.world import settings as world_settings
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidate_gather as twr
from placement.tests.functional import test_candidates_world as tcw

AGG_A = 'aaaaaaaa-0000-4000-8000-000000000001'
AGG_B = 'aaaaaaaa-0000-4000-8000-000000000002'


def _uuid(i):
    return 'cccccccc-0000-4000-8000-%012d' % i


def _world(sharing=False):
    """24 hosts with a NUMA child each; every 3rd host has HW_CPU_X86_AVX2
    on its NUMA node, even hosts are in aggregate A, the others in B."""
    w = cw.WorldBuilder()
    for i in range(24):
        host, numa = 'h%d' % i, 'h%d-numa' % i
        w.provider(host, uuid=_uuid(2 * i))
        w.provider(numa, parent=host, uuid=_uuid(2 * i + 1))
        w.inventory(host, 'DISK_GB', 100)
        w.inventory(numa, 'VCPU', 8)
        if i % 3 == 0:
            w.trait(numa, 'HW_CPU_X86_AVX2')
        w.aggregate(host, AGG_A if i % 2 == 0 else AGG_B)
    if sharing:
        w.provider('storage', uuid=_uuid(99))
        w.inventory('storage', 'DISK_GB', 1000)
        w.trait('storage', 'MISC_SHARES_VIA_AGGREGATE')
        w.aggregate('storage', AGG_A)
    return w


@pytest.fixture
def looked(monkeypatch):
    """The roots whose trees each search read (world_request.Request.batch, for the
    fast path and the general one), request by request."""
    seen = []
    real = world_request.Request.batch

    def batch(self, roots, groups=None):
        seen[-1].update(roots)
        return real(self, roots, groups)

    monkeypatch.setattr(world_request.Request, 'batch', batch)
    return seen


QUERIES = [
    # (query, hosts whose trees may anchor, with the sharing provider too)
    ('resources=VCPU:1,DISK_GB:10&required=HW_CPU_X86_AVX2'
     '&member_of=' + AGG_A, {0, 6, 12, 18}),
    ('resources=VCPU:1&member_of=in:%s,%s' % (AGG_A, AGG_B), set(range(24))),
    ('resources=VCPU:1&in_tree=%s' % _uuid(2 * 5), {5}),
    ('resources1=VCPU:1&required1=HW_CPU_X86_AVX2&resources2=DISK_GB:5'
     '&member_of2=%s&group_policy=none' % AGG_B, {3, 9, 15, 21}),
    ('resources=DISK_GB:1&required=!HW_CPU_X86_AVX2&member_of=!' + AGG_A,
     set(range(24))),
]


@pytest.mark.parametrize('randomize', [False, True],
                         ids=['ordered', 'randomized'])
@pytest.mark.parametrize('query,hosts', QUERIES, ids=[
    'trait-and-aggregate', 'any-of-aggregates', 'in-tree', 'numbered',
    'forbidden'])
def test_only_trees_that_can_serve_are_looked_at(query, hosts, randomize,
                                                 monkeypatch, looked):
    overrides = {('placement', 'randomize_allocation_candidates'): randomize}
    with gabbits.app_and_engine_over_world(_world(), overrides) as (app, _):
        path = '/allocation_candidates?' + query
        looked.append(set())
        got = twr.get(app, path, tcw.LATEST)
        expected = tcw._sql(monkeypatch, app, path, tcw.LATEST)
        assert sorted(got[1]['provider_summaries']) == sorted(
            expected[1]['provider_summaries'])
        assert len(got[1]['allocation_requests']) == len(
            expected[1]['allocation_requests'])
        with app_world(app) as world:
            roots = {world.by_uuid[_uuid(2 * h)] for h in hosts}
        assert looked[-1] <= roots
        # Every tree that has a candidate was looked at.
        assert {world.rps[world.by_uuid[u]].root
                for u in got[1]['provider_summaries']} <= looked[-1]


def test_sharing_providers_widen_it_again(monkeypatch, looked):
    """A sharing provider may serve a tree outside the aggregates and
    traits asked for: every root is looked at (only in_tree on the
    unnumbered group still narrows)."""
    with gabbits.app_and_engine_over_world(_world(sharing=True)) as (app, _):
        query = ('/allocation_candidates?resources=VCPU:1,DISK_GB:10'
                 '&member_of=' + AGG_A)
        looked.append(set())
        got = twr.get(app, query, tcw.LATEST)
        assert got == tcw._sql(monkeypatch, app, query, tcw.LATEST)
        assert len(looked[-1]) == 25
        looked.append(set())
        twr.get(app, '/allocation_candidates?resources=VCPU:1,DISK_GB:10'
                '&in_tree=' + _uuid(4), tcw.LATEST)
        with app_world(app) as world:
            assert looked[-1] == {world.by_uuid[_uuid(4)]}


@pytest.mark.parametrize('devices,limit', [(1, 30), (6, 30), (6, 7)])
def test_a_limit_looks_at_the_trees_it_needs(devices, limit, monkeypatch,
                                            looked):
    """Under a limit the walk looks at trees a batch at a time, each
    batch as large as the candidates still wanted need at the rate the
    trees so far gave them: trees giving several candidates each are not
    looked at by the limit's number (the first batch is 8 trees)."""
    w = cw.WorldBuilder()
    for i in range(200):
        host = 'h%d' % i
        w.provider(host, uuid=_uuid(i))
        w.inventory(host, 'VCPU', 8)
        for d in range(devices):
            w.provider('%s-d%d' % (host, d), parent=host)
            w.inventory('%s-d%d' % (host, d), 'CUSTOM_DEV', 1)
    with gabbits.app_and_engine_over_world(w) as (app, _):
        path = ('/allocation_candidates?resources=VCPU:1'
                '&resources1=CUSTOM_DEV:1&limit=%d' % limit)
        looked.append(set())
        got = twr.get(app, path, tcw.LATEST)
        assert got == tcw._sql(monkeypatch, app, path, tcw.LATEST)
        assert len(got[1]['allocation_requests']) == limit
        needed = -(-limit // devices)
        assert needed <= len(looked[-1]) <= max(8, needed + 2)


def app_world(app):
    from placement.objects.candidates import engine
    from placement import context
    ctx = context.RequestContext(user_id='admin', project_id='admin')
    return _Snapshot(engine.snapshot(ctx))


class _Snapshot:
    def __init__(self, cm):
        self.cm = cm

    def __enter__(self):
        world, _conn = self.cm.__enter__()
        return world

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)


@pytest.mark.parametrize('kept', [None, 2], ids=['kept', 'made-again'])
def test_trees_changed_since_the_snapshot_are_judged_as_they_are_now(
        kept, monkeypatch, looked):
    """The roots a request's traits and aggregates admit are the
    snapshot's, judged once, with the trees changed since judged as they
    are now: a trait added or removed, a host moved to another aggregate,
    a tree deleted, a new one; a request asked before the changes (its
    list kept, brought up to date) and one asked first after them. Also
    when the log of edits is dropped at every refresh (a world keeps at
    most CACHE), the lists with it."""
    if kept is not None:
        monkeypatch.setattr(world_settings, 'CACHE', kept)
    trait_and_a = ('/allocation_candidates?resources=VCPU:1'
                   '&required=HW_CPU_X86_AVX2&member_of=' + AGG_A)
    b_only = '/allocation_candidates?resources=VCPU:1&member_of=' + AGG_B

    def hosts_of(path, expected_hosts):
        looked.append(set())
        got = twr.get(app, path, tcw.LATEST)
        assert got == tcw._sql(monkeypatch, app, path, tcw.LATEST)
        with app_world(app) as world:
            roots = {world.by_uuid[uuid] for uuid in expected_hosts}
            answered = {world.rps[world.by_uuid[u]].root
                        for u in got[1]['provider_summaries']}
        assert answered == roots
        assert looked[-1] == roots

    def traits(rp, *names):
        cloud.refresh_gen(rp)
        tcw._call(app, 'PUT', '/resource_providers/%s/traits' % rp, {
            'resource_provider_generation': cloud.gen[rp],
            'traits': list(names)})

    with gabbits.app_and_engine_over_world(_world()) as (app, engine):
        if engine.dialect.name == 'postgresql':
            # The world's rows came with their ids: the next provider the
            # API makes takes the one after them.
            with engine.begin() as conn:
                conn.execute(sa.text(
                    "SELECT setval(pg_get_serial_sequence("
                    "'resource_providers', 'id'), "
                    "(SELECT max(id) FROM resource_providers))"))
        cloud = tcw._Cloud(app)
        host, numa = _uuid, lambda i: _uuid(2 * i + 1)
        hosts_of(trait_and_a, {host(2 * i) for i in (0, 6, 12, 18)})
        traits(numa(2), 'HW_CPU_X86_AVX2')              # now admitted
        traits(numa(0))                                 # no longer
        cloud.aggregates(host(2 * 6), AGG_B)            # moved to B
        tcw._call(app, 'DELETE', '/resource_providers/' + numa(12))
        tcw._call(app, 'DELETE', '/resource_providers/' + host(2 * 12))
        new = cloud.provider('h99')
        new_numa = cloud.provider('h99-numa', parent=new)
        cloud.inventory(new_numa, VCPU=8)
        traits(new_numa, 'HW_CPU_X86_AVX2')
        cloud.aggregates(new, AGG_A)
        hosts_of(trait_and_a, {host(2 * 2), host(2 * 18), new})
        # Asked first now: half the hosts and the one moved.
        hosts_of(b_only, {host(2 * i) for i in range(1, 24, 2)}
                 | {host(2 * 6)})
