"""Allocation-candidate statements on PostgreSQL are prepared once per
connection and then executed with each request's values; a connection
that lost them (a pooler in transaction mode) turns preparing off and the
request is answered all the same (``placement.db.prepared``)."""
import contextlib

import pytest
import sqlalchemy as sa

from placement.db import prepared
from placement.objects.candidates import gather
from placement.tests import db as test_db
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidate_windows_random as twr

pytestmark = pytest.mark.skipif(
    test_db.backend() != 'postgresql',
    reason='prepared statements are used on PostgreSQL only')

AGG = 'aaaaaaaa-0000-0000-0000-000000000001'
FLAT = ('/allocation_candidates?resources=VCPU:1,MEMORY_MB:64'
        '&member_of=%s&required=HW_CPU_X86_AVX2' % AGG)
NESTED = ('/allocation_candidates?resources_A=VCPU:1&resources_B=VCPU:1'
          '&group_policy=isolate')


@pytest.fixture(autouse=True)
def sql_gatherer(monkeypatch):
    """Prepared statements, ping skipping and the flat statement are the
    SQL gatherer's (gather.py), the engine of databases that do not count
    their changes."""
    monkeypatch.setattr(gather, 'USE_WORLD', False)


def _world(roots=6, numa=True):
    """Compute nodes, half in AGG with AVX2; with ``numa``, two NUMA
    children each (the world is then not flat)."""
    w = cw.WorldBuilder()
    for i in range(roots):
        name = 'cn%d' % i
        w.provider(name)
        w.inventory(name, 'VCPU', 4)
        w.inventory(name, 'MEMORY_MB', 1024)
        if i % 2 == 0:
            w.aggregate(name, AGG)
            w.trait(name, 'HW_CPU_X86_AVX2')
        for j in range(2 if numa else 0):
            w.provider('%s_numa%d' % (name, j), parent=name)
            w.inventory('%s_numa%d' % (name, j), 'VCPU', 2)
    return w


@contextlib.contextmanager
def _statements(engine):
    """The statements the app sends, in order."""
    sent = []

    def record(conn, cursor, statement, params, context, executemany):
        sent.append(statement.split(None, 1)[0].upper())

    sa.event.listen(engine, 'before_cursor_execute', record)
    try:
        yield sent
    finally:
        sa.event.remove(engine, 'before_cursor_execute', record)


@contextlib.contextmanager
def _app():
    try:
        with gabbits.app_and_engine_over_world(_world()) as app_engine:
            yield app_engine
    finally:
        prepared.enable()


@pytest.mark.parametrize('path', [FLAT, NESTED], ids=['flat', 'nested'])
def test_prepared_once_then_executed(path):
    with _app() as (app, engine):
        # Without preparing: the answer every later request must give.
        prepared.disable()
        expected = twr.get(app, path, '1.39')
        assert expected[0] == 200 and expected[1]['allocation_requests']
        prepared.enable()
        sent_by_request = []
        for _ in range(8):
            with _statements(engine) as sent:
                assert twr.get(app, path, '1.39') == expected
            sent_by_request.append(sent)
    executes = [sent.count('EXECUTE') for sent in sent_by_request]
    assert executes[0] >= 2 and set(executes) == {executes[0]}
    # Each pooled connection prepares a shape once (the test pool hands
    # out its connections in turn): later requests only execute.
    assert sent_by_request[0].count('PREPARE') == executes[0]
    assert all('PREPARE' not in sent for sent in sent_by_request[4:])


def test_connection_that_lost_its_statements():
    """pgbouncer in transaction mode hands the next transaction another
    server session: statements prepared on ours are missing there."""
    with _app() as (app, engine):
        expected = twr.get(app, FLAT, '1.39')
        assert expected[0] == 200 and expected[1]['allocation_requests']
        assert prepared.enabled()
        # Each checkout lands on a server session without our statements.
        def forget(dbapi_conn, record, proxy):
            cursor = dbapi_conn.cursor()
            cursor.execute('DEALLOCATE ALL')
            cursor.close()

        sa.event.listen(engine, 'checkout', forget)
        # Once every pooled connection has prepared, one meets the error.
        for _ in range(4):
            assert twr.get(app, FLAT, '1.39') == expected
        assert not prepared.enabled()
        with _statements(engine) as sent:
            assert twr.get(app, FLAT, '1.39') == expected
        assert 'PREPARE' not in sent and 'EXECUTE' not in sent


def test_schema_changed_under_prepared_statements():
    """A column type altered while workers run (an upgrade): PostgreSQL
    refuses to run the old plan ("cached plan must not change result
    type"); the request is answered all the same, unprepared."""
    with _app() as (app, engine):
        expected = twr.get(app, FLAT, '1.39')
        assert expected[0] == 200 and expected[1]['allocation_requests']
        # The upgrade runs elsewhere (placement-manage): the app's pool
        # keeps its connections, and their statements, as they were.
        upgrade = sa.create_engine(
            engine.url.render_as_string(hide_password=False))
        with upgrade.begin() as conn:
            conn.exec_driver_sql('ALTER TABLE resource_providers '
                                 'ALTER COLUMN uuid TYPE varchar(40)')
        upgrade.dispose()
        for _ in range(4):
            assert twr.get(app, FLAT, '1.39') == expected
        assert not prepared.enabled()


