"""The in-memory world (candidates/world/, search.py) answers exactly
as the SQL engine, is never stale for a writer, and samples fairly.

* Random worlds (the differential test's, side by side: trees, sharing
  providers, usage, traits, aggregates) and random queries are answered
  from memory and by the SQL engine (sql.py); bodies must be
  identical, order included, with and without a limit, batches of any
  size.
* The fast path (search._sole) answers as the general path.
* Writes through the API are seen by the very next request, without a
  full reload; a second "process" (another World over the same database,
  told nothing) sees them at its next refresh; a reader further behind
  than the change log keeps reloads everything.
* randomize_allocation_candidates with a limit: every fitting provider
  comes up, no other.
"""
import collections
import itertools
import json
import random
import uuid as uuidlib

import pytest
import webob

from placement.objects.candidates import engine
from placement.objects.candidates import search
from placement.objects.candidates import world_request
from placement.objects.candidates import world as world_mod
from placement.objects.candidates.world import settings as world_settings
from placement.objects import changes
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidate_gather as twr
from placement.tests.functional import test_candidates_differential as diff

LATEST = '1.39'


@pytest.fixture
def finds(monkeypatch):
    """How many answers came from memory."""
    calls = collections.Counter()
    real = search.find_in_world

    def counting(*args, **kwargs):
        calls['world'] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(search, 'find_in_world', counting)
    return calls


def _sql(monkeypatch, app, path, version):
    with monkeypatch.context() as m:
        m.setattr(engine, 'USE_WORLD', False)
        return twr.get(app, path, version)


@pytest.mark.parametrize('first_batch', [1, 8])
def test_world_answers_as_the_sql_gatherer(first_batch, monkeypatch, finds):
    monkeypatch.setattr(search, '_FIRST_BATCH', first_batch)
    rnd = random.Random(20261124 + first_batch)
    checked = 0
    world = twr.glued_world(rnd, 6)
    with gabbits.app_over_world(world) as app:
        for _ in range(150):
            path, version = diff.random_query(rnd, world)
            if version >= '1.16' and rnd.random() < 0.4:
                path += '&limit=%d' % rnd.choice([1, 2, 3, 7])
            expected = _sql(monkeypatch, app, path, version)
            got = twr.get(app, path, version)
            assert got == expected, (path, version)
            checked += expected[0] == 200 and bool(
                expected[1]['allocation_requests'])
    assert checked > 30
    assert finds['world'] > 100


@pytest.mark.parametrize('strategy', ['breadth-first'])
def test_world_answers_as_the_sql_gatherer_breadth_first(strategy,
                                                         monkeypatch,
                                                         finds):
    rnd = random.Random(20261125)
    world = twr.glued_world(rnd, 6)
    overrides = {('placement', 'allocation_candidates_generation_strategy'):
                 strategy}
    with gabbits.app_over_world(world, overrides) as app:
        for _ in range(60):
            path, version = diff.random_query(rnd, world)
            if version >= '1.16' and rnd.random() < 0.5:
                path += '&limit=%d' % rnd.choice([1, 2, 5])
            assert twr.get(app, path, version) == _sql(
                monkeypatch, app, path, version), (path, version)
    assert finds['world'] > 50


@pytest.mark.parametrize('cap', ['limit', 'max_allocation_candidates'])
def test_breadth_first_takes_one_candidate_per_host_first(cap, monkeypatch,
                                                         finds):
    """Breadth-first round-robins across every host that fits, as
    upstream's: five candidates come from five hosts even when the hosts
    that fit are few and far between (one root in forty here), from
    memory as from the SQL engine."""
    w = cw.WorldBuilder()
    for i in range(400):
        w.provider('host%d' % i)
        if i % 40 == 0:
            w.inventory('host%d' % i, 'MEMORY_MB', 1000)
            for k in range(2):
                w.provider('numa%d_%d' % (i, k), parent='host%d' % i)
                w.inventory('numa%d_%d' % (i, k), 'VCPU', 4)
    names = {rp['uuid']: rp['name'] for rp in w.rps}
    overrides = {('placement', 'allocation_candidates_generation_strategy'):
                 'breadth-first'}
    path = '/allocation_candidates?resources=VCPU:1,MEMORY_MB:10'
    if cap == 'limit':
        path += '&limit=5'
    else:
        overrides[('placement', 'max_allocation_candidates')] = 5
    with gabbits.app_over_world(w, overrides) as app:
        got = twr.get(app, path, LATEST)
        assert got == _sql(monkeypatch, app, path, LATEST)
    assert finds['world'] == 1
    hosts = [sorted(names[u] for u in ar['allocations'])[0]
             for ar in got[1]['allocation_requests']]
    assert hosts == ['host0', 'host40', 'host80', 'host120', 'host160']


