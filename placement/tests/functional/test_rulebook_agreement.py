"""One rulebook: the four judges of a request answer every random world
alike (issue 48).

The judges are the world engine (candidates/world/ and search.py), the
SQL engine (candidates/sql.py), explain (GET /ops/explain/
allocation_candidates) and the capacity report (GET /ops/capacity). Each
world is the differential test's (trees, grandchildren, sharing
providers, usage, traits, aggregates; a quarter flat, a quarter without
sharing providers), loaded by the world engine once, then two to four of
its inventories are rewritten by SQL with rows the API never writes:
step_size 0 or negative, min_unit above max_unit, reserved above total,
an allocation_ratio of 0 or below, and ratios MySQL's FLOAT column rounds
(one row per world is 0.9 of 10, 8.99999976 there, with usage raised by
SQL to 6, 7 or 8: used + amount = 9 fits elsewhere, not on MySQL). The
world engine must see those writes (the change triggers count them).
Then, on that same database state, for random queries (every parameter
the microversion allows: resources, required and forbidden traits,
member_of with ``in:`` and ``!``, numbered groups, group_policy,
in_tree, root_required, same_subtree) and a probe per odd row (its class
alone, of an amount the row decides):

1. the world engine and the SQL engine give the same answer (status and
   errors, or the same allocation requests, order aside, and the same
   provider summaries);
2. explain agrees with the answer (test_explain_agreement's checks: the
   providers it keeps are exactly those the answer uses, its candidate
   count is the answer's, its counts add up);
3. the capacity report (the query at the newest microversion, as it
   reads it) agrees with the answer at the newest microversion. A tree's
   ``fits`` counts copies anchored in the tree, and a copy is a
   candidate, so: every tree whose own (not sharing) providers serve a
   candidate fits at least one; every tree said to fit is such a tree
   or one a candidate made only of sharing providers may stand under
   (a tree sharing an aggregate with each of them, whose root has the
   root_required traits); each such candidate has a tree said to fit
   under it; ``total`` is 0 exactly when there is no candidate; a bad
   query is refused by both (a bad name after a group with no candidates
   is no candidate, names.resolve, and so nothing fits).

A disagreement is reported as its smallest case: seed, world (rows as
they are in the database) and query, enough to rebuild it. The number
of comparisons made is printed (``-rP`` shows it) and recorded as the
test's ``comparisons`` property (JUnit XML).

Several worlds share one database, emptied between them: a new database
each would cost most of the time on MariaDB. The database is SQLite
unless ``PLACEMENT_TEST_DB_URL`` names a server; ``PLACEMENT_RULEBOOK_
WORLDS`` sets how many worlds (default 20) and ``PLACEMENT_RULEBOOK_SEED``
the first seed.
"""
import collections
import contextlib
import json
import os
import random
import types
import uuid as uuidlib

import pytest
import sqlalchemy as sa
import webob

from placement.db import models
from placement.objects.candidates import engine
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidates_differential as diff
from placement.tests.functional.test_candidates_world import (  # noqa: F401
    finds)
from placement.tests.functional import test_explain_agreement as explain

WORLDS = int(os.environ.get('PLACEMENT_RULEBOOK_WORLDS', '20'))
QUERIES_PER_WORLD = 4
SEED = int(os.environ.get('PLACEMENT_RULEBOOK_SEED', '20261129'))
NEWEST = '1.39'
PROBE_VERSIONS = ['1.39', '1.36', '1.29', '1.25', '1.17', '1.10']

FLOAT_EDGE = 'ratio 0.9 of 10'
# What SQL by hand writes over a row: {column: value}, or a function of
# the row for values relative to it.
ODD = {
    'step_size 0': {'step_size': 0},
    'step_size -2': {'step_size': -2},
    'step_size 2': {'step_size': 2},
    'min_unit > max_unit': {'min_unit': 3, 'max_unit': 1},
    'reserved > total': lambda row: {'reserved': row['total'] + 2},
    'ratio 0': {'allocation_ratio': 0.0},
    'ratio -1.5': {'allocation_ratio': -1.5},
    # 10 * 0.9 is 9.0 as a double, 8.99999976 from MySQL's FLOAT; usage
    # is raised to 6, 7 or 8 (World.edges) so that 1 to 3 more is at
    # the edge.
    FLOAT_EDGE: {'total': 10, 'reserved': 0, 'max_unit': 10,
                 'allocation_ratio': 0.9},
    'ratio 1.1': {'allocation_ratio': 1.1},
}


