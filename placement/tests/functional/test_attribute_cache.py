"""Resource class and trait name <-> id lookups: correct when other
processes add, rename or delete custom rows behind this one's back, and
free of queries for standard rows once warm."""
import pytest
import sqlalchemy as sa

from placement import conf as placement_conf
from placement import context
from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import resource_class as rc_obj
from placement.objects import trait as trait_obj
from placement.tests import db as test_db


@pytest.fixture
def world():
    """(new_request_context, engine) over a fresh synced database."""
    db = test_db.TestDatabase()
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    conf.set_override('connection', db.url, group='placement_database')
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)

    def new_ctx():
        return context.admin_context(conf)

    trait_obj.ensure_sync(new_ctx())
    rc_obj.ensure_sync(new_ctx())
    yield new_ctx, db.engine
    undo()
    db.drop()


def _sql(engine, stmt):
    """What another process sharing the database might do."""
    with engine.begin() as conn:
        conn.execute(stmt)


class _Queries:
    def __init__(self, engine):
        self.count = 0
        self.engine = engine
        sa.event.listen(engine, 'before_cursor_execute', self._seen)

    def _seen(self, *args):
        self.count += 1

    def stop(self):
        sa.event.remove(self.engine, 'before_cursor_execute', self._seen)


def test_standard_resource_classes_use_library_indexes(world):
    new_ctx, _engine = world
    ctx = new_ctx()
    assert rc_obj.id_for_name(ctx, 'VCPU') == 0
    assert rc_obj.id_for_name(ctx, 'DISK_GB') == 2
    assert rc_obj.name_for_id(ctx, 1) == 'MEMORY_MB'
    assert rc_obj.ids_for_names(ctx, ['VCPU', 'MEMORY_MB']) == {
        'VCPU': 0, 'MEMORY_MB': 1}


def test_unknown_names_are_all_listed(world):
    new_ctx, _engine = world
    ctx = new_ctx()
    with pytest.raises(exception.TraitNotFound) as caught:
        trait_obj.ids_for_names(
            ctx, ['HW_CPU_X86_AVX', 'CUSTOM_A', 'CUSTOM_B'])
    assert caught.value.format_message() == (
        'No such trait(s): CUSTOM_A, CUSTOM_B.')
    with pytest.raises(exception.ResourceClassNotFound) as caught:
        rc_obj.id_for_name(ctx, 'CUSTOM_NOPE')
    assert caught.value.format_message() == (
        'No such resource class CUSTOM_NOPE.')
    assert caught.value.status == 404


def test_standard_rows_cost_no_query_once_warm(world):
    new_ctx, engine = world
    trait_obj.ids_for_names(new_ctx(), ['HW_CPU_X86_AVX'])
    rc_obj.id_for_name(new_ctx(), 'VCPU')
    queries = _Queries(engine)
    try:
        for _ in range(5):
            ctx = new_ctx()
            assert trait_obj.ids_for_names(
                ctx, ['HW_CPU_X86_AVX', 'HW_CPU_X86_SSE'])
            assert rc_obj.name_for_id(ctx, 0) == 'VCPU'
    finally:
        queries.stop()
    assert queries.count == 0


def test_custom_rows_cost_one_query_per_request(world):
    new_ctx, engine = world
    rc_obj.create(new_ctx(), 'CUSTOM_GOLD')
    queries = _Queries(engine)
    try:
        ctx = new_ctx()
        for _ in range(5):
            assert rc_obj.id_for_name(ctx, 'CUSTOM_GOLD') == 10000
            assert rc_obj.name_for_id(ctx, 10000) == 'CUSTOM_GOLD'
    finally:
        queries.stop()
    assert queries.count == 1


def test_custom_ids_count_up_from_10000(world):
    new_ctx, _engine = world
    assert rc_obj.create(new_ctx(), 'CUSTOM_A').id == 10000
    assert rc_obj.create(new_ctx(), 'CUSTOM_B').id == 10001
    with pytest.raises(exception.ResourceClassExists):
        rc_obj.create(new_ctx(), 'CUSTOM_A')
    with pytest.raises(exception.ResourceClassExists):
        rc_obj.create(new_ctx(), 'VCPU')


def test_a_trait_another_process_adds_is_found_on_miss(world):
    new_ctx, engine = world
    ctx = new_ctx()
    trait_obj.ids_for_names(ctx, ['HW_CPU_X86_AVX'])
    _sql(engine, models.TRAIT.insert().values(name='CUSTOM_ELSEWHERE'))
    ids = trait_obj.ids_for_names(ctx, ['CUSTOM_ELSEWHERE'])
    assert trait_obj.name_for_id(ctx, ids['CUSTOM_ELSEWHERE']) == (
        'CUSTOM_ELSEWHERE')