def test_more_sets_of_classes_than_the_snapshot_names(monkeypatch, finds):
    """A walk reads only the providers with a class asked for, by the
    snapshot's cls column, which names 255 sets of classes: trees whose
    children have 300 sets of two custom classes among 25 (and the same
    after writes, read over the snapshot) answer as the SQL engine."""
    rnd = random.Random(20261126)
    classes = ['CUSTOM_C%d' % i for i in range(25)]
    pairs = list(itertools.combinations(classes, 2))
    rnd.shuffle(pairs)
    world = cw.WorldBuilder()
    children = []
    for i, pair in enumerate(pairs):
        world.provider('root%d' % i)
        world.inventory('root%d' % i, 'VCPU', 4)
        children.append(world.provider('child%d' % i,
                                       parent='root%d' % i)['uuid'])
        for rc in pair:
            world.inventory('child%d' % i, rc, 2)

    def check(count):
        for _ in range(count):
            a, b = rnd.sample(classes, 2)
            path = ('/allocation_candidates?resources=VCPU:1,%s:1,%s:1'
                    '&limit=%d' % (a, b, rnd.choice([1, 3, 50])))
            expected = _sql(monkeypatch, app, path, LATEST)
            assert expected[0] == 200
            assert twr.get(app, path, LATEST) == expected, path

    with gabbits.app_over_world(world) as app:
        check(20)
        cloud = _Cloud(app)
        for child in rnd.sample(children, 20):
            cloud.inventory(child, **dict.fromkeys(rnd.sample(classes, 3), 2))
        check(20)
    assert finds['world'] >= 40


def test_tree_rows_of_scattered_roots_some_changed_since_the_snapshot():
    """World.tree_rows over roots in any order of a walk or a sample --
    one run, scattered, some trees changed since the snapshot, one gone --
    gives each tree's providers together, by id, with only those serving
    a class asked for; as the trees and records say."""
    rnd = random.Random(20261127)
    world = cw.WorldBuilder()
    for i in range(40):
        world.provider('r%d' % i)
        world.inventory('r%d' % i, 'VCPU', 4)
        world.provider('c%d' % i, parent='r%d' % i)
        world.inventory('c%d' % i, 'DISK_GB', 100)
        world.provider('d%d' % i, parent='r%d' % i)
    with gabbits.app_and_engine_over_world(world) as (app, eng):
        cloud = _Cloud(app)
        other = world_mod.World()
        _refresh(other, eng, None)
        roots = sorted(other.roots)
        uuid_of = {rid: other.rps[rid].uuid for rid in roots}
        for root in rnd.sample(roots, 10):
            cloud.inventory(uuid_of[root], VCPU=8, MEMORY_MB=512)
        gone = roots[-1]
        for rid in reversed(other.trees.get(gone)):
            _call(app, 'DELETE', '/resource_providers/' + other.rps[rid].uuid)
        _refresh(other, eng, None)
        assert other._tree_ov, 'no tree changed since the snapshot'
        vcpu = frozenset(other.kinds[other.rps[roots[0]].kind].inv)
        steady = [r for r in roots if r not in other._tree_ov]
        for asked in (roots[3:20], sorted(rnd.sample(roots, 15)),
                      rnd.sample(roots, 15), roots,
                      [steady[2], steady[0], steady[4]]):
            for classes in (None, vcpu):
                ids, kinds, tree_roots = other.tree_rows(asked, classes)
                got = collections.defaultdict(list)
                for rid, k, root in zip(ids, kinds, tree_roots):
                    assert other.rps[rid].root == root
                    assert other.rps[rid].kind == k
                    got[root].append(rid)
                expected = {}
                for root in asked:
                    mine = [rid for rid in other.trees.get(root, ())
                            if classes is None or not classes.isdisjoint(
                                other.rps[rid].inv)]
                    if mine:
                        expected[root] = mine
                assert dict(got) == expected
                # A tree's providers come together.
                assert len(list(itertools.groupby(tree_roots))) == len(got)


