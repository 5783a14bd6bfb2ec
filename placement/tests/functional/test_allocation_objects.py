"""The allocation writer against a real database, below HTTP: rows that no
API can make (allocations without consumers, written by old releases) and
the write's invariants checked straight in the tables."""
import types
import uuid

from oslo_db import exception as db_exc
import pytest
import sqlalchemy as sa

from placement import context as placement_context
from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import allocation as alloc_obj
from placement.objects import consumer as consumer_obj
from placement.objects import inventory as inv_obj
from placement.objects import resource_class as rc_obj
from placement.objects import resource_provider as rp_obj
from placement.tests import db as test_db
from placement.tests.functional.fixtures import gabbits


@pytest.fixture
def ctx():
    db = test_db.TestDatabase()
    conf = gabbits.build_test_conf(db.url)
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)
    context = placement_context.RequestContext(is_admin=True, config=conf)
    rc_obj.ensure_sync(context)
    context.engine = db.engine
    try:
        yield context
    finally:
        undo()
        db.drop()


def _provider(ctx, total=8, reserved=0, ratio=1.0, min_unit=1, max_unit=8,
              step_size=1, rc='VCPU'):
    rp_uuid = str(uuid.uuid4())
    with ctx.engine.begin() as conn:
        rp_id = conn.execute(models.RP.insert().values(
            uuid=rp_uuid, name=rp_uuid, generation=0,
            root_provider_id=None)).inserted_primary_key[0]
        conn.execute(models.RP.update().where(models.RP.c.id == rp_id)
                     .values(root_provider_id=rp_id))
        rc_id = conn.execute(sa.select(models.RC.c.id).where(
            models.RC.c.name == rc)).scalar()
        conn.execute(models.INV.insert().values(
            resource_provider_id=rp_id, resource_class_id=rc_id,
            total=total, reserved=reserved, min_unit=min_unit,
            max_unit=max_unit, step_size=step_size,
            allocation_ratio=ratio))
    return rp_uuid


def _write(consumer, allocations, generation=alloc_obj.NO_CHECK):
    return alloc_obj.ConsumerWrite(
        uuid=consumer, allocations=allocations, project_id='p',
        user_id='u', generation=generation)


def _generation(ctx, rp_uuid):
    with ctx.engine.connect() as conn:
        return conn.execute(sa.select(models.RP.c.generation).where(
            models.RP.c.uuid == rp_uuid)).scalar()


def test_write_bumps_provider_and_consumer_generations(ctx):
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 2}})])
    assert _generation(ctx, rp) == 1
    assert consumer_obj.get_by_uuid(ctx, consumer).generation == 1
    rows = alloc_obj.get_by_consumer(ctx, consumer)
    assert [(r.resource_class, r.used) for r in rows] == [('VCPU', 2)]


def test_capacity_refused_and_nothing_written(ctx):
    rp = _provider(ctx, total=4)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    alloc_obj.replace_all(ctx, [_write(first, {rp: {'VCPU': 3}})])
    with pytest.raises(alloc_obj.InvalidAllocationCapacityExceeded):
        alloc_obj.replace_all(ctx, [_write(second, {rp: {'VCPU': 2}})])
    with pytest.raises(exception.ConsumerNotFound):
        consumer_obj.get_by_uuid(ctx, second)
    assert _generation(ctx, rp) == 1


def test_many_consumers_all_or_nothing(ctx):
    rp = _provider(ctx, total=4)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    with pytest.raises(alloc_obj.InvalidAllocationCapacityExceeded):
        alloc_obj.replace_all(ctx, [_write(first, {rp: {'VCPU': 3}}),
                                    _write(second, {rp: {'VCPU': 2}})])
    assert alloc_obj.get_by_consumer(ctx, first) == []


def test_step_size_violation(ctx):
    rp = _provider(ctx, step_size=2)
    with pytest.raises(alloc_obj.InvalidAllocationConstraintsViolated):
        alloc_obj.replace_all(ctx, [_write(str(uuid.uuid4()),
                                           {rp: {'VCPU': 3}})])