def _get(app, path, version):
    """(status, body), with what may differ between two equal answers
    taken out: request ids, the order of allocation requests and of
    summary traits."""
    resp = webob.Request.blank(path, headers={
        'x-auth-token': 'admin', 'accept': 'application/json',
        'openstack-api-version': 'placement %s' % version,
    }).get_response(app)
    body = json.loads(resp.body)
    for error in body.get('errors', ()):
        error.pop('request_id', None)
    if 'allocation_requests' in body:
        body['allocation_requests'].sort(
            key=lambda ar: json.dumps(ar, sort_keys=True))
    for summary in body.get('provider_summaries', {}).values():
        summary.get('traits', []).sort()
    return resp.status_int, body


class World:
    """A random world and the odd rows written over it, as the database
    holds them; what the capacity check needs to know of its trees."""

    def __init__(self, seed):
        self.seed = seed
        self.rnd = random.Random(seed)
        # Some flat, some without sharing providers: the world engine's
        # fast path (search._sole) and the capacity report's closed form.
        shape = seed % 4
        self.builder = diff.random_world(self.rnd, flat=shape == 1,
                                         sharing=shape != 2)
        # The inventories as the database holds them once rewritten.
        self.rows = [dict(inv) for inv in self.builder.inv]
        self.odd = []       # (provider name, class, kind)
        self._odd_rows = []
        # The first at the FLOAT edge (rarely met by chance), the others
        # of any kind.
        for n, inv in enumerate(self.rnd.sample(
                self.rows, min(len(self.rows), self.rnd.randint(2, 4)))):
            kind = self.rnd.choice(sorted(ODD)) if n else FLOAT_EDGE
            change = ODD[kind]
            inv.update(change(inv) if callable(change) else change)
            name = self._row(inv['resource_provider_id'])['name']
            self.odd.append((name, inv['resource_class'], kind))
            self._odd_rows.append(inv)
        used = collections.Counter()
        for rp, rc, amount in self.builder.alloc:
            used[(rp, rc)] += amount
        # (provider id, class, usage added by SQL, usage then)
        self.edges = []
        for inv in self.rows:
            key = (inv['resource_provider_id'], inv['resource_class'])
            if inv['allocation_ratio'] == 0.9:
                then = max(used[key], self.rnd.choice([6, 7, 8]))
                self.edges.append(key + (then - used[key], then))
        rows = self.builder.rps
        self.by_id = {r['id']: r for r in rows}
        self.root = {r['uuid']: self.by_id[r['root_provider_id']]['uuid']
                     for r in rows}
        self.sharing = {self.by_id[rp]['uuid']
                        for rp, t in self.builder.rpt if t == cw.SHARES}
        self.traits = collections.defaultdict(set)
        for rp, t in self.builder.rpt:
            self.traits[self.by_id[rp]['uuid']].add(t)
        members = collections.defaultdict(set)
        self.aggs = collections.defaultdict(set)
        for rp, agg in self.builder.rpa:
            members[agg].add(self.by_id[rp]['uuid'])
            self.aggs[self.by_id[rp]['uuid']].add(agg)
        # The roots a sharing provider may serve: its own and those of
        # every tree with a provider in one of its aggregates.
        self.serves = {u: {self.root[u]} | {self.root[m] for agg in
                                            self.aggs[u]
                                            for m in members[agg]}
                       for u in self.sharing}

    def _row(self, rp_id):
        return next(r for r in self.builder.rps if r['id'] == rp_id)

    def rewrite(self, db_engine):
        """Write the odd rows over the loaded world, by SQL."""
        inv = models.INV
        with db_engine.begin() as conn:
            rcs = dict(conn.execute(sa.select(models.RC.c.name,
                                              models.RC.c.id)).all())
            for row, was in zip(self.rows, self.builder.inv):
                if row == was:
                    continue
                conn.execute(inv.update().where(
                    inv.c.resource_provider_id == row['resource_provider_id'],
                    inv.c.resource_class_id == rcs[row['resource_class']],
                ).values({k: row[k] for k in (
                    'total', 'reserved', 'min_unit', 'max_unit',
                    'step_size', 'allocation_ratio')}))
            for rp, rc, more, _then in self.edges:
                if more:
                    conn.execute(models.ALLOC.insert().values(
                        resource_provider_id=rp, resource_class_id=rcs[rc],
                        consumer_id=str(uuidlib.uuid4()), used=more))

    def probes(self):
        """(path, version): a query per odd row asking its class alone, of
        an amount the row decides (at the FLOAT edge: what fills it to
        9), at a random microversion: a judge that misreads the row
        answers otherwise."""
        edge = {(rp, rc): 9 - then for rp, rc, _more, then in self.edges}
        out = []
        for inv, (_name, rc, kind) in zip(self._odd_rows, self.odd):
            key = (inv['resource_provider_id'], rc)
            amount = edge.get(key) or (
                self.rnd.choice([1, 2]) if kind.startswith('step')
                else self.rnd.randint(1, 3))
            out.append(('/allocation_candidates?resources=%s:%d'
                        % (rc, amount), self.rnd.choice(PROBE_VERSIONS)))
        return out

    def odd_classes(self):
        return {rc for _name, rc, _kind in self.odd}

    def at_float_edge(self, path):
        """Whether a group of the query asks what fills a FLOAT_EDGE row
        to exactly 9: it fits unless the database is MySQL."""
        asked = {(pair.split(':')[0], int(pair.split(':')[1]))
                 for kv in path.split('?')[1].split('&')
                 if kv.startswith('resources')
                 for pair in kv.split('=')[1].split(',')}
        return any((rc, 9 - then) in asked
                   for _rp, rc, _more, then in self.edges)

    def summary(self):
        """The world as rows, for a failure message."""
        b = self.builder
        lines = ['seed %d; odd rows: %s' % (self.seed, self.odd)]
        used = collections.Counter()
        for rp, rc, amount in b.alloc:
            used[(rp, rc)] += amount
        for rp, rc, more, _then in self.edges:
            used[(rp, rc)] += more
        for r in b.rps:
            parent = r['parent_provider_id']
            invs = ['%s %d-%d %d..%d/%d x%s used %d' % (
                i['resource_class'], i['total'], i['reserved'], i['min_unit'],
                i['max_unit'], i['step_size'], i['allocation_ratio'],
                used[(r['id'], i['resource_class'])])
                for i in self.rows if i['resource_provider_id'] == r['id']]
            lines.append('  %s%s %s: %s traits %s aggs %s' % (
                r['name'], ' (in %s)' % self.by_id[parent]['name']
                if parent else '', r['uuid'][:8], invs,
                sorted(self.traits[r['uuid']]),
                sorted(a[-1] for a in self.aggs[r['uuid']])))
        return '\n'.join(lines)

    def size(self):
        return len(self.builder.rps) + len(self.rows)