@pytest.mark.parametrize('flat', [True, False], ids=['flat', 'nested'])
def test_sole_fast_path_answers_as_the_general_path(flat, monkeypatch):
    """Random worlds without sharing providers, flat or of trees (where
    some trees have two providers with a class asked for, and their batch
    goes the general way): the fast path's answers are the general
    path's, order included, with and without a limit."""
    rnd = random.Random(20261126 + flat)
    used = collections.Counter()
    real_sole = search._sole

    def counting(*args):
        found = real_sole(*args)
        used['fast' if found is not None else 'general'] += 1
        return found

    monkeypatch.setattr(search, '_sole', counting)
    world = twr.glued_world(rnd, 6, flat=flat, sharing=False)
    checked = 0
    with gabbits.app_over_world(world) as app:
        for _ in range(150):
            path, version = diff.random_query(rnd, world)
            if version >= '1.16' and rnd.random() < 0.4:
                path += '&limit=%d' % rnd.choice([1, 2, 3, 1000])
            with monkeypatch.context() as m:
                m.setattr(world_request.Request, 'sole_group', None)
                expected = twr.get(app, path, version)
            got = twr.get(app, path, version)
            assert got == expected, (path, version)
            checked += expected[0] == 200 and bool(
                expected[1]['allocation_requests'])
    assert checked > 30
    assert used['fast'] > (30 if flat else 15)
    assert flat or used['general'] > 10


# -- never stale -----------------------------------------------------------

def _call(app, method, path, body=None, version=LATEST):
    req = webob.Request.blank(path, method=method, headers={
        'x-auth-token': 'admin',
        'openstack-api-version': 'placement %s' % version})
    if body is not None:
        req.body = json.dumps(body).encode()
        req.content_type = 'application/json'
    resp = req.get_response(app)
    assert resp.status_int < 300, (method, path, resp.status, resp.body)
    return json.loads(resp.body) if resp.body else None


class _Cloud:
    """Providers made through the API."""

    def __init__(self, app):
        self.app = app
        self.gen = {}

    def provider(self, name, parent=None):
        rp = str(uuidlib.uuid4())
        body = {'name': name, 'uuid': rp}
        if parent:
            body['parent_provider_uuid'] = parent
        _call(self.app, 'POST', '/resource_providers', body)
        self.gen[rp] = 0
        return rp

    def refresh_gen(self, rp):
        self.gen[rp] = _call(self.app, 'GET', '/resource_providers/' + rp)[
            'generation']

    def inventory(self, rp, **totals):
        self.refresh_gen(rp)
        _call(self.app, 'PUT', '/resource_providers/%s/inventories' % rp, {
            'resource_provider_generation': self.gen[rp],
            'inventories': {rc: {'total': n} for rc, n in totals.items()}})

    def traits(self, rp, *names):
        for name in names:
            _call(self.app, 'PUT', '/traits/' + name)
        self.refresh_gen(rp)
        _call(self.app, 'PUT', '/resource_providers/%s/traits' % rp, {
            'resource_provider_generation': self.gen[rp],
            'traits': list(names)})

    def aggregates(self, rp, *aggs):
        self.refresh_gen(rp)
        _call(self.app, 'PUT', '/resource_providers/%s/aggregates' % rp, {
            'resource_provider_generation': self.gen[rp],
            'aggregates': list(aggs)})

    def allocate(self, consumer, rp, generation=None, **amounts):
        _call(self.app, 'PUT', '/allocations/' + consumer, {
            'allocations': {rp: {'resources': amounts}},
            'project_id': str(uuidlib.uuid4()),
            'user_id': str(uuidlib.uuid4()),
            'consumer_generation': generation, 'consumer_type': 'INSTANCE'})


def _providers(app, query):
    body = _call(app, 'GET', '/allocation_candidates?' + query)
    return sorted(body['provider_summaries'])