def test_consumer_generation_mismatch(ctx):
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 1}}, None)])
    with pytest.raises(alloc_obj.ConsumerGenerationConflict) as err:
        alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 1}}, 0)])
    assert 'expected 1 but got 0' in str(err.value)


def test_emptied_consumer_is_removed(ctx):
    rp = _provider(ctx)
    consumer = str(uuid.uuid4())
    alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 1}})])
    alloc_obj.replace_all(ctx, [_write(consumer, {}, 1)])
    assert alloc_obj.get_by_consumer(ctx, consumer) == []
    with pytest.raises(exception.ConsumerNotFound):
        consumer_obj.get_by_uuid(ctx, consumer)
    assert _generation(ctx, rp) == 2


def _fail_first_generation_bump(monkeypatch, error):
    """Make the first provider generation bump raise ``error``; the list
    of generations each bump expected."""
    real = rp_obj.increment_generation
    calls = []

    def flaky(c, rp_id, expected):
        calls.append(expected)
        if len(calls) == 1:
            raise error
        return real(c, rp_id, expected)

    monkeypatch.setattr(rp_obj, 'increment_generation', flaky)
    return calls


def _stale_generations(monkeypatch, times):
    """Make the write read each provider one generation behind the stored
    one, the first ``times`` times it reads them: its compare-and-swap then
    loses, whether the writes go one by one or in one statement. The
    list of generations each read saw."""
    real = alloc_obj._fold_state
    seen = []

    def stale(rows):
        rows = [r._asdict() for r in rows]
        if len(seen) < times:
            for r in rows:
                r['generation'] -= 1
        seen.append(sorted({r['generation'] for r in rows}))
        return real([types.SimpleNamespace(**r) for r in rows])

    monkeypatch.setattr(alloc_obj, '_fold_state', stale)
    return seen


def test_stale_provider_generation_retries(ctx, monkeypatch):
    """A writer whose generation compare-and-swap loses goes round again
    and succeeds when capacity remains."""
    rp = _provider(ctx)
    seen = _stale_generations(monkeypatch, 1)
    alloc_obj.replace_all(ctx, [_write(str(uuid.uuid4()), {rp: {'VCPU': 1}})])
    assert seen == [[-1], [0]]
    assert _generation(ctx, rp) == 1


def test_retries_exhausted_is_concurrent_update(ctx, monkeypatch):
    rp = _provider(ctx)
    # Owners made first: every try below reads the providers.
    alloc_obj.replace_all(ctx, [_write(str(uuid.uuid4()), {rp: {'VCPU': 1}})])
    consumer = str(uuid.uuid4())
    seen = _stale_generations(monkeypatch, 1000)
    monkeypatch.setattr(alloc_obj.time, 'sleep', lambda s: None)
    with pytest.raises(exception.ResourceProviderConcurrentUpdateDetected):
        alloc_obj.replace_all(ctx, [_write(consumer, {rp: {'VCPU': 1}})])
    assert len(seen) == ctx.config.placement.allocation_conflict_retry_count
    assert _generation(ctx, rp) == 1
    assert alloc_obj.get_by_consumer(ctx, consumer) == []


def test_incomplete_consumers_migration(ctx):
    rp = _provider(ctx)
    orphans = sorted(str(uuid.uuid4()) for _ in range(3))
    with ctx.engine.begin() as conn:
        rp_id = conn.execute(sa.select(models.RP.c.id).where(
            models.RP.c.uuid == rp)).scalar()
        for orphan in orphans:
            for rc_id in (0, 1):
                conn.execute(models.ALLOC.insert().values(
                    resource_provider_id=rp_id, consumer_id=orphan,
                    resource_class_id=rc_id, used=1))
    assert consumer_obj.create_incomplete_consumers(ctx, 2) == (2, 2)
    assert consumer_obj.create_incomplete_consumers(ctx, 2) == (1, 1)
    assert consumer_obj.create_incomplete_consumers(ctx, 2) == (0, 0)
    for orphan in orphans:
        row = consumer_obj.get_by_uuid(ctx, orphan)
        assert row.project_external_id == (
            ctx.config.placement.incomplete_consumer_project_id)
        assert row.user_external_id == (
            ctx.config.placement.incomplete_consumer_user_id)


