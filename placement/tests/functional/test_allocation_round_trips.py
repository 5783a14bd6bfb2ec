"""How many statements an allocation write sends: the write's latency is
mostly round trips to the database, so a change that adds one should be a
deliberate one (this test then says by how much). And the round trip it
saves, the pool's liveness ping: a write on a connection the database has
dropped still succeeds, stored once."""
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


def _put(app, consumer, rp, generation):
    body = {'allocations': {rp: {'resources': {'VCPU': 1,
                                               'MEMORY_MB': 64}}},
            'project_id': 'p', 'user_id': 'u',
            'consumer_generation': generation, 'consumer_type': 'INSTANCE'}
    return webob.Request.blank(
        '/allocations/' + consumer, method='PUT', headers=HEADERS,
        body=json.dumps(body).encode()).get_response(app)


def _split(statements):
    """(statements of the write itself, statements of the change log)."""
    log = [s for s in statements if 'placement_change' in s]
    return len(statements) - len(log), len(log)


def _one_provider():
    """A world of one provider with VCPU and MEMORY_MB, and its uuid."""
    w = cw.WorldBuilder()
    w.provider('cn')
    w.inventory('cn', 'VCPU', 8)
    w.inventory('cn', 'MEMORY_MB', 1024)
    return w, w.by_name['cn']['uuid']


def test_statements_per_put():
    w = cw.WorldBuilder()
    w.provider('cn', uuid='11111111-2222-3333-4444-555555555555')
    w.inventory('cn', 'VCPU', 8)
    w.inventory('cn', 'MEMORY_MB', 1024)
    rp = '11111111-2222-3333-4444-555555555555'
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        # The first write creates project, user and consumer type.
        assert _put(app, str(uuid.uuid4()), rp, None).status_int == 204
        consumer = str(uuid.uuid4())
        with gabbits.statements_run(engine) as statements:
            assert _put(app, consumer, rp, None).status_int == 204
            new, new_log = _split(statements)
            del statements[:]
            assert _put(app, consumer, rp, 1).status_int == 204
            replace, replace_log = _split(statements)
        # The change log the candidates' world reads (objects/changes.py)
        # is written by the database's triggers: no statement of ours.
        assert new_log == 0, statements
        assert replace_log == 0
    # Lock (not on SQLite); owners, consumer and its claims with the
    # providers' inventory and usage; then the writes. On PostgreSQL they
    # are one statement; elsewhere: insert consumer, insert claims,
    # provider generation, and a replacement deletes instead of inserting
    # the consumer and bumps the consumer generation too.
    if test_db.backend() == 'postgresql':
        assert (new, replace) == (3, 3), statements
    else:
        lock = 0 if test_db.backend() == 'sqlite' else 1
        assert new == 4 + lock, statements
        assert replace == 5 + lock


def _get(app, consumer):
    return webob.Request.blank(
        '/allocations/' + consumer, method='GET',
        headers=HEADERS).get_response(app)


def test_statements_per_get():
    """A client reads a consumer before each rewrite of it: one statement
    (the consumer type's name joined in, not looked up after)."""
    w, rp = _one_provider()
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        consumer = str(uuid.uuid4())
        assert _put(app, consumer, rp, None).status_int == 204
        with gabbits.statements_run(engine) as statements:
            resp = _get(app, consumer)
    assert resp.status_int == 200
    body = json.loads(resp.body)
    assert body['consumer_type'] == 'INSTANCE'
    assert body['consumer_generation'] == 1
    assert len(statements) == 1, statements


@pytest.mark.parametrize('path, version', [
    ('/resource_providers/{rp}/allocations', '1.0'),
    ('/resource_providers/{rp}/inventories', '1.0'),
    ('/resource_providers/{rp}/inventories/VCPU', '1.0'),
    ('/resource_providers/{rp}/traits', '1.6'),
    ('/resource_providers/{rp}/aggregates', '1.19'),
    ('/resource_providers?in_tree={rp}', '1.14'),
    ('/usages?project_id=p&user_id=u', '1.9'),
    ('/usages?project_id=p', '1.9'),
])
def test_statements_per_reporting_read(path, version):
    """What every nova-compute reads for each of its providers (its
    allocations every minute, the rest at each association refresh), and
    quota counting per boot: one statement each, the provider's
    generation joined in."""
    w, rp = _one_provider()
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        assert _put(app, str(uuid.uuid4()), rp, None).status_int == 204
        with gabbits.statements_run(engine) as statements:
            resp = webob.Request.blank(path.format(rp=rp), headers={
                'x-auth-token': 'admin',
                'openstack-api-version': 'placement %s' % version,
            }).get_response(app)
    assert resp.status_int == 200, resp.body
    assert len(statements) == 1, statements