def test_a_trait_another_process_deletes_is_gone_next_request(world):
    new_ctx, engine = world
    trait_obj.create(new_ctx(), 'CUSTOM_DOOMED')
    trait_id = trait_obj.id_for_name(new_ctx(), 'CUSTOM_DOOMED')
    _sql(engine, models.TRAIT.delete().where(
        models.TRAIT.c.name == 'CUSTOM_DOOMED'))
    ctx = new_ctx()
    with pytest.raises(exception.TraitNotFound):
        trait_obj.id_for_name(ctx, 'CUSTOM_DOOMED')
    with pytest.raises(exception.TraitNotFound):
        trait_obj.name_for_id(ctx, trait_id)


def test_a_class_another_process_renames_shows_new_name(world):
    new_ctx, engine = world
    rc_obj.create(new_ctx(), 'CUSTOM_OLD')
    assert rc_obj.name_for_id(new_ctx(), 10000) == 'CUSTOM_OLD'
    _sql(engine, models.RC.update().where(models.RC.c.id == 10000).values(
        name='CUSTOM_NEW'))
    ctx = new_ctx()
    assert rc_obj.name_for_id(ctx, 10000) == 'CUSTOM_NEW'
    with pytest.raises(exception.ResourceClassNotFound):
        rc_obj.id_for_name(ctx, 'CUSTOM_OLD')


def test_deleting_forgets_within_the_request(world):
    new_ctx, _engine = world
    ctx = new_ctx()
    trait_obj.create(ctx, 'CUSTOM_SHORT_LIVED')
    assert trait_obj.id_for_name(ctx, 'CUSTOM_SHORT_LIVED')
    trait_obj.destroy(ctx, 'CUSTOM_SHORT_LIVED')
    with pytest.raises(exception.TraitNotFound):
        trait_obj.id_for_name(ctx, 'CUSTOM_SHORT_LIVED')


def test_renaming_forgets_within_the_request(world):
    new_ctx, _engine = world
    ctx = new_ctx()
    rc_obj.create(ctx, 'CUSTOM_BEFORE')
    assert rc_obj.name_for_id(ctx, 10000) == 'CUSTOM_BEFORE'
    rc_obj.rename(ctx, 'CUSTOM_BEFORE', 'CUSTOM_AFTER')
    assert rc_obj.name_for_id(ctx, 10000) == 'CUSTOM_AFTER'


def test_standard_rows_cannot_be_deleted_or_renamed(world):
    new_ctx, _engine = world
    with pytest.raises(exception.ResourceClassCannotDeleteStandard):
        rc_obj.destroy(new_ctx(), 'VCPU')
    with pytest.raises(exception.ResourceClassCannotUpdateStandard):
        rc_obj.rename(new_ctx(), 'VCPU', 'CUSTOM_VCPU')
    with pytest.raises(exception.TraitCannotDeleteStandard):
        trait_obj.destroy(new_ctx(), 'HW_CPU_X86_AVX')


def test_a_class_with_inventory_cannot_be_deleted(world):
    new_ctx, engine = world
    rc_obj.create(new_ctx(), 'CUSTOM_USED')
    _sql(engine, models.INV.insert().values(
        resource_provider_id=1, resource_class_id=10000, total=1,
        reserved=0, min_unit=1, max_unit=1, step_size=1,
        allocation_ratio=1.0))
    with pytest.raises(exception.ResourceClassInUse) as caught:
        rc_obj.destroy(new_ctx(), 'CUSTOM_USED')
    assert caught.value.format_message() == (
        'Cannot delete resource class CUSTOM_USED. '
        'Class is in use in inventory.')
    assert rc_obj.id_for_name(new_ctx(), 'CUSTOM_USED') == 10000


def test_trait_filters(world):
    new_ctx, _engine = world
    ctx = new_ctx()
    for name in ('CUSTOM_B', 'CUSTOM_A', 'CUSTOM_A_B'):
        trait_obj.create(ctx, name)
    names = [r.name for r in trait_obj.get_all(ctx, prefix='CUSTOM_')]
    assert names == ['CUSTOM_B', 'CUSTOM_A', 'CUSTOM_A_B']
    names = [r.name for r in trait_obj.get_all(ctx, prefix='CUSTOM_A_')]
    assert names == ['CUSTOM_A_B']
    # LIKE wildcards in the prefix are taken literally.
    assert trait_obj.get_all(ctx, prefix='CUSTOM%') == []
    names = [r.name for r in trait_obj.get_all(
        ctx, name_in=['CUSTOM_B', 'CUSTOM_A', 'NOPE'])]
    assert names == ['CUSTOM_A', 'CUSTOM_B']
    assert trait_obj.get_all(ctx, associated=True) == []
    assert len(trait_obj.get_all(ctx, associated=False)) == len(
        trait_obj.get_all(ctx))