def test_writes_through_the_api_are_seen_at_once(monkeypatch):
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        b = cloud.provider('b')
        cloud.inventory(a, VCPU=4)
        cloud.inventory(b, VCPU=2)
        q = 'resources=VCPU:3'
        assert _providers(app, q) == [a]
        with engine.connect() as conn:
            the_world = world_mod.for_connection(conn)
        loads = the_world.loads

        def same_as_sql(query):
            got = twr.get(app, '/allocation_candidates?' + query, LATEST)
            assert got == _sql(monkeypatch, app,
                               '/allocation_candidates?' + query, LATEST)
            return sorted(got[1]['provider_summaries'])

        cloud.inventory(b, VCPU=8)                          # inventory
        assert same_as_sql(q) == sorted([a, b])
        consumer = str(uuidlib.uuid4())
        cloud.allocate(consumer, b, VCPU=6)                 # allocation
        assert same_as_sql(q) == [a]
        _call(app, 'DELETE', '/allocations/' + consumer)    # its removal
        assert same_as_sql(q) == sorted([a, b])
        # The usage of a provider shown before (its summary was rendered
        # once, and must not be served again).
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
        assert same_as_sql(q) == sorted([a, b])
        summaries = twr.get(app, '/allocation_candidates?' + q,
                            LATEST)[1]['provider_summaries']
        assert summaries[a]['resources']['VCPU'] == {'capacity': 4,
                                                     'used': 1}
        cloud.traits(b, 'CUSTOM_FAST')                      # traits
        assert same_as_sql(q + '&required=CUSTOM_FAST') == [b]
        agg = str(uuidlib.uuid4())
        cloud.aggregates(a, agg)                            # aggregates
        assert same_as_sql(q + '&member_of=' + agg) == [a]
        c = cloud.provider('c', parent=a)                   # a new child
        cloud.inventory(c, DISK_GB=10)
        assert same_as_sql('resources=VCPU:1,DISK_GB:5') == sorted([a, c])
        # The trait sets of trees the World keeps follow their providers.
        tree_q = 'resources=VCPU:1,DISK_GB:5&required=CUSTOM_TREE'
        _call(app, 'PUT', '/traits/CUSTOM_TREE')
        assert same_as_sql(tree_q) == []
        cloud.traits(c, 'CUSTOM_TREE')
        assert same_as_sql(tree_q) == sorted([a, c])
        d = cloud.provider('d')                             # re-parented
        cloud.inventory(d, DISK_GB=100)
        _call(app, 'PUT', '/resource_providers/' + c,
              {'name': 'c', 'parent_provider_uuid': d})
        assert same_as_sql('resources=VCPU:1,DISK_GB:5') == []
        assert same_as_sql('resources=DISK_GB:50') == sorted([c, d])
        _call(app, 'DELETE', '/resource_providers/%s/inventories' % d)
        assert same_as_sql('resources=DISK_GB:5') == sorted([c, d])
        _call(app, 'DELETE', '/resource_providers/' + c)   # deleted
        assert same_as_sql('resources=DISK_GB:5') == []
        # All of it read provider by provider, never the whole world.
        assert the_world.loads == loads


def _second_process(engine, ctx):
    """Another process's World over the same database: nothing tells it
    about writes but the change counters."""
    other = world_mod.World()
    _refresh(other, engine, ctx)
    return other


def _refresh(other, engine, ctx):
    """As a request does: a new context (names of custom classes are
    trusted for one request) and a reader connection of the service's
    engine, which the fixture made ``engine``."""
    from placement import context
    from placement.db import api as db_api
    ctx = context.RequestContext(user_id='admin', project_id='admin')
    with db_api.one_statement_reader(ctx) as conn:
        assert conn.engine.url == engine.url
        other.refresh(ctx, conn)


@pytest.fixture
def ctx():
    from placement import context
    return context.RequestContext(user_id='admin', project_id='admin')


def test_another_process_sees_writes(ctx):
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        cloud.inventory(a, VCPU=4)
        other = _second_process(engine, ctx)
        rid = other.by_uuid[a]
        assert other.models[rid].inventory['VCPU'][:3] == (4, 0, 2147483647)
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=3)
        _refresh(other, engine, ctx)
        assert other.models[rid].inventory['VCPU'][:3] == (4, 3, 2147483647)
        assert other.loads == 1
        b = cloud.provider('b')
        _refresh(other, engine, ctx)
        assert b in other.by_uuid and other.loads == 1


def test_a_catch_up_reads_every_chunk_of_the_providers_logged(ctx,
                                                               monkeypatch):
    """A catch-up reads the providers logged since in chunks (their ids
    written into the statements as numbers): each chunk's providers come
    with their inventories, usage, traits and aggregates."""
    monkeypatch.setattr(world_settings, 'CHUNK', 2)
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        rps = [cloud.provider('rp%d' % i) for i in range(5)]
        # Unchanged: fewer changes than half the providers are caught up.
        for i in range(20):
            cloud.provider('other%d' % i)
        other = _second_process(engine, ctx)
        for i, rp in enumerate(rps):
            cloud.inventory(rp, VCPU=4 + i)
        cloud.allocate(str(uuidlib.uuid4()), rps[1], VCPU=2)
        cloud.traits(rps[2], 'CUSTOM_CHUNKED')
        agg = str(uuidlib.uuid4())
        cloud.aggregates(rps[4], agg)
        _refresh(other, engine, ctx)
        assert other.loads == 1
        ids = [other.by_uuid[rp] for rp in rps]
        assert [other.models[rid].inventory['VCPU'][:2] for rid in ids] == [
            (4, 0), (5, 2), (6, 0), (7, 0), (8, 0)]
        assert [sorted(other.models[rid].traits) for rid in ids] == [
            [], [], ['CUSTOM_CHUNKED'], [], []]
        assert [bool(other.rps[rid].aggs) for rid in ids] == [
            False, False, False, False, True]


