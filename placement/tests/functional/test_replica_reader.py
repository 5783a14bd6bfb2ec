"""``[placement_database] slave_connection`` on two SQLite files, so the
routing is seen without a replication cluster: the "replica" is a copy of
the primary taken after start-up, and then each gets rows the other lacks.
A read answered from the replica shows the replica's rows. (The real
streaming replica is in placement/tests/cluster/test_pg_replica.py.)"""
import os
import shutil
import tempfile
import time
import uuid

import pytest
import sqlalchemy as sa
import webob

from placement import context as placement_context
from placement.db import api as db_api
from placement.db import models
from placement import deploy
from placement.tests.functional.fixtures import gabbits

HEADERS = {'x-auth-token': 'admin', 'accept': 'application/json',
           'content-type': 'application/json',
           'openstack-api-version': 'placement latest'}


@db_api.replica_reader()
def _probe(ctx):
    """Whether the decorated function ran inside a transaction of its own
    (an asynchronous reader) or undecorated."""
    return db_api._in_transaction(ctx)


class Files:
    """Primary and replica SQLite files, and an app over them."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='placement-replica-')
        self.primary = 'sqlite:///' + os.path.join(self.dir, 'primary.db')
        self.replica = 'sqlite:///' + os.path.join(self.dir, 'replica.db')
        self.app = None

    def load(self, slave_connection=None):
        overrides = {('placement_database', 'sync_on_startup'): True}
        if slave_connection:
            overrides[('placement_database', 'slave_connection')] = (
                slave_connection)
        self.conf = gabbits.build_test_conf(self.primary, overrides)
        self.app = deploy.loadapp(self.conf)
        return self

    def copy_to_replica(self):
        """Like a base backup: the replica starts as the primary was."""
        db_api._CONFIGURED['manager'].dispose_pool()
        shutil.copy(os.path.join(self.dir, 'primary.db'),
                    os.path.join(self.dir, 'replica.db'))

    def call(self, method, path, body=None):
        req = webob.Request.blank(path, method=method, headers=HEADERS)
        if body is not None:
            req.json_body = body
        return req.get_response(self.app)

    def replica_rows(self, name, trait, rc):
        """A provider with 8 VCPU, a custom trait and a custom resource
        class that only the replica has."""
        engine = sa.create_engine(self.replica)
        with engine.begin() as conn:
            rp_id = conn.execute(models.RP.insert().values(
                uuid=str(uuid.uuid4()), name=name, generation=1,
                root_provider_id=None)).inserted_primary_key[0]
            conn.execute(models.RP.update().where(models.RP.c.id == rp_id)
                         .values(root_provider_id=rp_id))
            vcpu = conn.execute(sa.select(models.RC.c.id).where(
                models.RC.c.name == 'VCPU')).scalar()
            conn.execute(models.INV.insert().values(
                resource_provider_id=rp_id, resource_class_id=vcpu,
                total=8, reserved=0, min_unit=1, max_unit=8, step_size=1,
                allocation_ratio=1.0))
            conn.execute(models.TRAIT.insert().values(name=trait))
            conn.execute(models.RC.insert().values(id=10000 + 7, name=rc))
        engine.dispose()

    def close(self):
        db_api._CONFIGURED['manager'].dispose_pool()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def files():
    saved = dict(db_api._REPLICA)
    f = Files()
    try:
        yield f
    finally:
        db_api._REPLICA.update(saved)
        f.close()


def _names(resp, key):
    return sorted(item if isinstance(item, str) else item['name']
                  for item in resp.json[key])


def test_without_slave_connection_nothing_changes(files):
    files.load()
    assert not db_api.replica_configured()
    ctx = placement_context.admin_context(files.conf)
    # Undecorated: no transaction of its own, and one engine for both.
    assert _probe(ctx) is False
    assert (db_api.context_manager.reader.get_engine() is
            db_api.context_manager.writer.get_engine())
    assert files.call('PUT', '/traits/CUSTOM_ON_PRIMARY').status_int == 201
    assert 'CUSTOM_ON_PRIMARY' in _names(files.call('GET', '/traits'),
                                         'traits')


def test_listings_from_replica_the_rest_from_primary(files):
    files.load(files.replica)
    files.copy_to_replica()
    files.replica_rows('on-replica', 'CUSTOM_ON_REPLICA', 'CUSTOM_RC_REPLICA')
    assert files.call('PUT', '/traits/CUSTOM_ON_PRIMARY').status_int == 201
    ctx = placement_context.admin_context(files.conf)
    assert _probe(ctx) is True

    # Candidates, /traits and /resource_classes: the replica's rows.
    resp = files.call('GET', '/allocation_candidates?resources=VCPU:1')
    assert resp.status_int == 200, resp.text
    assert len(resp.json['provider_summaries']) == 1
    traits = _names(files.call('GET', '/traits'), 'traits')
    assert 'CUSTOM_ON_REPLICA' in traits
    assert 'CUSTOM_ON_PRIMARY' not in traits
    assert 'CUSTOM_RC_REPLICA' in _names(
        files.call('GET', '/resource_classes'), 'resource_classes')

    # What writes depend on: the primary's.
    assert files.call('GET', '/resource_providers').json == {
        'resource_providers': []}
    assert files.call('GET', '/traits/CUSTOM_ON_PRIMARY').status_int == 204
    assert files.call('GET', '/traits/CUSTOM_ON_REPLICA').status_int == 404
    explained = files.call(
        'GET', '/ops/explain/allocation_candidates?resources=VCPU:1')
    assert explained.status_int == 200, explained.text
    # Its answer and its explanation both from the primary: nothing.
    assert explained.json['candidates'] == 0, explained.json
    rp = list(resp.json['provider_summaries'])[0]
    claim = files.call('PUT', '/allocations/%s' % uuid.uuid4(), {
        'allocations': {rp: {'resources': {'VCPU': 1}}},
        'project_id': str(uuid.uuid4()), 'user_id': str(uuid.uuid4()),
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    # The primary has no such provider: the claim is checked there.
    assert claim.status_int == 400, claim.text
    assert "does not exist" in claim.json["errors"][0]["detail"], claim.json


def test_name_not_yet_on_replica_is_asked_of_primary(files):
    files.load(files.replica)
    files.copy_to_replica()
    assert files.call('PUT', '/traits/CUSTOM_NEW').status_int == 201
    resp = files.call(
        'GET', '/allocation_candidates?resources=VCPU:1&required=CUSTOM_NEW')
    # The replica does not know the trait yet; the primary does: 200,
    # not "No such trait" (400).
    assert resp.status_int == 200, resp.text
    assert db_api._REPLICA['down_until'] < time.monotonic()


def test_replica_down_reads_fall_back_to_primary(files):
    missing = 'sqlite:///' + os.path.join(files.dir, 'no', 'such', 'dir.db')
    files.load(missing)
    rp = str(uuid.uuid4())
    assert files.call('POST', '/resource_providers',
                      {'name': 'p', 'uuid': rp}).status_int == 200
    assert files.call('PUT', '/resource_providers/%s/inventories' % rp, {
        'resource_provider_generation': 0,
        'inventories': {'VCPU': {'total': 4}}}).status_int == 200
    fallbacks = db_api._REPLICA['fallbacks']
    resp = files.call('GET', '/allocation_candidates?resources=VCPU:1')
    assert resp.status_int == 200, resp.text
    assert list(resp.json['provider_summaries']) == [rp]
    assert db_api._REPLICA['fallbacks'] == fallbacks + 1
    # Paused: the next reads go to the primary without trying again.
    assert db_api._REPLICA['down_until'] > time.monotonic()
    assert files.call('GET', '/traits').status_int == 200
    assert db_api._REPLICA['fallbacks'] == fallbacks + 1