def test_simple_writers_start_again_after_a_deadlock(ctx, monkeypatch):
    # A deadlock (PostgreSQL and MySQL pick a victim among crossing
    # writers) rolls the whole transaction back and runs it again, instead
    # of answering 500: the inventory is there once, the generation moved
    # once.
    rp_uuid = str(uuid.uuid4())
    rp_obj.create(ctx, rp_uuid, 'deadlocked')
    calls = _fail_first_generation_bump(monkeypatch, db_exc.DBDeadlock())
    rp = rp_obj.get_by_uuid(ctx, rp_uuid)
    data = dict(total=8, reserved=0, min_unit=1, max_unit=8, step_size=1,
                allocation_ratio=1.0)
    assert inv_obj.add(ctx, rp, 'VCPU', data) == rp.generation + 1
    assert calls == [rp.generation, rp.generation]
    with ctx.engine.connect() as conn:
        rows = conn.execute(sa.select(models.INV.c.total).where(
            models.INV.c.resource_provider_id == rp.id)).all()
    assert [r[0] for r in rows] == [8]


def _orphan_allocation(ctx, rp_uuid):
    """An allocation of 1 VCPU on ``rp_uuid`` whose consumer has no row,
    as releases before consumers were recorded wrote; its consumer."""
    orphan = str(uuid.uuid4())
    with ctx.engine.begin() as conn:
        rp_id = conn.execute(sa.select(models.RP.c.id).where(
            models.RP.c.uuid == rp_uuid)).scalar()
        conn.execute(models.ALLOC.insert().values(
            resource_provider_id=rp_id, consumer_id=orphan,
            resource_class_id=0, used=1))
    return orphan


def test_allocations_without_a_consumer_row_are_not_deleted(ctx):
    # As reads ignore them, DELETE /allocations/{consumer} finds nothing
    # (404) for rows no consumer owns, and leaves them to the online
    # migration that makes their consumers.
    rp = _provider(ctx)
    orphan = _orphan_allocation(ctx, rp)
    assert alloc_obj.delete_for_consumer(ctx, orphan) == 0
    assert consumer_obj.create_incomplete_consumers(ctx, 10) == (1, 1)
    assert alloc_obj.delete_for_consumer(ctx, orphan) == 1
    with ctx.engine.connect() as conn:
        assert conn.execute(sa.select(models.ALLOC.c.id).where(
            models.ALLOC.c.consumer_id == orphan)).first() is None


def test_a_providers_allocations_leave_out_rows_without_a_consumer(ctx):
    # GET /resource_providers/{uuid}/allocations reads the provider and
    # its allocations in one statement: a provider without allocations
    # answers its generation and none, rows no consumer owns are not
    # shown (as upstream's inner join), a provider that does not exist
    # is not found.
    rp = _provider(ctx)
    assert alloc_obj.get_by_provider(ctx, rp) == (0, [])
    alloc_obj.replace_all(ctx, [_write('c1', {rp: {'VCPU': 2}})])
    _orphan_allocation(ctx, rp)
    generation, rows = alloc_obj.get_by_provider(ctx, rp)
    assert generation == _generation(ctx, rp) == 1
    assert [(r.consumer_uuid, r.resource_class, r.used) for r in rows] == [
        ('c1', 'VCPU', 2)]
    with pytest.raises(exception.ResourceProviderNotFound):
        alloc_obj.get_by_provider(ctx, str(uuid.uuid4()))
