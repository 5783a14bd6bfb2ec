"""Flat worlds: one statement must answer what the general search does.

In a world without child providers or sharing providers, a request with
only the unnumbered group is answered by one statement
(``gather.flat_answer``) instead of the windowed queries and
the combiner's search. Random flat worlds and random queries (the
differential test's generators) are answered both ways on the database
under test; the bodies must be identical, order included.
"""
import json
import random

import pytest
import sqlalchemy as sa
import webob

from placement.objects.candidates import gather
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidate_windows_random as twr
from placement.tests.functional import test_candidates_differential as diff


@pytest.fixture(autouse=True)
def sql_gatherer(monkeypatch):
    """These tests are about the SQL gatherer (gather.py), the engine of
    databases that do not count their changes."""
    monkeypatch.setattr(gather, 'USE_WORLD', False)


def _flat_answers(monkeypatch):
    """The list of what gather.flat_answer returns, call by call."""
    answers = []
    real_flat = gather.flat_answer

    def recording(*args):
        answers.append(real_flat(*args))
        return answers[-1]

    monkeypatch.setattr(gather, 'flat_answer', recording)
    return answers


def test_flat_statement_answers_as_the_search(monkeypatch):
    rnd = random.Random(20261123)
    answers = _flat_answers(monkeypatch)
    checked = 0
    world = twr.glued_world(rnd, 6, flat=True)
    with gabbits.app_over_world(world) as app:
        for _ in range(150):
            path, version = diff.random_query(rnd, world)
            with monkeypatch.context() as m:
                m.setattr(gather, 'flat_shaped', lambda *args: False)
                expected = twr.get(app, path, version)
            got = twr.get(app, path, version)
            assert got == expected, (path, version)
            checked += expected[0] == 200 and bool(
                expected[1]['allocation_requests'])
    assert checked > 30
    assert sum(a is not None for a in answers) > 30


@pytest.mark.parametrize('cap', ['limit', 'max_allocation_candidates'])
def test_flat_statement_under_a_limit_answers_as_the_search(cap,
                                                           monkeypatch):
    """With a limit (nova always sends one) or max_allocation_candidates,
    the flat statement answers when the search's first window would hold
    every root: its first candidates must be the search's, in order."""
    rnd = random.Random(20261124)
    answers = _flat_answers(monkeypatch)
    limits = [1, 2, 3, 5, 1000]
    checked = 0
    world = twr.glued_world(rnd, 6, flat=True)
    for n in limits if cap == 'max_allocation_candidates' else [None]:
        overrides = ({('placement', 'max_allocation_candidates'): n}
                     if n is not None else None)
        with gabbits.app_over_world(world, overrides) as app:
            for _ in range(60):
                path, version = diff.random_query(rnd, world)
                if cap == 'limit':
                    if version < '1.16':
                        version = '1.16'
                    path += '&limit=%d' % rnd.choice(limits)
                with monkeypatch.context() as m:
                    m.setattr(gather, 'flat_shaped', lambda *args: False)
                    expected = twr.get(app, path, version)
                # However many ids the search saw: the flat statement.
                monkeypatch.setitem(gather._SPAN, 'ids', 1)
                got = twr.get(app, path, version)
                assert got == expected, (path, version)
                checked += expected[0] == 200 and len(
                    expected[1]['allocation_requests']) > 1
    assert checked > 20
    assert sum(a is not None for a in answers) > 20


def test_a_limit_uses_the_flat_statement_when_one_window_holds_all():
    """The span of provider ids decides: the flat statement when the
    search's first window would hold every root, else the search."""
    w = cw.WorldBuilder()
    for i in range(3):
        w.provider('cn%d' % i)
        w.inventory('cn%d' % i, 'VCPU', 8)
    with pytest.MonkeyPatch.context() as m:
        answers = _flat_answers(m)
        with gabbits.app_over_world(w) as app:
            path = '/allocation_candidates?resources=VCPU:1&limit=2'
            m.setitem(gather._SPAN, 'ids', None)
            first = twr.get(app, path, '1.39')     # span unknown: search
            assert answers == []
            assert gather._SPAN['ids'] == 3        # the search saw it
            second = twr.get(app, path, '1.39')
            assert len(answers) == 1 and answers[0] is not None
            m.setitem(gather._SPAN, 'ids', 10 ** 9)   # too wide: search
            third = twr.get(app, path, '1.39')
            assert len(answers) == 1
            assert gather._SPAN['ids'] == 3
    assert first == second == third
    assert len(first[1]['allocation_requests']) == 2


BOTH = 'b0b0b0b0-0000-0000-0000-000000000001'