def test_a_consumer_moved_to_another_provider_frees_the_first(ctx):
    """What nova does on every resize and migration: PUT the consumer's
    allocations on provider B in place of those on A. Another process
    sees A's usage fall (A's generation does not move, so only the
    change capture can tell it)."""
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        b = cloud.provider('b')
        cloud.inventory(a, VCPU=4)
        cloud.inventory(b, VCPU=4)
        consumer = str(uuidlib.uuid4())
        cloud.allocate(consumer, a, VCPU=4)
        other = _second_process(engine, ctx)
        assert other.models[other.by_uuid[a]].inventory['VCPU'][1] == 4
        cloud.allocate(consumer, b, generation=1, VCPU=4)
        _refresh(other, engine, ctx)
        assert other.models[other.by_uuid[a]].inventory['VCPU'][1] == 0
        assert other.models[other.by_uuid[b]].inventory['VCPU'][1] == 4
        assert _providers(app, 'resources=VCPU:4') == [a]


def test_a_renamed_resource_class_is_answered_by_its_new_name(ctx):
    """PUT /resource_classes/{name} (1.2-1.6) renames a custom class:
    every process's world speaks the new name at its next request."""
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        _call(app, 'POST', '/resource_classes', {'name': 'CUSTOM_OLD'},
              version='1.2')
        cloud.inventory(a, CUSTOM_OLD=4)
        other = _second_process(engine, ctx)
        assert _providers(app, 'resources=CUSTOM_OLD:1') == [a]
        _call(app, 'PUT', '/resource_classes/CUSTOM_OLD',
              {'name': 'CUSTOM_NEW'}, version='1.2')
        body = _call(app, 'GET',
                     '/allocation_candidates?resources=CUSTOM_NEW:1')
        assert list(body['provider_summaries'][a]['resources']) == [
            'CUSTOM_NEW']
        _refresh(other, engine, ctx)
        assert list(other.models[other.by_uuid[a]].inventory) == [
            'CUSTOM_NEW']


def test_a_reader_behind_the_change_log_reloads_everything(ctx,
                                                          monkeypatch):
    """Further behind than the log keeps (``changes.KEEP`` per slot), a
    reader loads everything; then it follows the log again."""
    monkeypatch.setattr(changes, 'KEEP', 3)
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        other = _second_process(engine, ctx)
        for total in range(1, 7):
            cloud.inventory(a, VCPU=total)
        _refresh(other, engine, ctx)
        assert other.loads == 2
        rid = other.by_uuid[a]
        assert other.models[rid].inventory['VCPU'][0] == 6
        cloud.inventory(a, VCPU=9)
        _refresh(other, engine, ctx)
        assert other.loads == 2
        assert other.models[rid].inventory['VCPU'][0] == 9


def test_a_log_pruned_between_the_two_reads_is_noticed(ctx):
    """A writer may prune the log between a reader's read of the counters
    and its read of the log: the sequence numbers it finds then have a
    gap, and it loads everything rather than miss a change."""
    import sqlalchemy as sa
    from placement.db import models
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        b = cloud.provider('b')
        other = _second_process(engine, ctx)
        cloud.inventory(a, VCPU=2)
        cloud.inventory(b, VCPU=3)
        with engine.begin() as conn:
            rid = conn.execute(sa.select(models.RP.c.id).where(
                models.RP.c.uuid == a)).scalar()
            # What a prune would leave: the oldest of a's rows gone.
            first = conn.execute(sa.select(sa.func.min(
                models.CHANGE.c.seq)).where(
                models.CHANGE.c.slot == changes.slot_of(rid),
                models.CHANGE.c.seq > other.slots[changes.slot_of(rid)][0])
            ).scalar()
            conn.execute(models.CHANGE.delete().where(
                models.CHANGE.c.slot == changes.slot_of(rid),
                models.CHANGE.c.seq == first))
        _refresh(other, engine, ctx)
        assert other.loads == 2
        assert other.models[rid].inventory['VCPU'][0] == 2
        assert other.models[other.by_uuid[b]].inventory['VCPU'][0] == 3