def _kill_others(url):
    """End every other client connection of our user to this database
    (through an engine of its own: the app's pool must keep its
    connection). Server processes such as an autovacuum worker belong to
    the superuser and are left alone: ending them needs rights the test
    user does not have."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        if engine.dialect.name == 'postgresql':
            conn.execute(sa.text(
                'SELECT pg_terminate_backend(pid) FROM pg_stat_activity '
                'WHERE datname = current_database() '
                'AND usename = current_user '
                "AND backend_type = 'client backend' "
                'AND pid <> pg_backend_pid()')).all()
            return
        ids = [r[0] for r in conn.execute(sa.text(
            'SELECT id FROM information_schema.processlist '
            "WHERE db = DATABASE() AND user = SUBSTRING_INDEX(USER(), '@', 1) "
            "AND command <> 'Daemon' AND id <> CONNECTION_ID()"))]
        for conn_id in ids:
            conn.execute(sa.text('KILL %d' % conn_id))
    engine.dispose()


@pytest.mark.skipif(test_db.backend() == 'sqlite',
                    reason='SQLite has no server to drop connections')
def test_write_on_a_dropped_pooled_connection():
    """The write skips the ping; a connection found lost by its first
    statement has done nothing, and the write runs again on a fresh one."""
    w, rp = _one_provider()
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        assert _put(app, str(uuid.uuid4()), rp, None).status_int == 204
        # The app's connection is back in the pool; drop it server-side.
        _kill_others(engine.url)
        consumer = str(uuid.uuid4())
        resp = _put(app, consumer, rp, None)
        assert resp.status_int == 204, resp.body
        with engine.connect() as conn:
            used = conn.execute(sa.text(
                'SELECT used FROM allocations WHERE consumer_id = :c'),
                {'c': consumer}).scalars().all()
        assert sorted(used) == [1, 64]   # stored once


@pytest.mark.skipif(test_db.backend() == 'sqlite',
                    reason='SQLite has no server to drop connections')
def test_read_on_a_dropped_pooled_connection():
    """GET /allocations/{consumer} skips the ping too; a connection found
    lost is replaced and the read asked again."""
    w, rp = _one_provider()
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        consumer = str(uuid.uuid4())
        assert _put(app, consumer, rp, None).status_int == 204
        _kill_others(engine.url)
        resp = _get(app, consumer)
        assert resp.status_int == 200, resp.body
        body = json.loads(resp.body)
    assert body['allocations'][rp]['resources'] == {'VCPU': 1,
                                                    'MEMORY_MB': 64}


def _candidates(app):
    return webob.Request.blank(
        '/allocation_candidates?resources=VCPU:1,MEMORY_MB:64',
        headers=HEADERS).get_response(app)


def test_candidates_skip_the_ping():
    """GET /allocation_candidates answers from memory after the change
    check, its one statement: on a pooled connection not pinged first."""
    w, rp = _one_provider()
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        # As oslo.db makes its engines (the tests' ping no connection).
        engine.pool._pre_ping = True
        pings = []
        real = engine.dialect.do_ping

        def counting(dbapi_connection):
            pings.append(1)
            return real(dbapi_connection)

        engine.dialect.do_ping = counting
        assert _candidates(app).status_int == 200
        pings.clear()
        with gabbits.statements_run(engine) as statements:
            resp = _candidates(app)
    assert resp.status_int == 200
    assert list(json.loads(resp.body)['provider_summaries']) == [rp]
    assert (len(statements), pings) == (1, []), statements


@pytest.mark.skipif(test_db.backend() == 'sqlite',
                    reason='SQLite has no server to drop connections')
def test_candidates_on_a_dropped_pooled_connection():
    """A connection found lost by the change check is replaced and the
    candidates asked again."""
    w, rp = _one_provider()
    with gabbits.app_and_engine_over_world(w) as (app, engine):
        assert _candidates(app).status_int == 200
        _kill_others(engine.url)
        resp = _candidates(app)
        assert resp.status_int == 200, resp.body
    assert list(json.loads(resp.body)['provider_summaries']) == [rp]
