"""placement-manage audit: each kind of finding planted straight into the
database (the API refuses to write them) over a consistent baseline, and
reported; --fix deletes only consumers without allocations."""
import json
import uuid

import pytest
import sqlalchemy as sa

from placement import context as placement_context
from placement.db import api as db_api
from placement.db import models
from placement.objects import audit
from placement.tests.functional import candidate_worlds
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_commands

INCOMPLETE = '00000000-0000-0000-0000-000000000000'
VCPU, MEMORY_MB = 0, 1   # os-resource-classes ids


class World:
    """A consistent baseline: provider cn1 (VCPU 8, MEMORY_MB 1024 in
    steps of 256) with a child, and a complete consumer using both."""

    def __init__(self, engine):
        self.engine = engine
        w = candidate_worlds.WorldBuilder()
        self.cn1 = w.provider('cn1')
        self.child = w.provider('cn1-numa', parent='cn1')
        w.inventory('cn1', 'VCPU', 8, max_unit=4)
        w.inventory('cn1', 'MEMORY_MB', 1024, step_size=256)
        w.write(engine)
        self.project = self.insert(models.PROJECT, external_id='p1')
        self.user = self.insert(models.USER, external_id='u1')
        self.consumer = self.new_consumer()
        self.allocate(self.consumer, self.cn1['id'], VCPU, 2)
        self.allocate(self.consumer, self.cn1['id'], MEMORY_MB, 512)

    def insert(self, table, **values):
        with self.engine.begin() as conn:
            return conn.execute(table.insert().values(**values)
                                ).inserted_primary_key[0]

    def sql(self, statement):
        with self.engine.begin() as conn:
            conn.execute(statement)

    def new_consumer(self, project=None, user=None):
        consumer = str(uuid.uuid4())
        self.insert(models.CONSUMER, uuid=consumer,
                    project_id=project or self.project,
                    user_id=user or self.user, generation=1)
        return consumer

    def allocate(self, consumer, rp_id, rc_id, used):
        self.insert(models.ALLOC, consumer_id=consumer,
                    resource_provider_id=rp_id, resource_class_id=rc_id,
                    used=used)


@pytest.fixture
def world():
    db = gabbits.test_db.TestDatabase()
    conf = gabbits.build_test_conf(db.url)
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)
    try:
        yield World(db.engine)
    finally:
        conf.clear_override('auth_strategy', group='api')
        conf.clear_override('connection', group='placement_database')
        undo()
        db.drop()


def _find():
    return audit.find(placement_context.admin_context(), INCOMPLETE,
                      INCOMPLETE)


def _plant_over_capacity(w):
    w.allocate(w.new_consumer(), w.cn1['id'], VCPU, 4)
    w.allocate(w.new_consumer(), w.cn1['id'], VCPU, 4)   # 10 > 8
    return {'kind': audit.OVER_CAPACITY, 'provider': w.cn1['uuid'],
            'resource_class': 'VCPU', 'used': 10}


def _plant_no_inventory(w):
    consumer = w.new_consumer()
    w.allocate(consumer, w.child['id'], VCPU, 1)
    return {'kind': audit.NO_INVENTORY, 'consumer': consumer,
            'provider': w.child['uuid'], 'resource_class': 'VCPU'}


def _plant_above_max_unit(w):
    consumer = w.new_consumer()
    w.allocate(consumer, w.cn1['id'], VCPU, 5)           # max_unit 4
    return {'kind': audit.BAD_UNIT, 'consumer': consumer, 'used': 5}


def _plant_off_step(w):
    consumer = w.new_consumer()
    w.allocate(consumer, w.cn1['id'], MEMORY_MB, 100)    # step 256
    return {'kind': audit.BAD_UNIT, 'consumer': consumer,
            'resource_class': 'MEMORY_MB', 'step_size': 256}


def _plant_below_min_unit(w):
    w.sql(models.INV.update().where(models.INV.c.resource_class_id == VCPU)
          .values(min_unit=3))
    return {'kind': audit.BAD_UNIT, 'consumer': w.consumer, 'used': 2,
            'min_unit': 3}


def _plant_empty_consumer(w):
    return {'kind': audit.EMPTY_CONSUMER, 'consumer': w.new_consumer()}


def _plant_incomplete_consumer(w):
    project = w.insert(models.PROJECT, external_id=INCOMPLETE)
    consumer = w.new_consumer(project=project)
    w.allocate(consumer, w.cn1['id'], VCPU, 1)
    return {'kind': audit.INCOMPLETE_CONSUMER, 'consumer': consumer,
            'project_id': INCOMPLETE, 'user_id': 'u1'}


