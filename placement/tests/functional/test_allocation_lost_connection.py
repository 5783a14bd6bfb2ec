"""A write on a pooled connection the database has dropped.

The allocation write skips the pool's liveness ping (a round trip per
write); a connection found lost by its first statement has done nothing,
and the write runs again on a fresh one. Here the server ends every pooled
connection of the test database between two writes: the second write must
still be answered 204 and stored once.
"""
import json
import uuid

import pytest
import sqlalchemy as sa
import webob

from placement.tests import db as test_db
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits

HEADERS = {'x-auth-token': 'admin', 'content-type': 'application/json',
           'openstack-api-version': 'placement 1.38'}
RP = '11111111-2222-3333-4444-555555555555'


def _put(app, consumer):
    body = {'allocations': {RP: {'resources': {'VCPU': 1}}},
            'project_id': 'p', 'user_id': 'u',
            'consumer_generation': None, 'consumer_type': 'INSTANCE'}
    return webob.Request.blank(
        '/allocations/' + consumer, method='PUT', headers=HEADERS,
        body=json.dumps(body).encode()).get_response(app)


def _kill_others(url):
    """End every other server connection to this database (through an
    engine of its own: the app's pool must keep its connection)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        if engine.dialect.name == 'postgresql':
            conn.execute(sa.text(
                'SELECT pg_terminate_backend(pid) FROM pg_stat_activity '
                'WHERE datname = current_database() '
                'AND pid <> pg_backend_pid()')).all()
            return
        ids = [r[0] for r in conn.execute(sa.text(
            'SELECT id FROM information_schema.processlist '
            'WHERE db = DATABASE() AND id <> CONNECTION_ID()'))]
        for conn_id in ids:
            conn.execute(sa.text('KILL %d' % conn_id))
    engine.dispose()


@pytest.mark.skipif(test_db.backend() == 'sqlite',
                    reason='SQLite has no server to drop connections')
def test_write_on_a_dropped_pooled_connection():
    w = cw.WorldBuilder()
    w.provider('cn', uuid=RP)
    w.inventory('cn', 'VCPU', 8)
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        assert _put(app, str(uuid.uuid4())).status_int == 204
        # The app's connection is back in the pool; drop it server-side.
        _kill_others(engine.url)
        consumer = str(uuid.uuid4())
        resp = _put(app, consumer)
        assert resp.status_int == 204, resp.body
        with engine.connect() as conn:
            used = conn.execute(sa.text(
                'SELECT used FROM allocations WHERE consumer_id = :c'),
                {'c': consumer}).scalars().all()
        assert used == [1]
