"""Hostile requests against a live server: never a 5xx, never a change.

A 4-worker gunicorn placement on the suite's database (PostgreSQL when
PLACEMENT_TEST_DB_URL names one) gets ``FUZZ_REQUESTS`` (default 2,000)
seeded hostile requests over every route of the routes table; see
``fuzz.py`` for what they hold. Asserted: no 5xx or dropped connection,
no write answered 2xx, every 4xx in upstream's JSON error format, and
every table row for row as before. ``tools/fuzz`` runs the full 100,000
on PostgreSQL.
"""
import os

from placement.tests.functional import fuzz
from placement.tests.functional import live_server

COUNT = int(os.environ.get('FUZZ_REQUESTS', '2000'))
SEED = int(os.environ.get('FUZZ_SEED', '0'))
THREADS = int(os.environ.get('FUZZ_THREADS', '8'))


def test_hostile_requests_get_4xx_and_change_nothing():
    # No request-line limit, so thousand-member in: lists reach placement
    # rather than being refused by gunicorn.
    with live_server.LiveServer(
            workers=4, gunicorn_args=['--limit-request-line', '0']) as server:
        result, changed = fuzz.run(server, COUNT, seed=SEED,
                                   threads=THREADS)
        print('fuzz (seed %d): %s' % (SEED, result.summary()))
        failures = [fuzz.describe(f)[:600] for f in result.failures[:15]]
        assert not result.failures, '%d failures, first ones:\n%s\n%s' % (
            len(result.failures), '\n'.join(failures),
            server.log_text()[-4000:])
        assert not changed, 'tables changed:\n' + '\n'.join(changed)
        assert result.count == COUNT
