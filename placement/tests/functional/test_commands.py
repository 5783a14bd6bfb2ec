"""The operator commands run as a deployer runs them: separate processes
reading a placement.conf, on an empty database of the backend under test
(``PLACEMENT_TEST_DB_URL``, else SQLite). Also the sample generators."""
import os
import subprocess
import sys
import uuid

import pytest
import sqlalchemy as sa

from placement.db import migration
from placement.db import models
from placement.tests import db as test_db

# "db version" prints upstream's head, as upstream's placement-manage does;
# "db version --extra" our own track's.
HEAD = 'a082b8bb98d0'
EXTRA_HEAD = migration.head(migration.EXTRA)
INITIAL = 'b4ed3a175331'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
BIN = os.path.dirname(sys.executable)


@pytest.fixture
def empty_db():
    # Never created, rather than created and dropped: drop_all leaves
    # what is not a table (MySQL's trigger procedure) behind.
    db = test_db.TestDatabase(schema=False)
    yield db
    db.drop()


@pytest.fixture
def conf_dir(tmp_path, empty_db):
    path = tmp_path / 'etc'
    path.mkdir()
    (path / 'placement.conf').write_text(
        '[placement_database]\nconnection = %s\n'
        '[placement]\n'
        'incomplete_consumer_project_id = incomplete-project\n'
        'incomplete_consumer_user_id = incomplete-user\n' % empty_db.url)
    return path


def _run(module, conf_dir, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['OS_PLACEMENT_CONFIG_DIR'] = str(conf_dir)
    return subprocess.run(
        [sys.executable, '-m', module] + list(args), env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)


def manage(conf_dir, *args):
    return _run('placement.cmd.manage', conf_dir, *args)


def status(conf_dir, *args):
    return _run('placement.cmd.status', conf_dir, *args)


def _tables(engine):
    return set(sa.inspect(engine).get_table_names())


def test_db_sync_then_version_prints_the_head_revision(conf_dir, empty_db):
    result = manage(conf_dir, 'db', 'version')
    assert result.returncode == 0, result.stderr
    assert result.stdout == 'None\n'
    assert manage(conf_dir, 'db', 'version', '--extra').stdout == 'None\n'
    result = manage(conf_dir, 'db', 'sync')
    assert result.returncode == 0, result.stderr
    assert set(models.BASE.metadata.tables) <= _tables(empty_db.engine)
    result = manage(conf_dir, 'db', 'version')
    assert result.returncode == 0, result.stderr
    assert result.stdout == HEAD + '\n'
    result = manage(conf_dir, 'db', 'version', '--extra')
    assert result.returncode == 0, result.stderr
    assert result.stdout == EXTRA_HEAD + '\n'
    # A second sync has nothing to do and is fine.
    assert manage(conf_dir, 'db', 'sync').returncode == 0


def test_config_file_argument_selects_the_database(tmp_path, empty_db):
    conf = tmp_path / 'other.conf'
    conf.write_text('[placement_database]\nconnection = %s\n' % empty_db.url)
    empty_confdir = tmp_path / 'empty'
    empty_confdir.mkdir()
    (empty_confdir / 'placement.conf').write_text('')
    result = manage(empty_confdir, '--config-file', str(conf), 'db', 'sync')
    assert result.returncode == 0, result.stderr
    assert migration.version(engine=empty_db.engine) == HEAD
    assert migration.version(empty_db.engine, migration.EXTRA) == EXTRA_HEAD


def test_db_stamp_records_a_revision_without_migrating(conf_dir, empty_db):
    result = manage(conf_dir, 'db', 'stamp', INITIAL)
    assert result.returncode == 0, result.stderr
    assert manage(conf_dir, 'db', 'version').stdout.strip() == INITIAL
    assert _tables(empty_db.engine) == {'alembic_version'}


def test_db_stamp_of_an_unknown_revision_fails(conf_dir):
    result = manage(conf_dir, 'db', 'stamp', 'nosuchrevision')
    assert result.returncode == 1
    assert 'nosuchrevision' in result.stderr


def _trait_names(engine):
    with engine.connect() as conn:
        return {r[0] for r in conn.execute(sa.select(models.TRAIT.c.name))}


def _classes(engine):
    with engine.connect() as conn:
        return {(r[0], r[1]) for r in conn.execute(
            sa.select(models.RC.c.id, models.RC.c.name))}


def test_os_traits_sync_is_idempotent_and_keeps_custom_traits(conf_dir,
                                                              empty_db):
    import os_resource_classes as orc
    import os_traits
    assert manage(conf_dir, 'db', 'sync').returncode == 0
    result = manage(conf_dir, 'os-traits', 'sync')
    assert result.returncode == 0, result.stderr
    assert 'Standard traits: %d added' % len(os_traits.get_traits()) in (
        result.stdout)
    first = _trait_names(empty_db.engine)
    assert first == set(os_traits.get_traits())
    # Standard classes keep their os-resource-classes index as id.
    assert _classes(empty_db.engine) == set(enumerate(orc.STANDARDS))

    with empty_db.engine.begin() as conn:
        conn.execute(models.TRAIT.insert().values(name='CUSTOM_MINE'))
    result = manage(conf_dir, 'os-traits', 'sync')
    assert result.returncode == 0, result.stderr
    assert 'Standard traits: 0 added' in result.stdout
    assert 'Standard resource classes: 0 added' in result.stdout
    assert _trait_names(empty_db.engine) == first | {'CUSTOM_MINE'}


def _add_incomplete_world(engine, consumers, with_rootless=False):
    """Providers and allocations as releases before consumers (and nested
    providers) left them: allocations with no consumers row."""
    with engine.begin() as conn:
        rp_id = conn.execute(models.RP.insert().values(
            uuid=str(uuid.uuid4()), name='rp1', generation=0)
        ).inserted_primary_key[0]
        conn.execute(models.RP.update().where(models.RP.c.id == rp_id)
                     .values(root_provider_id=rp_id))
        if with_rootless:
            conn.execute(models.RP.insert().values(
                uuid=str(uuid.uuid4()), name='old', generation=0))
        for consumer in consumers:
            # Two allocations (two classes) for the same consumer.
            for rc_id in (0, 1):
                conn.execute(models.ALLOC.insert().values(
                    resource_provider_id=rp_id, consumer_id=consumer,
                    resource_class_id=rc_id, used=1))


def _consumer_owners(engine):
    c, p, u = models.CONSUMER, models.PROJECT, models.USER
    with engine.connect() as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute(
            sa.select(c.c.uuid, p.c.external_id, u.c.external_id)
            .select_from(c.join(p, c.c.project_id == p.c.id)
                         .join(u, c.c.user_id == u.c.id)))}