def _root_required(path):
    """(required, forbidden) root traits of the query."""
    for kv in path.split('?', 1)[1].split('&'):
        key, _, value = kv.partition('=')
        if key == 'root_required':
            names = value.split(',')
            return ({n for n in names if not n.startswith('!')},
                    {n[1:] for n in names if n.startswith('!')})
    return set(), set()


def capacity_disagreements(world, answer, report, path):
    """What is wrong with ``report`` (status, body of /ops/capacity) as
    the capacity of ``answer`` (the candidates at the newest
    microversion); [] when they agree (see the module's docstring)."""
    (status, body), (rstatus, rbody) = answer, report
    if status != 200 or rstatus != 200:
        if status != rstatus:
            return ['answer %s, capacity %s %s' % (status, rstatus, rbody)]
        return []
    fitting = {t['root_provider_uuid'] for t in rbody['trees']
               if t['fits'] >= 1}
    required, forbidden = _root_required(path)
    owned = set()
    sharing_only = []
    for ar in body['allocation_requests']:
        rps = set(ar['allocations'])
        own = {world.root[u] for u in rps - world.sharing}
        if len(own) > 1:
            return ['a candidate spans trees: %s' % ar]
        if own:
            owned |= own
            continue
        under = set.intersection(*(world.serves[u] for u in rps))
        sharing_only.append({
            root for root in under
            if required <= world.traits[root]
            and not forbidden & world.traits[root]})
    wrong = []
    if owned - fitting:
        wrong.append('trees with a candidate said not to fit: %s'
                     % sorted(owned - fitting))
    maybe = owned.union(*sharing_only)
    if fitting - maybe:
        wrong.append('trees said to fit with no candidate: %s'
                     % sorted(fitting - maybe))
    if any(not under & fitting for under in sharing_only):
        wrong.append('a candidate of sharing providers under no tree '
                     'said to fit')
    if bool(rbody['total']) != bool(body['allocation_requests']):
        wrong.append('total %s, %d candidates' % (
            rbody['total'], len(body['allocation_requests'])))
    return wrong


@contextlib.contextmanager
def one_database():
    """(app, engine, load): ``load(world)`` empties the database of
    providers and writes ``world`` into it. Aggregates stay, as they
    always do (aggregate.ids_for_uuids relies on it)."""
    with gabbits.app_and_engine_over_world(cw.WorldBuilder()) as (
            app, db_engine):

        def load(world):
            with db_engine.begin() as conn:
                for table in (models.ALLOC, models.INV, models.RPT,
                              models.RPA):
                    conn.execute(table.delete())
                conn.execute(models.RP.update().values(
                    parent_provider_id=None, root_provider_id=None))
                conn.execute(models.RP.delete())
            world.write(db_engine)
        yield app, db_engine, load


def _sql_answer(monkeypatch, app, path, version):
    with monkeypatch.context() as m:
        m.setattr(engine, 'USE_WORLD', False)
        return _get(app, path, version)


