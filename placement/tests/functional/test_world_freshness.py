"""No write, by anybody, leaves a process's in-memory world behind (issue 28).

The model-based check of ``freshness.py``: random sequences of every write
(inventories, allocations with moves and partial replacements, providers
created, deleted and re-parented, traits, aggregates, resource classes
created, renamed and deleted, reshapes, consumer deletes, placement-manage
commands), each followed by a random allocation-candidates query that two
world processes of ours must answer exactly as our SQL engine over the
same database. Three writer mixes, each on a database of the suite's kind:

* ``ours``: our API (at random microversions, through a random one of our
  processes) and placement-manage;
* ``upstream``: half the API writes made by upstream 16.0.0's app;
* ``sql``: half the writes SQL typed by hand (UPDATE inventories, DELETE
  FROM allocations, link rows inserted, deleted and changed, providers
  re-parented, classes and traits renamed...).

And each trigger on the tables candidates read is needed: without any one
of them, the check fails.

``PLACEMENT_MODEL_STEPS`` steps per mix (default 3,400: 10,200 per
database), ``PLACEMENT_MODEL_SEED``; a failure names the seed, the step,
the writes before it and the answers' difference, and whether a full
reload put the world right. ``tools/freshness-check`` runs it long.
"""
import os
import random

from placement.tests.functional import freshness
from placement.tests.functional import upstream_venv

STEPS = int(os.environ.get('PLACEMENT_MODEL_STEPS', '3400'))
SEED = int(os.environ.get('PLACEMENT_MODEL_SEED', '2028'))
# Steps each trigger's absence may go unnoticed.
TRIGGER_CAP = int(os.environ.get('PLACEMENT_MODEL_TRIGGER_CAP', '1500'))


def _check(mode, seed):
    result = freshness.run(mode, STEPS, seed)
    print(result.summary())
    # The run did what it says: every kind of write landed, and queries
    # found candidates.
    landed = {kind for (kind, _w, outcome) in result.writes
              if outcome == 'ok'}
    assert result.steps == STEPS
    assert result.queries['candidates'] > STEPS // 4, result.summary()
    return landed


def test_worlds_follow_writes_of_ours():
    landed = _check('ours', SEED)
    missing = {k for k in freshness.ApiWrites.WEIGHTS if not any(
        done == k or done.startswith(k + '_') for done in landed)}
    assert not missing, missing


def test_worlds_follow_writes_of_upstream():
    upstream_venv.require('upstream')
    _check('upstream', SEED + 1)


def test_worlds_follow_sql_by_hand():
    landed = _check('sql', SEED + 2)
    assert set(freshness.SqlWrites.WEIGHTS) <= landed, (
        set(freshness.SqlWrites.WEIGHTS) - landed)


def test_every_trigger_is_needed():
    """Drop each trigger on the tables candidates read in turn: the check
    (every writer) must fail within TRIGGER_CAP steps."""
    upstream_venv.require('upstream')
    with freshness.Cluster(upstream=True) as cluster:
        tables = {t for _n, t, _s in freshness.triggers(cluster.engine)}
        missing = set(freshness.CANDIDATE_TABLES) - tables
        assert not missing, 'no trigger on ' + ', '.join(sorted(missing))
        freshness.build_world(cluster, random.Random(SEED))
        found = freshness.without_each_trigger(cluster, 'all', TRIGGER_CAP,
                                               SEED)
    print('\n'.join('without %s on %s: failed at step %s' % (n, t, step)
                    for (n, t), step in sorted(found.items())))
    unnoticed = sorted('%s (on %s)' % k for k, step in found.items()
                       if not step)
    assert not unnoticed, (
        'the check did not notice these triggers missing in %d steps: '
        'either they are not needed or no write here needs them: %s'
        % (TRIGGER_CAP, ', '.join(unnoticed)))