def test_flat_answer_runs_outside_a_transaction():
    """A flat world's answer is one statement: PostgreSQL runs it with no
    BEGIN and no ROLLBACK around it (two round trips fewer), and the
    pooled connections go back to transactions afterwards."""
    from psycopg2 import extensions
    with gabbits.app_and_engine_over_world(
            _world(roots=4, numa=False)) as (app, engine):
        states = []

        def after(conn, cursor, statement, params, context, executemany):
            # The candidates' statements (names are looked up elsewhere).
            if statement.startswith(('PREPARE', 'EXECUTE')):
                states.append(conn.connection.driver_connection
                              .get_transaction_status())

        sa.event.listen(engine, 'after_cursor_execute', after)
        try:
            for _ in range(3):
                status, body = twr.get(app, FLAT, '1.39')
                assert status == 200
                assert len(body['allocation_requests']) == 2
        finally:
            sa.event.remove(engine, 'after_cursor_execute', after)
        assert len(states) >= 3
        assert set(states) == {extensions.TRANSACTION_STATUS_IDLE}
        pooled = [engine.connect() for _ in range(engine.pool.checkedin())]
        try:
            assert pooled
            assert not any(c.connection.driver_connection.autocommit
                           for c in pooled)
        finally:
            for c in pooled:
                c.close()


def test_connection_lost_under_the_statement_is_503_then_recovers():
    """The prepared statement runs on the driver's own cursor: a
    connection lost under it (after the pool's liveness check) answers
    503, 'database is unavailable', as under any other statement, and the
    next requests are answered on new connections."""
    import psycopg2

    with _app() as (app, engine):
        expected = twr.get(app, FLAT, '1.39')
        for _ in range(4):      # every pooled connection has prepared
            assert twr.get(app, FLAT, '1.39') == expected
        admin = psycopg2.connect(engine.url.render_as_string(
            hide_password=False).replace('postgresql+psycopg2', 'postgresql'))
        admin.autocommit = True
        driver_runs = []
        real = prepared._execute_on_driver

        def on_driver(conn, execute, values):
            driver_runs.append(execute)
            return real(conn, execute, values)

        def kill(dbapi_conn, record, proxy):
            # After the pool's liveness check: the statement meets the
            # closed connection.
            with admin.cursor() as cur:
                cur.execute('SELECT pg_terminate_backend(%s)',
                            (dbapi_conn.get_backend_pid(),))

        sa.event.listen(engine, 'checkout', kill)
        prepared._execute_on_driver = on_driver
        try:
            status, body = twr.get(app, FLAT, '1.39')
        finally:
            sa.event.remove(engine, 'checkout', kill)
            prepared._execute_on_driver = real
            admin.close()
        assert status == 503, body
        assert 'placement database is unavailable' in (
            body['errors'][0]['detail'])
        assert driver_runs and driver_runs[0].startswith('EXECUTE')
        for _ in range(4):
            assert twr.get(app, FLAT, '1.39') == expected
        assert prepared.enabled()


def test_a_flat_answer_needs_no_liveness_check_and_survives_without():
    """The flat statement's connection is handed over without the pool's
    liveness check (a round trip); connections lost while idle in the
    pool (a database restart) cost a second try, not an error."""
    import psycopg2

    with gabbits.app_and_engine_over_world(
            _world(roots=4, numa=False)) as (app, engine):
        # Check connections at checkout, as oslo.db's engines do (the
        # test engine does not).
        engine.pool._pre_ping = True
        pings = []
        real_ping = engine.dialect.do_ping

        def counting_ping(dbapi_connection):
            pings.append(1)
            return real_ping(dbapi_connection)

        engine.dialect.do_ping = counting_ping
        expected = twr.get(app, FLAT, '1.39')
        assert expected[0] == 200 and expected[1]['allocation_requests']
        del pings[:]
        for _ in range(4):
            assert twr.get(app, FLAT, '1.39') == expected
        assert not pings
        assert twr.get(app, '/resource_providers', '1.39')[0] == 200
        assert pings, 'other requests check their connection'

        admin = psycopg2.connect(engine.url.render_as_string(
            hide_password=False).replace('postgresql+psycopg2', 'postgresql'))
        admin.autocommit = True
        with admin.cursor() as cur:
            # Every idle connection of the pool.
            cur.execute('SELECT pg_terminate_backend(pid) '
                        'FROM pg_stat_activity WHERE pid <> '
                        'pg_backend_pid() AND datname = current_database()')
        admin.close()
        for _ in range(4):
            assert twr.get(app, FLAT, '1.39') == expected