def test_four_judges_answer_alike(monkeypatch, record_property, finds):
    counts = collections.Counter()
    failures = []
    with one_database() as (app, db_engine, load):
        for i in range(WORLDS):
            world = World(SEED + i)
            # Written as the builder made it, loaded by the world engine,
            # then rewritten by SQL behind its back.
            load(world.builder)
            _get(app, '/allocation_candidates?resources=VCPU:1', NEWEST)
            world.rewrite(db_engine)
            queries = [diff.random_query(world.rnd, world.builder)
                       for _ in range(QUERIES_PER_WORLD)]
            probes = world.probes()
            counts['probes of an odd row'] += len(probes)
            for path, version in queries + probes:
                case = (world, path, version)
                counts['queries'] += 1
                asked = {pair.split(':')[0] for kv in path.split('?')[1]
                         .split('&') if kv.startswith('resources')
                         for pair in kv.split('=')[1].split(',')}
                counts['queries with an odd row in play'] += bool(
                    asked & world.odd_classes())
                answer = _get(app, path, version)
                at_edge = world.at_float_edge(path)
                counts['queries at the FLOAT edge'] += at_edge
                # Alike on every database; only those at the edge differ.
                counts['non-empty answers away from the edge'] += bool(
                    not at_edge and answer[0] == 200
                    and answer[1]['allocation_requests'])
                sql_answer = _sql_answer(monkeypatch, app, path, version)
                counts['world ~ sql'] += 1
                if sql_answer != answer:
                    failures.append(case + ('world ~ sql', [
                        'world %s, sql %s' % (answer, sql_answer)]))
                explained = _get(app, '/ops/explain' + path
                                 + explain.EVERYONE, version)
                wrong = explain.disagreements(answer, explained, path,
                                              version)
                counts['explain ~ answer'] += 1
                if wrong:
                    failures.append(case + ('explain ~ answer', wrong))
                newest = answer if version == NEWEST else _get(
                    app, path, NEWEST)
                report = _get(app, '/ops/capacity?' + path.split('?')[1],
                              NEWEST)
                wrong = capacity_disagreements(world, newest, report, path)
                counts['capacity ~ answer'] += 1
                if wrong:
                    failures.append(case + ('capacity ~ answer', wrong))
    summary = '%d worlds: %s' % (WORLDS, dict(sorted(counts.items())))
    print(summary)
    record_property('comparisons', summary)
    if failures:
        world, path, version, pair, wrong = min(
            failures, key=lambda f: (f[0].size(), len(f[1])))
        raise AssertionError(
            '%d of %d comparisons disagree; the smallest: %s\n%s @%s\n%s\n%s'
            % (len(failures), counts['queries'] * 3, pair, path, version,
               '\n'.join(wrong[:3]), world.summary()))
    assert finds['world'] >= counts['queries'], (
        'the world engine did not answer')
    # The worlds exercise what they are for.
    assert counts['queries with an odd row in play'] > counts['queries'] / 3
    assert counts['non-empty answers away from the edge'] > (
        counts['queries'] / 4)
    assert counts['queries at the FLOAT edge'] >= 3


@pytest.mark.once('reaches no database')
def test_a_wrong_capacity_report_is_caught():
    """The capacity check itself. Tree a answers with its child a1;
    sharing provider s (a tree of its own, in an aggregate with tree b,
    whose root has CUSTOM_A) answers alone, under s or b."""
    world = types.SimpleNamespace(
        root={'a': 'a', 'a1': 'a', 'b': 'b', 's': 's'}, sharing={'s'},
        serves={'s': {'s', 'b'}},
        traits=collections.defaultdict(set, b={'CUSTOM_A'}))
    path = '/allocation_candidates?resources=VCPU:1'
    answer = (200, {'allocation_requests': [
        {'allocations': {'a1': {'resources': {'VCPU': 1}}}},
        {'allocations': {'s': {'resources': {'VCPU': 1}}}}]})

    def report(*roots):
        return 200, {'trees': [{'root_provider_uuid': r, 'fits': 1}
                               for r in roots], 'total': len(roots)}

    def check(report, answer=answer, path=path):
        return capacity_disagreements(world, answer, report, path)

    assert check(report('a', 'b')) == check(report('a', 's')) == []
    assert check(report('a', 'b', 's')) == []
    assert check(report('b'))               # a has a candidate
    assert check(report('a'))               # s's candidate under no tree
    assert check(report('a', 'b'), path=path + '&root_required=!CUSTOM_A')
    assert check(report(), (200, {'allocation_requests': []})) == []
    assert check(report('a'), (200, {'allocation_requests': []}))
    assert check((400, {}), (200, {'allocation_requests': []}))
    assert check((400, {}), (400, {})) == []