_FILTER_CASES = [
    # Every class must come from the one provider.
    ('resources=VCPU:2,DISK_GB:10', ['both']),
    ('resources=VCPU:2&required=CUSTOM_A', ['both']),
    ('resources=VCPU:2&required=!CUSTOM_A', ['vcpu_only']),
    ('resources=VCPU:2&member_of=!%s' % diff.AGGS[0], ['vcpu_only']),
    ('resources=VCPU:2&member_of=%s' % diff.AGGS[0], ['both']),
    ('resources=VCPU:2&root_required=CUSTOM_A', ['both']),
    ('resources=VCPU:2&root_required=!CUSTOM_A', ['vcpu_only']),
    # Usage counts: 'both' has 6 of 8 VCPU used.
    ('resources=VCPU:3', ['vcpu_only']),
    ('resources=DISK_GB:10', ['both']),
    # Aggregates are named by uuid; unknown ones match no provider.
    ('resources=VCPU:2&member_of=in:%s,%s' % (diff.AGGS[1], diff.AGGS[0]),
     ['both']),
    ('resources=VCPU:2&member_of=%s' % diff.AGGS[1], []),
    ('resources=VCPU:2&member_of=!%s' % diff.AGGS[1], ['both', 'vcpu_only']),
    # in_tree names a provider, each its own tree's root here.
    ('resources=VCPU:2&in_tree=%s' % BOTH, ['both']),
    ('resources=VCPU:2&in_tree=%s' % diff.AGGS[2], []),
]


# (ids without underscores: gabbi's pytest plugin reads those as suites)
@pytest.mark.parametrize('query, expected', _FILTER_CASES, ids=[
    'case%d' % i for i in range(len(_FILTER_CASES))])
def test_flat_statement_filters(query, expected):
    w = cw.WorldBuilder()
    w.provider('both', uuid=BOTH)
    w.inventory('both', 'VCPU', 8)
    w.inventory('both', 'DISK_GB', 100)
    w.usage('both', 'VCPU', 6)
    w.trait('both', 'CUSTOM_A')
    w.aggregate('both', diff.AGGS[0])
    w.provider('vcpu_only')
    w.inventory('vcpu_only', 'VCPU', 8)
    with gabbits.app_over_world(w) as app:
        status, body = twr.get(app, '/allocation_candidates?' + query,
                               '1.39')
    assert status == 200
    uuids = {rp['uuid']: rp['name'] for rp in w.rps}
    got = [sorted(uuids[u] for u in ar['allocations'])
           for ar in body['allocation_requests']]
    assert got == [[name] for name in expected]
    # Summaries show every class of the providers, with usage.
    for uuid, summary in body['provider_summaries'].items():
        if uuids[uuid] == 'both':
            assert summary['resources'] == {
                'VCPU': {'capacity': 8, 'used': 6},
                'DISK_GB': {'capacity': 100, 'used': 0}}
            assert summary['traits'] == ['CUSTOM_A']


@pytest.mark.parametrize('kind', ['child', 'sharing'])
def test_a_child_or_a_sharing_provider_makes_the_world_not_flat(
        kind, monkeypatch):
    """The flat statement says so itself, and the search answers."""
    answers = _flat_answers(monkeypatch)
    w = cw.WorldBuilder()
    w.provider('cn')
    w.inventory('cn', 'VCPU', 8)
    if kind == 'child':
        w.provider('numa', parent='cn')
        w.inventory('numa', 'MEMORY_MB', 1024)
        query = 'resources=VCPU:1,MEMORY_MB:512'
        expected = [['cn', 'numa']]
    else:
        w.inventory('cn', 'MEMORY_MB', 1024)
        w.aggregate('cn', diff.AGGS[0])
        w.provider('disk')
        w.inventory('disk', 'DISK_GB', 100)
        w.trait('disk', 'MISC_SHARES_VIA_AGGREGATE')
        w.aggregate('disk', diff.AGGS[0])
        query = 'resources=VCPU:1,DISK_GB:10'
        expected = [['cn', 'disk']]
    with gabbits.app_over_world(w) as app:
        status, body = twr.get(app, '/allocation_candidates?' + query,
                               '1.39')
    assert status == 200
    assert answers == [None]
    names = {rp['uuid']: rp['name'] for rp in w.rps}
    order = [rp['name'] for rp in w.rps]
    got = [sorted((names[u] for u in ar['allocations']), key=order.index)
           for ar in body['allocation_requests']]
    assert got == expected


NEW_AGG = 'b0b0b0b0-0000-0000-0000-0000000000a1'


def _names(w, body):
    uuids = {rp['uuid']: rp['name'] for rp in w.rps}
    return sorted(uuids[u] for ar in body['allocation_requests']
                  for u in ar['allocations'])