def test_online_data_migrations_complete_incomplete_consumers(conf_dir,
                                                              empty_db):
    assert manage(conf_dir, 'db', 'sync').returncode == 0
    consumers = sorted(str(uuid.uuid4()) for _ in range(3))
    _add_incomplete_world(empty_db.engine, consumers)

    check = status(conf_dir, 'upgrade', 'check')
    assert check.returncode == 1, check.stdout + check.stderr
    assert 'Incomplete Consumers' in check.stdout
    assert 'There are 3 incomplete consumers table' in check.stdout

    result = manage(conf_dir, 'db', 'online_data_migrations')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'Running batches of 50 until complete' in result.stdout
    assert '3 rows matched query create_incomplete_consumers, 3 migrated' in (
        result.stdout)
    row = [line for line in result.stdout.splitlines()
           if ' create_incomplete_consumers ' in line][-1]
    assert [c.strip() for c in row.strip('|').split('|')] == [
        'create_incomplete_consumers', '3', '3']
    owners = _consumer_owners(empty_db.engine)
    assert owners == {c: ('incomplete-project', 'incomplete-user')
                      for c in consumers}

    # Nothing left: a second run finds nothing, the check passes.
    result = manage(conf_dir, 'db', 'online_data_migrations')
    assert result.returncode == 0
    assert 'rows matched' not in result.stdout
    check = status(conf_dir, 'upgrade', 'check')
    assert check.returncode == 0, check.stdout + check.stderr


def test_online_data_migrations_in_limited_batches(conf_dir, empty_db):
    assert manage(conf_dir, 'db', 'sync').returncode == 0
    consumers = [str(uuid.uuid4()) for _ in range(3)]
    _add_incomplete_world(empty_db.engine, consumers)
    args = ('db', 'online_data_migrations', '--max-count', '2')
    result = manage(conf_dir, *args)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Running batches' not in result.stdout
    assert len(_consumer_owners(empty_db.engine)) == 2
    assert manage(conf_dir, *args).returncode == 1
    assert manage(conf_dir, *args).returncode == 0
    assert set(_consumer_owners(empty_db.engine)) == set(consumers)
    result = manage(conf_dir, 'db', 'online_data_migrations',
                    '--max-count', '0')
    assert result.returncode == 127
    assert 'Must supply a positive value for max_count' in result.stdout


def test_root_provider_ids_are_filled_and_checked(conf_dir, empty_db):
    assert manage(conf_dir, 'db', 'sync').returncode == 0
    _add_incomplete_world(empty_db.engine, [], with_rootless=True)
    check = status(conf_dir, 'upgrade', 'check')
    assert check.returncode == 2, check.stdout + check.stderr
    assert 'Missing Root Provider IDs' in check.stdout
    result = manage(conf_dir, 'db', 'online_data_migrations')
    assert result.returncode == 0, result.stdout + result.stderr
    assert '1 rows matched query set_root_provider_ids, 1 migrated' in (
        result.stdout)
    with empty_db.engine.connect() as conn:
        rows = conn.execute(sa.select(models.RP.c.id,
                                      models.RP.c.root_provider_id)).all()
    assert all(root == rp_id for rp_id, root in rows)
    assert status(conf_dir, 'upgrade', 'check').returncode == 0