def test_a_slot_row_missing_is_made_by_the_next_write(ctx):
    """A database whose change table lacks a slot (created when there were
    fewer): the write bumping it makes the row (the one-statement bump of
    PostgreSQL and MySQL finds nothing to bump) and is still seen."""
    import sqlalchemy as sa
    from placement.db import models
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        slot = models.CHANGE_SLOT
        with engine.begin() as conn:
            rid = conn.execute(sa.select(models.RP.c.id).where(
                models.RP.c.uuid == a)).scalar()
            conn.execute(slot.delete().where(
                slot.c.slot == changes.slot_of(rid)))
            conn.execute(models.CHANGE.delete().where(
                models.CHANGE.c.slot == changes.slot_of(rid)))
        other = _second_process(engine, ctx)
        cloud.inventory(a, VCPU=5)
        _refresh(other, engine, ctx)
        assert other.models[rid].inventory['VCPU'][0] == 5
        with engine.connect() as conn:
            assert conn.execute(sa.select(slot.c.seq).where(
                slot.c.slot == changes.slot_of(rid))).scalar() == 1
            logged = conn.execute(sa.select(
                models.CHANGE.c.resource_provider_id).where(
                models.CHANGE.c.slot == changes.slot_of(rid),
                models.CHANGE.c.seq == 1)).scalars().all()
        assert logged == [rid]


# -- a fair sample ---------------------------------------------------------

def _randomized_picks(world, count):
    """The providers picked, in order, by each of ``count`` answers to
    VCPU:2 with limit=3 and randomize_allocation_candidates on."""
    overrides = {('placement', 'randomize_allocation_candidates'): True}
    with gabbits.app_over_world(world, overrides) as app:
        for _ in range(count):
            status, body = twr.get(
                app, '/allocation_candidates?resources=VCPU:2&limit=3',
                LATEST)
            assert status == 200
            yield [u for ar in body['allocation_requests']
                   for u in ar['allocations']]


@pytest.mark.parametrize('nested', [False, True])
def test_randomized_limit_samples_every_fitting_provider(nested):
    w = cw.WorldBuilder()
    fitting = set()
    for i in range(40):
        name = 'cn%d' % i
        w.provider(name)
        if nested:
            w.provider(name + '_numa', parent=name)
        holder = name + '_numa' if nested else name
        w.inventory(holder, 'VCPU', 8 if i % 4 else 1)
        if i % 4:
            fitting.add(holder)
    seen = collections.Counter()
    for picks in _randomized_picks(w, 150):
        assert len(picks) == 3
        seen.update(picks)
    names = {r['uuid']: r['name'] for r in w.rps}
    assert {names[u] for u in seen} == fitting
    # 450 picks over 30 providers: each about 15 times.
    assert min(seen.values()) >= 3


def test_randomized_limit_comes_in_every_order_alike():
    """Four hosts fit, limit=3: each of the 24 ordered picks of three
    comes about as often (the walk takes the roots in a uniformly random
    order and keeps it: no shuffle after). 2,400 answers, about 100
    each: the chi-square statistic (23 degrees of freedom, sd 6.8)
    within five of its standard deviations of its mean."""
    w = cw.WorldBuilder()
    for i in range(4):
        w.provider('cn%d' % i)
        w.inventory('cn%d' % i, 'VCPU', 8)
    names = {r['uuid']: r['name'] for r in w.rps}
    orders = collections.Counter(tuple(map(names.get, picks))
                                 for picks in _randomized_picks(w, 2400))
    assert len(orders) == 24
    stat = sum((n - 100) ** 2 / 100 for n in orders.values())
    assert abs(stat - 23) < 5 * (2 * 23) ** 0.5, stat


def test_sql_by_hand_is_seen_and_reload_loads_everything(tmp_path):
    """SQL run by hand is counted by the triggers like any write: the next
    answer has it. ``placement-manage reload`` still makes every process
    load the whole world again (a new epoch)."""
    from placement.tests.functional import test_commands
    import sqlalchemy as sa
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        a = cloud.provider('a')
        cloud.inventory(a, VCPU=4)
        q = 'resources=VCPU:3'
        assert _providers(app, q) == [a]
        with engine.begin() as conn:
            conn.execute(sa.text('UPDATE inventories SET total = 2'))
        assert _providers(app, q) == []
        with engine.begin() as conn:
            conn.execute(sa.text('UPDATE inventories SET total = 3'))
        assert _providers(app, q) == [a]
        with engine.connect() as conn:
            the_world = world_mod.for_connection(conn)
        loads = the_world.loads
        conf_dir = tmp_path / 'etc'
        conf_dir.mkdir()
        (conf_dir / 'placement.conf').write_text(
            '[placement_database]\nconnection = %s\n'
            % engine.url.render_as_string(hide_password=False))
        result = test_commands.manage(conf_dir, 'reload')
        assert result.returncode == 0, result.stderr
        assert 'next request' in result.stdout
        assert _providers(app, q) == [a]
        assert the_world.loads == loads + 1