def test_an_aggregate_that_appears_after_a_query_named_it():
    """Aggregate ids are remembered once read; a uuid that did not exist
    yet is not: the next query finds the aggregate a provider just
    joined."""
    w = cw.WorldBuilder()
    w.provider('cn', uuid=BOTH)
    w.inventory('cn', 'VCPU', 8)
    member = '/allocation_candidates?resources=VCPU:1&member_of=' + NEW_AGG
    not_member = ('/allocation_candidates?resources=VCPU:1&member_of=!'
                  + NEW_AGG)
    with gabbits.app_over_world(w) as app:
        assert _names(w, twr.get(app, member, '1.39')[1]) == []
        assert _names(w, twr.get(app, not_member, '1.39')[1]) == ['cn']
        generation = twr.get(app, '/resource_providers/' + BOTH,
                             '1.39')[1]['generation']
        resp = webob.Request.blank(
            '/resource_providers/%s/aggregates' % BOTH, method='PUT',
            headers={'x-auth-token': 'admin', 'content-type':
                     'application/json',
                     'openstack-api-version': 'placement 1.39'},
            body=json.dumps({'aggregates': [NEW_AGG],
                             'resource_provider_generation': generation,
                             }).encode(),
        ).get_response(app)
        assert resp.status_int == 200, resp.body
        assert _names(w, twr.get(app, member, '1.39')[1]) == ['cn']
        assert _names(w, twr.get(app, not_member, '1.39')[1]) == []


def test_aggregate_ids_are_read_once():
    """The flat statement filters on aggregate ids (placement_aggregates is
    too small ever to be analyzed; a join to it misled PostgreSQL's
    planner), read the first time a uuid is named and then remembered."""
    w = cw.WorldBuilder()
    w.provider('cn', uuid=BOTH)
    w.inventory('cn', 'VCPU', 8)
    w.aggregate('cn', diff.AGGS[0])
    w.provider('other')
    w.inventory('other', 'VCPU', 8)
    w.aggregate('other', diff.AGGS[1])
    w.aggregate('other', diff.AGGS[2])
    query = ('/allocation_candidates?resources=VCPU:1&member_of=in:%s,%s'
             '&member_of=!%s' % (diff.AGGS[0], diff.AGGS[2], diff.AGGS[1]))
    reads = []

    def record(conn, cursor, statement, params, context, executemany):
        reads.append('placement_aggregates' in statement)

    with gabbits.app_and_engine_over_world(w) as (app, engine):
        sa.event.listen(engine, 'before_cursor_execute', record)
        try:
            for _ in range(3):
                assert _names(w, twr.get(app, query, '1.39')[1]) == ['cn']
                reads.append('end')
        finally:
            sa.event.remove(engine, 'before_cursor_execute', record)
    first, second, third = ' '.join(map(str, reads)).split('end')[:3]
    assert first.count('True') == 1
    assert 'True' not in second + third


def test_aggregate_uuids_in_another_case_name_no_aggregate(monkeypatch):
    """member_of uuids are matched exactly, as upstream does on every
    database, MySQL included (whose collations would ignore case: the
    flat statement's join by uuid once matched them there)."""
    w = cw.WorldBuilder()
    w.provider('cn', uuid=BOTH)
    w.inventory('cn', 'VCPU', 8)
    w.aggregate('cn', diff.AGGS[0])
    upper = diff.AGGS[0].upper()
    queries = ['/allocation_candidates?resources=VCPU:1&member_of=' + upper,
               '/allocation_candidates?resources=VCPU:1&member_of=!' + upper]
    with gabbits.app_over_world(w) as app:
        got = [twr.get(app, q, '1.39') for q in queries]
        with monkeypatch.context() as m:
            m.setattr(gather, 'flat_shaped', lambda *args: False)
            expected = [twr.get(app, q, '1.39') for q in queries]
    assert got == expected
    assert [_names(w, body) for _status, body in got] == [[], ['cn']]


def test_capacities_with_awkward_ratios_are_pythons(monkeypatch):
    """Capacity is int((total - reserved) * allocation_ratio) in Python's
    floating point, as upstream computes it; on PostgreSQL the flat
    statement computes it in the database. Ratios with no exact binary
    form, totals that land next to integers: the summaries must hold
    Python's numbers, on every path."""
    rnd = random.Random(7)
    ratios = [0.9, 1.1, 1.3, 0.7, 2.2, 3.3333333, 0.1, 16.0, 1.15, 0.35]
    w = cw.WorldBuilder()
    expected = {}
    for i in range(60):
        row = w.provider('cn%d' % i)
        total = rnd.choice([10, 20, 30, 100, 7, 1000, 3, rnd.randint(1,
                                                                     5000)])
        reserved = rnd.choice([0, 0, 1, total // 3])
        ratio = rnd.choice(ratios)
        w.inventory('cn%d' % i, 'VCPU', total, reserved=reserved,
                    allocation_ratio=ratio)
        capacity = int((total - reserved) * ratio)
        if capacity >= 1:
            expected[row['uuid']] = capacity
    path = '/allocation_candidates?resources=VCPU:1'
    answers = _flat_answers(monkeypatch)
    with gabbits.app_over_world(w) as app:
        got = twr.get(app, path, '1.39')
        with monkeypatch.context() as m:
            m.setattr(gather, 'flat_shaped', lambda *args: False)
            searched = twr.get(app, path, '1.39')
    assert answers and answers[0] is not None      # the flat statement
    capacities = {rp: s['resources']['VCPU']['capacity']
                  for rp, s in got[1]['provider_summaries'].items()}
    assert capacities == expected
    assert got == searched
