"""No write, by anybody, leaves a process's in-memory world behind (issue 28).

The model-based check of ``freshness.py`` (writes in
``freshness_writes.py``, queries in ``freshness_queries.py``): random
sequences of every write (inventories, allocations with moves and partial
replacements, providers created, deleted and re-parented, traits,
aggregates, resource classes created, renamed and deleted, reshapes,
consumer deletes, placement-manage commands), each followed by a random
allocation-candidates query that two world processes of ours must answer
exactly as our SQL engine over the same database. Three writer mixes, each
on its own database of the suite's kind:

* ``ours``: our API (at random microversions, through a random one of our
  processes) and placement-manage;
* ``upstream``: half the API writes made by upstream 16.0.0's app;
* ``sql``: half the writes SQL typed by hand (UPDATE inventories, DELETE
  FROM allocations, link rows inserted, deleted and changed, providers
  re-parented, classes and traits renamed...).

That every trigger on the tables candidates read is needed is checked in
the suite by ``test_change_triggers_needed.py``: for each trigger, one
write only it counts, and a world that misses it (a few seconds per
database). ``tools/freshness-check --without-each-trigger`` drops each in
turn under this module's random writes, up to 1,500 steps each: longer
than the suite can spend.

The runs go at once, one thread each driving its own processes, so that
they share the machine's CPUs; the tests report each one's outcome.
``PLACEMENT_MODEL_STEPS`` steps per mix (default 3,400: 10,200 per
database), ``PLACEMENT_MODEL_SEED``; a failure names the seed, the step,
the writes before it, the answers' difference, and whether a full reload
put the world right. ``tools/freshness-check`` runs it long.
"""
import os

import pytest

from placement.tests.functional import freshness
from placement.tests.functional import freshness_writes as writes
from placement.tests.functional import upstream_venv

STEPS = int(os.environ.get('PLACEMENT_MODEL_STEPS', '3400'))
SEED = int(os.environ.get('PLACEMENT_MODEL_SEED', '2028'))
RUNS = {'test_worlds_follow_writes_of_ours': 'ours',
        'test_worlds_follow_writes_of_upstream': 'upstream',
        'test_worlds_follow_sql_by_hand': 'sql'}


@pytest.fixture(scope='module')
def outcomes(request):
    """The outcome of every run whose test was selected, all run at once."""
    wanted = {RUNS.get(item.name) for item in request.session.items
              if item.module is request.module}
    calls = {'ours': lambda: freshness.run('ours', STEPS, SEED),
             'sql': lambda: freshness.run('sql', STEPS, SEED + 2)}
    try:
        upstream_venv.ensure('upstream')
    except upstream_venv.Unavailable:
        pass        # the tests needing it say so (require)
    else:
        calls['upstream'] = lambda: freshness.run('upstream', STEPS,
                                                  SEED + 1)
    return freshness.concurrently({name: call for name, call in
                                   calls.items() if name in wanted})


def _result(outcomes, name):
    outcome = outcomes[name]
    if isinstance(outcome, freshness.Mismatch):
        pytest.fail(str(outcome), pytrace=False)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _landed(result):
    """The kinds of write that changed something (every kind, in a run of
    2,000 steps or more); queries found candidates: the run did what it
    says."""
    print(result.summary())
    assert result.steps == STEPS
    assert result.queries['candidates'] > STEPS // 4, result.summary()
    if STEPS < 2000:
        return set(writes.ApiWrites.WEIGHTS) | set(
            writes.SqlWrites.WEIGHTS) | {'manage'}
    return {kind for (kind, _w, outcome) in result.writes
            if outcome == 'ok'}


def test_worlds_follow_writes_of_ours(outcomes):
    landed = _landed(_result(outcomes, 'ours'))
    missing = {k for k in writes.ApiWrites.WEIGHTS if not any(
        done == k or done.startswith(k + '_') for done in landed)}
    assert not missing, missing
    assert 'manage' in landed


def test_worlds_follow_writes_of_upstream(outcomes):
    upstream_venv.require('upstream')
    _landed(_result(outcomes, 'upstream'))


def test_worlds_follow_sql_by_hand(outcomes):
    landed = _landed(_result(outcomes, 'sql'))
    missing = set(writes.SqlWrites.WEIGHTS) - landed
    assert not missing, missing
