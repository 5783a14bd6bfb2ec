"""A deadlock raised by COMMIT itself is retried like one raised by a
statement. On MariaDB Galera a write that conflicts with one committed
through another node fails certification at COMMIT (error 1213, which
oslo.db raises as DBDeadlock from the commit); here the commit is made to
fail that way on demand, on any database."""
import logging
import uuid

from oslo_db import exception as db_exc
import pytest
import sqlalchemy as sa

from placement.db import api as db_api
from placement import exception
from placement.objects import allocation as alloc_obj
from placement.objects import consumer as consumer_obj
from placement.objects import inventory as inv_obj
from placement.objects import resource_provider as rp_obj
from placement.tests.functional.test_allocation_objects import (  # noqa
    _provider, _write, ctx)


@pytest.fixture
def fail_commits(ctx):
    """``fail_commits(n)``: the next ``n`` COMMITs that follow a write
    raise DBDeadlock, as a certification failure does."""
    left = {'n': 0}
    wrote = set()

    def on_execute(conn, clauseelement, *args):
        if not isinstance(clauseelement, sa.sql.Select):
            wrote.add(id(conn))

    def on_commit(conn):
        if id(conn) in wrote:
            wrote.discard(id(conn))
            if left['n'] > 0:
                left['n'] -= 1
                raise db_exc.DBDeadlock()

    sa.event.listen(ctx.engine, 'after_execute', on_execute)
    sa.event.listen(ctx.engine, 'commit', on_commit)

    def arm(n):
        left['n'] = n
        return left

    yield arm
    sa.event.remove(ctx.engine, 'after_execute', on_execute)
    sa.event.remove(ctx.engine, 'commit', on_commit)


def _retries(caplog):
    return sum(db_api.DEADLOCK_RETRY_LOG in r.getMessage()
               for r in caplog.records)


def test_allocation_write_retried(ctx, fail_commits, caplog):
    caplog.set_level(logging.WARNING)
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    left = fail_commits(2)
    alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 2}})])
    assert left['n'] == 0
    rows = alloc_obj.get_by_consumer(ctx, consumer)
    assert [(r.resource_class, r.used) for r in rows] == [('VCPU', 2)]
    assert _retries(caplog) == 2


def test_delete_retried(ctx, fail_commits, caplog):
    caplog.set_level(logging.WARNING)
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 2}})])
    left = fail_commits(1)
    assert alloc_obj.delete_for_consumer(ctx, consumer)
    assert left['n'] == 0
    assert alloc_obj.get_by_consumer(ctx, consumer) == []
    assert _retries(caplog) == 1


def test_owner_creation_retried(ctx, fail_commits, caplog):
    caplog.set_level(logging.WARNING)
    left = fail_commits(1)
    project = uuid.uuid4().hex
    first = consumer_obj.get_or_create_project(ctx, project)
    assert left['n'] == 0
    assert consumer_obj.get_or_create_project(ctx, project) == first
    assert _retries(caplog) == 1


def test_inventory_and_provider_writes_retried(ctx, fail_commits, caplog):
    caplog.set_level(logging.WARNING)
    rp_uuid = str(uuid.uuid4())
    left = fail_commits(1)
    rp_obj.create(ctx, rp_uuid, 'rp-' + rp_uuid)
    assert left['n'] == 0
    rp = rp_obj.get_by_uuid(ctx, rp_uuid)
    left = fail_commits(1)
    inv_obj.set_all(ctx, rp, {'VCPU': {
        'total': 4, 'reserved': 0, 'min_unit': 1, 'max_unit': 4,
        'step_size': 1, 'allocation_ratio': 1.0}})
    assert left['n'] == 0
    assert _retries(caplog) == 2


def test_gives_up_with_a_conflict_not_a_crash(ctx, fail_commits):
    """A deadlock at every commit outlives the retries: the caller gets
    the deadlock (the fault barrier answers 409), nothing half-written."""
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    fail_commits(1000)
    with pytest.raises((db_exc.DBDeadlock,
                        exception.ResourceProviderConcurrentUpdateDetected)):
        alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 2}})])
    fail_commits(0)
    assert alloc_obj.get_by_consumer(ctx, consumer) == []


# What MariaDB 10.11 on Galera answered in the cluster tests, for a write
# whose open table held an unparsed trigger (see
# unparsed_triggers.unparsed_trigger_table), and what it says when it kept
# the name.
UNPARSED = {
    'allocations': (
        "(pymysql.err.ProgrammingError) (1064, \"Unknown trigger has an "
        "error in its body: 'You have an error in your SQL syntax; check "
        "the manual that corresponds to your MariaDB server version for "
        "the right syntax to use near '`placement`@`%` TRIGGER "
        "placement_chg_allocations_insert AFTER INSERT ON allo...' at line "
        "1'\")"),
    'resource_providers': (
        "(pymysql.err.ProgrammingError) (1064, \"Trigger "
        "'placement_chg_resource_providers_update' has an error in its "
        "body: 'You have an error in your SQL syntax'\")"),
}


@pytest.mark.parametrize('table', sorted(UNPARSED))
def test_unparsed_trigger_reopened_and_retried(ctx, caplog, table):
    """The write is retried after the table is reopened (on MySQL by a
    no-op ALTER TABLE, which MariaDB's table cache must drop)."""
    caplog.set_level(logging.WARNING)
    db_api._REOPENED.clear()
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    left = {'n': 1}
    statements = []

    def on_execute(conn, cursor, statement, *args):
        statements.append(statement)
        # On PostgreSQL the insert is one CTE of the write's statement.
        if 'INSERT INTO allocations' in statement and left['n']:
            left['n'] -= 1
            raise db_exc.DBError(UNPARSED[table])

    sa.event.listen(ctx.engine, 'before_cursor_execute', on_execute)
    try:
        alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 2}})])
    finally:
        sa.event.remove(ctx.engine, 'before_cursor_execute', on_execute)
    assert left['n'] == 0
    rows = alloc_obj.get_by_consumer(ctx, consumer)
    assert [(r.resource_class, r.used) for r in rows] == [('VCPU', 2)]
    logged = [r.getMessage() for r in caplog.records
              if db_api.UNPARSED_TRIGGER_LOG in r.getMessage()]
    assert len(logged) == 1 and ' on %s in ' % table in logged[0]
    reopened = [s for s in statements if s.startswith('ALTER TABLE')]
    if ctx.engine.dialect.name == 'mysql':
        assert reopened == ["ALTER TABLE %s COMMENT = ''" % table]
    else:
        assert reopened == []


def test_unparsed_trigger_is_unavailable_not_500():
    """Still unparsed after every retry: 503, as a database that cannot
    take the write now; any other 1064 stays a fault of ours."""
    from placement import fault_wrap
    assert fault_wrap.is_db_unavailable(
        db_exc.DBError(UNPARSED['allocations']))
    assert not fault_wrap.is_db_unavailable(
        db_exc.DBError("(1064, 'You have an error in your SQL syntax')"))


def test_unparsed_trigger_retried_by_every_writer(ctx, caplog):
    """Writers other than the allocations write retry through
    db_api.retry_on_deadlock, which knows the error too."""
    caplog.set_level(logging.WARNING)
    db_api._REOPENED.clear()
    calls = []

    @db_api.retry_on_deadlock
    def write():
        calls.append(1)
        if len(calls) == 1:
            raise db_exc.DBError(UNPARSED['resource_providers'])
        return 'written'

    assert write() == 'written' and len(calls) == 2
    assert any(db_api.UNPARSED_TRIGGER_LOG in r.getMessage()
               for r in caplog.records)