@pytest.mark.parametrize('odd', ['short-uuid', 'ünïcode-%028d' % 7,
                                 'with"quote\\back-%020d' % 7])
def test_any_uuid_sql_by_hand_wrote_is_answered_as_written(odd,
                                                           monkeypatch):
    """A provider uuid is a string column: whatever SQL by hand put
    there, read in a full load (the snapshot's columns) or again after a
    write, the answer names it exactly as the SQL engine does (not
    padded, no 500)."""
    import sqlalchemy as sa
    world = cw.WorldBuilder()
    world.provider('cn1')
    world.inventory('cn1', 'VCPU', 8)
    world.provider('numa', parent='cn1')
    world.inventory('numa', 'MEMORY_MB', 1024)
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        with engine.begin() as conn:
            conn.execute(sa.text(
                "UPDATE resource_providers SET uuid = :u WHERE name = 'cn1'"),
                {'u': odd})
        path = '/allocation_candidates?resources=VCPU:1,MEMORY_MB:8'
        for _ in range(2):
            status, body = twr.get(app, path, LATEST)
            assert status == 200
            assert (status, body) == _sql(monkeypatch, app, path, LATEST)
            assert odd in body['provider_summaries']
            numa = [s for u, s in body['provider_summaries'].items()
                    if u != odd]
            assert numa[0]['parent_provider_uuid'] == odd
            # Once more after a write reads the tree again.
            with engine.begin() as conn:
                conn.execute(sa.text('UPDATE inventories SET reserved = 1'))


def test_an_unknown_name_after_an_empty_group(monkeypatch):
    """Upstream's order: a group no provider can serve answers an empty
    200 before a later group's unknown class is found out; both engines
    read the trees to tell (the SQL engine's providers, as any other)."""
    world = cw.WorldBuilder()
    world.provider('cn1')
    world.inventory('cn1', 'VCPU', 8)
    world.provider('numa', parent='cn1')
    world.inventory('numa', 'MEMORY_MB', 64)
    with gabbits.app_over_world(world) as app:
        for query, status in (('VCPU:100&resources1=CUSTOM_NONE:1', 200),
                              ('VCPU:1&resources1=CUSTOM_NONE:1', 400)):
            path = '/allocation_candidates?resources=' + query
            got = twr.get(app, path, LATEST)
            assert got[0] == status
            assert got == _sql(monkeypatch, app, path, LATEST)


def test_a_parent_sql_by_hand_put_in_another_tree(monkeypatch):
    """A provider whose root SQL by hand changed without its parent's:
    its tree is its root's (the column), its parent another tree's; the
    summaries name that parent, as the SQL engine's do."""
    import sqlalchemy as sa
    world = cw.WorldBuilder()
    for host in ('cn1', 'cn2'):
        world.provider(host)
        world.inventory(host, 'VCPU', 8)
        world.provider(host + '-numa', parent=host)
        world.inventory(host + '-numa', 'MEMORY_MB', 1024)
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        path = '/allocation_candidates?resources=VCPU:1,MEMORY_MB:8'
        for _ in range(2):
            with engine.begin() as conn:
                conn.execute(sa.text(
                    "UPDATE resource_providers SET root_provider_id = "
                    "(SELECT id FROM resource_providers WHERE name = 'cn2')"
                    " WHERE name = 'cn1-numa'"))
            status, body = twr.get(app, path, LATEST)
            assert status == 200 and body['provider_summaries']
            assert (status, body) == _sql(monkeypatch, app, path, LATEST)


@pytest.mark.parametrize('use_world', [True, False])
def test_each_group_is_logged_at_debug(use_world, monkeypatch, caplog):
    """An operator following a request at DEBUG sees, per request group,
    how many providers matched it, from either engine."""
    w = cw.WorldBuilder()
    for name in ('cn1', 'cn2'):
        w.provider(name)
        w.inventory(name, 'VCPU', 8)
    w.provider('small')
    w.inventory('small', 'VCPU', 1)
    monkeypatch.setattr(engine, 'USE_WORLD', use_world)
    caplog.set_level('DEBUG', logger='placement.objects.candidates.names')
    with gabbits.app_over_world(w) as app:
        status, _body = twr.get(
            app, '/allocation_candidates?resources=VCPU:2'
            '&resources1=VCPU:1&group_policy=none', LATEST)
    assert status == 200
    lines = [r.getMessage() for r in caplog.records
             if 'matched group' in r.getMessage()]
    assert any(line.startswith("2 providers under 2 trees matched group ''")
               for line in lines), lines
    assert any(line.startswith("3 providers under 3 trees matched group "
                               "'1'") for line in lines), lines