def test_upgrade_check_names_upstreams_checks_and_speaks_json(conf_dir):
    import json
    assert manage(conf_dir, 'db', 'sync').returncode == 0
    check = status(conf_dir, 'upgrade', 'check', '--json')
    assert check.returncode == 0, check.stdout + check.stderr
    doc = json.loads(check.stdout)
    assert [c['check'] for c in doc['checks']] == [
        'Missing Root Provider IDs', 'Incomplete Consumers',
        'Policy File JSON to YAML Migration', 'Candidates Change Log']
    assert {c['result'] for c in doc['checks']} == {0}


def test_upgrade_check_warns_without_our_schema_track(conf_dir, empty_db):
    """A database only upstream's placement-manage migrated works, without
    the candidates' in-memory world: a warning, not a failure."""
    import json
    migration.upgrade(HEAD, engine=empty_db.engine)
    check = status(conf_dir, 'upgrade', 'check', '--json')
    assert check.returncode == 1, check.stdout + check.stderr
    assert json.loads(check.stdout)['checks'][-1] == {
        'check': 'Candidates Change Log', 'result': 1,
        'details': 'The candidates world is not in use; run '
                   '"placement-manage db sync".'}


@pytest.fixture
def migrated_db():
    # A template's copy on PostgreSQL: no migration to wait for.
    db = test_db.TestDatabase(migrate=True)
    yield db
    db.drop()


def test_triggers_not_firing_fail_the_check_and_db_sync_mends_them(
        tmp_path, migrated_db):
    """A bulk tool disabled the inventories' triggers (PostgreSQL; a
    trigger dropped elsewhere): the check fails naming the table and the
    command, which installs them again though the revision is current."""
    import json

    from placement.db import change_triggers
    conf_dir = tmp_path
    (conf_dir / 'placement.conf').write_text(
        '[placement_database]\nconnection = %s\n' % migrated_db.url)
    engine = migrated_db.engine
    pg = engine.dialect.name == 'postgresql'
    with engine.begin() as conn:
        if pg:
            conn.exec_driver_sql('ALTER TABLE inventories DISABLE TRIGGER '
                                 'USER')
        else:
            change_triggers.drop_one(conn, 'placement_chg_inventories_update')
        epoch = conn.execute(sa.select(models.CHANGE_SLOT.c.seq).where(
            models.CHANGE_SLOT.c.slot == -1)).scalar()
    check = status(conf_dir, 'upgrade', 'check', '--json')
    assert check.returncode == 2, check.stdout + check.stderr
    last = json.loads(check.stdout)['checks'][-1]
    assert last['result'] == 2
    assert 'not firing on inventories (' in last['details']
    assert '"placement-manage db sync"' in last['details']

    result = manage(conf_dir, 'db', 'sync')
    assert result.returncode == 0, result.stderr
    assert 'Change triggers were not firing on inventories (' in (
        result.stdout)
    with engine.connect() as conn:
        assert change_triggers.not_firing(conn) == {}
        assert conn.execute(sa.select(models.CHANGE_SLOT.c.seq).where(
            models.CHANGE_SLOT.c.slot == -1)).scalar() != epoch
    assert status(conf_dir, 'upgrade', 'check').returncode == 0


def test_upgrade_check_fails_on_a_json_policy_file(conf_dir, tmp_path):
    assert manage(conf_dir, 'db', 'sync').returncode == 0
    policy = tmp_path / 'policy.json'
    policy.write_text('{"placement:traits:list": "rule:admin_api"}')
    with open(conf_dir / 'placement.conf', 'a') as f:
        f.write('[oslo_policy]\npolicy_file = %s\n' % policy)
    check = status(conf_dir, 'upgrade', 'check')
    assert check.returncode == 2, check.stdout + check.stderr
    assert 'Your policy file is JSON-formatted' in check.stdout


# --- sample generators ----------------------------------------------------

def _generator(name, conf_name, output):
    return subprocess.run(
        [os.path.join(BIN, name), '--config-file',
         os.path.join(REPO, 'etc', 'placement', conf_name),
         '--output-file', str(output)],
        cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)


def test_config_sample_generates_with_placement_options(tmp_path):
    out = tmp_path / 'placement.conf.sample'
    result = _generator('oslo-config-generator', 'config-generator.conf', out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    for needle in ('[placement_database]', '[api]', '#auth_strategy = ',
                   '[placement]', 'incomplete_consumer_project_id',
                   '#sync_on_startup = false', '[keystone_authtoken]',
                   '[cors]', '[oslo_middleware]',
                   '#enable_proxy_headers_parsing = false',
                   # Ours, not oslo.middleware's 114688 (opts.set_defaults).
                   '#max_request_body_size = 1048576'):
        assert needle in text


def test_policy_sample_generates_with_placement_rules(tmp_path):
    out = tmp_path / 'policy.yaml.sample'
    result = _generator('oslopolicy-sample-generator',
                        'policy-generator.conf', out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert '"placement:traits:list"' in text
    assert '"placement:resource_classes:create"' in text