def _plant_allocation_without_consumer(w):
    consumer = str(uuid.uuid4())
    w.allocate(consumer, w.cn1['id'], VCPU, 1)
    return {'kind': audit.INCOMPLETE_CONSUMER, 'consumer': consumer,
            'project_id': None}


def _plant_no_root(w):
    w.sql(models.RP.update().where(models.RP.c.id == w.cn1['id'])
          .values(root_provider_id=None))
    return {'kind': audit.BROKEN_TREE, 'provider': w.cn1['uuid'],
            'problem': 'no root provider'}


def _plant_wrong_root(w):
    # An explicit id: the builder's explicit ids left PostgreSQL's
    # sequence behind.
    other = w.insert(models.RP, id=100, uuid=str(uuid.uuid4()),
                     name='other', generation=0)
    w.sql(models.RP.update().where(models.RP.c.id == other)
          .values(root_provider_id=other))
    w.sql(models.RP.update().where(models.RP.c.id == w.child['id'])
          .values(root_provider_id=other))
    return {'kind': audit.BROKEN_TREE, 'provider': w.child['uuid'],
            'problem': "root differs from its parent's root"}


def _plant_missing_parent(w):
    # SQLite does not enforce the foreign key; the servers do, so it is
    # dropped there first (as a hand-made schema might lack it).
    for fk in sa.inspect(w.engine).get_foreign_keys('resource_providers'):
        if (fk['constrained_columns'] == ['parent_provider_id']
                and w.engine.dialect.name != 'sqlite'):
            w.sql(sa.text('ALTER TABLE resource_providers DROP %s %s' % (
                'FOREIGN KEY' if w.engine.dialect.name == 'mysql'
                else 'CONSTRAINT', fk['name'])))
    with w.engine.begin() as conn:
        conn.execute(models.RP.update().where(
            models.RP.c.id == w.child['id']).values(parent_provider_id=999))
    return {'kind': audit.BROKEN_TREE, 'provider': w.child['uuid'],
            'problem': 'parent provider id 999 does not exist'}


def _plant_loop(w):
    w.sql(models.RP.update().where(models.RP.c.id == w.cn1['id'])
          .values(parent_provider_id=w.child['id']))
    return {'kind': audit.BROKEN_TREE, 'provider': w.cn1['uuid']}


PLANTS = [_plant_over_capacity, _plant_no_inventory, _plant_above_max_unit,
          _plant_off_step, _plant_below_min_unit, _plant_empty_consumer,
          _plant_incomplete_consumer, _plant_allocation_without_consumer,
          _plant_no_root, _plant_wrong_root,
          _plant_missing_parent, _plant_loop]


@pytest.mark.parametrize('plant', PLANTS, ids=lambda f: f.__name__[7:])
def test_planted_inconsistency_is_reported(world, plant):
    assert _find() == []
    expected = plant(world)
    findings = _find()
    assert any(all(f.get(k) == v for k, v in expected.items())
               for f in findings), findings


# --- the command ------------------------------------------------------------

def _conf_dir(tmp_path, url):
    path = tmp_path / 'etc'
    path.mkdir()
    (path / 'placement.conf').write_text(
        '[placement_database]\nconnection = %s\n' % url)
    return path


def test_command_reports_fixes_empty_consumers_and_exits(world, tmp_path):
    conf_dir = _conf_dir(tmp_path, world.engine.url.render_as_string(
        hide_password=False))
    result = test_commands.manage(conf_dir, 'audit')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'No inconsistencies found.' in result.stdout

    empty = _plant_empty_consumer(world)['consumer']
    over = _plant_over_capacity(world)
    result = test_commands.manage(conf_dir, 'audit', '--json')
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert {f['kind'] for f in doc['findings']} == {
        audit.EMPTY_CONSUMER, audit.OVER_CAPACITY}
    assert doc['fixed'] == []

    result = test_commands.manage(conf_dir, 'audit', '--fix')
    assert result.returncode == 1, result.stderr
    assert 'Fixed: deleted consumer %s' % empty in result.stdout
    assert 'usage_over_capacity: 1' in result.stdout
    assert over['provider'] in result.stdout
    with world.engine.connect() as conn:
        left = {r[0] for r in conn.execute(sa.select(models.CONSUMER.c.uuid))}
    assert empty not in left and world.consumer in left

    # Only the over-capacity finding is left: --fix cannot repair it.
    result = test_commands.manage(conf_dir, 'audit', '--json', '--fix')
    doc = json.loads(result.stdout)
    assert doc['fixed'] == []
    assert [f['kind'] for f in doc['findings']] == [audit.OVER_CAPACITY]