def test_a_tree_searched_is_searched_again_once_it_changes(monkeypatch):
    """What the combiner finds under an anchor is kept per request
    (World.searches) until the anchor's tree changes: asked again, only
    the trees written since are searched, and the answer is the SQL
    engine's. A request with sharing providers keeps none."""
    from placement.objects.candidates import combine
    searched = []
    real = combine._Search.run

    def run(self, anchor):
        searched.append(anchor)
        return real(self, anchor)

    monkeypatch.setattr(combine._Search, 'run', run)
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (app,
                                                                   engine):
        cloud = _Cloud(app)
        _call(app, 'PUT', '/traits/CUSTOM_NUMA')
        hosts = {}
        for host in ('a', 'b'):
            root = cloud.provider(host)
            cloud.inventory(root, VCPU=4)
            for n in (0, 1):
                numa = cloud.provider('%s-numa%d' % (host, n), parent=root)
                cloud.traits(numa, 'CUSTOM_NUMA')
                gpu = cloud.provider('%s-gpu%d' % (host, n), parent=numa)
                cloud.inventory(gpu, VGPU=1)
                nic = cloud.provider('%s-nic%d' % (host, n), parent=numa)
                cloud.inventory(nic, SRIOV_NET_VF=2)
                hosts[host, n] = numa, gpu, nic
            hosts[host] = root
        with engine.connect() as conn:
            the_world = world_mod.for_connection(conn)
        query = ('resources=VCPU:1&resources_GPU=VGPU:1'
                 '&resources_NIC=SRIOV_NET_VF:1&required_NUMA=CUSTOM_NUMA'
                 '&same_subtree=_GPU,_NIC,_NUMA&group_policy=none')

        def searched_for(q=query):
            """The hosts searched for ``q``, its answer the SQL one's."""
            path = '/allocation_candidates?' + q
            del searched[:]
            got = twr.get(app, path, LATEST)
            mine = list(searched)
            assert got == _sql(monkeypatch, app, path, LATEST)
            names = {the_world.by_uuid[hosts[h]]: h for h in ('a', 'b')}
            return sorted(names[root] for root in mine), len(
                got[1]['allocation_requests'])

        assert searched_for() == (['a', 'b'], 4)
        assert searched_for() == ([], 4)                # kept
        # Each write searches its tree again, and only it.
        numa, gpu, nic = hosts['a', 0]
        cloud.consumers = {gpu: str(uuidlib.uuid4())}
        cloud.allocate(cloud.consumers[gpu], gpu, VGPU=1)   # allocation
        assert searched_for() == (['a'], 3)
        assert searched_for() == ([], 3)
        numa, gpu, nic = hosts['b', 1]
        cloud.traits(numa)                                  # trait gone
        assert searched_for() == (['b'], 2)
        numa, gpu, nic = hosts['a', 1]
        cloud.inventory(nic, SRIOV_NET_VF=1)                # inventory
        assert searched_for() == (['a'], 2)
        _call(app, 'DELETE', '/resource_providers/%s/inventories' % gpu)
        _call(app, 'DELETE', '/resource_providers/' + gpu)  # provider
        # Host a has no GPU free now: no anchor, nothing searched.
        assert searched_for() == ([], 1)
        numa, gpu, nic = hosts['a', 0]
        _call(app, 'DELETE', '/allocations/' + cloud.consumers[gpu])
        assert searched_for() == (['a'], 2)
        # A limit reads what is kept; another request searches for itself.
        assert searched_for(query + '&limit=1') == ([], 1)
        assert searched_for(query.replace('VCPU:1', 'VCPU:2')) == (
            ['a', 'b'], 2)
        # The unnumbered group's traits from the tree (no sharing
        # provider in the world) or from the providers picked (some).
        tree_traits = query + '&required=CUSTOM_NUMA'
        assert searched_for(tree_traits)[0] == ['a', 'b']
        # A sharing provider: kept as long as it serves no group, then
        # every search runs.
        shared = cloud.provider('shared')
        cloud.inventory(shared, DISK_GB=100)
        cloud.refresh_gen(shared)
        _call(app, 'PUT', '/resource_providers/%s/traits' % shared, {
            'resource_provider_generation': cloud.gen[shared],
            'traits': ['MISC_SHARES_VIA_AGGREGATE']})
        assert searched_for() == (['a', 'b'], 2)
        assert searched_for() == ([], 2)
        searched_for(tree_traits)
        cloud.inventory(shared, DISK_GB=100, VCPU=8)
        assert searched_for() == (['a', 'b'], 2)
        assert searched_for() == (['a', 'b'], 2)
