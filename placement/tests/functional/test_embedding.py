"""Placement embedded in another project's test process, as nova's and
osc-placement's functional tests embed it: the fixtures they import from
the installed package, database reconfiguration per test, and SQLite
listeners that stay on placement's own engines."""
import logging
import sqlite3

from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslo_policy import opts as policy_opts
import pytest
import requests
import sqlalchemy as sa

from placement import conf as placement_conf
from placement.db import api as db_api
from placement.tests import fixtures as db_fixtures
from placement.tests.functional.fixtures import capture
from placement.tests.functional.fixtures import placement as pfix

RP = {'name': 'cn1', 'uuid': '8d9b0f2e-3c1a-4e49-9b55-2b3c14ae5f01'}


def _get(fix, path, version='1.39'):
    return requests.get(fix.endpoint + path, headers={
        'x-auth-token': fix.token,
        'openstack-api-version': 'placement %s' % version})


def _create_rp(fix):
    resp = requests.post(fix.endpoint + '/resource_providers', json=RP,
                         headers={'x-auth-token': fix.token,
                                  'openstack-api-version': 'placement 1.20'})
    assert resp.status_code == 200, resp.text
    return resp


def _rp_uuids(fix):
    resp = _get(fix, '/resource_providers')
    assert resp.status_code == 200, resp.text
    return [rp['uuid'] for rp in resp.json()['resource_providers']]


def test_fresh_database_per_fixture():
    with pfix.PlacementFixture() as fix:
        assert fix.token == 'admin'
        assert fix.endpoint.endswith('/placement')
        root = requests.get(fix.endpoint + '/').json()
        assert root['versions'][0]['max_version'] == '1.39'
        resp = _create_rp(fix)
        # wsgi-intercept mounts the app under /placement: links keep it.
        assert resp.json()['links'][0]['href'].startswith('/placement/')
        assert _rp_uuids(fix) == [RP['uuid']]
        traits = _get(fix, '/traits?name=startswith:HW_CPU').json()
        assert traits['traits'], 'standard traits were not synced'
        first_url = db_api.get_engine().url
    with pfix.PlacementFixture() as fix:
        assert _rp_uuids(fix) == []
        assert db_api.get_engine().url != first_url


def test_token_is_sent_as_given():
    with pfix.PlacementFixture(token='user:project') as fix:
        resp = _get(fix, '/resource_providers')
        assert resp.status_code == 403, resp.text


def test_intercept_is_removed():
    with pfix.PlacementFixture() as fix:
        endpoint = fix.endpoint
    with pytest.raises(requests.ConnectionError):
        requests.get(endpoint + '/', timeout=5)


def test_without_intercept():
    with pfix.PlacementFixture(use_intercept=False) as fix:
        assert fix.endpoint is None
        assert callable(fix.app)


def test_database_shared_by_two_fixtures():
    """nova's regression test for bug 1679750: one Database fixture,
    placement started twice over it on a ConfigOpts of the caller's."""
    conf = cfg.ConfigOpts()
    with config_fixture.Config(conf) as conf_fixture:
        placement_conf.register_opts(conf)
        with db_fixtures.Database(conf_fixture, set_config=True):
            kwargs = dict(conf_fixture=conf_fixture, db=False,
                          register_opts=False)
            with pfix.PlacementFixture(**kwargs) as fix:
                _create_rp(fix)
            with pfix.PlacementFixture(**kwargs) as fix:
                assert _rp_uuids(fix) == [RP['uuid']]


def test_subclass_names_its_database(tmp_path):
    """nova's subclass sets the connection in _configure_placement; the
    schema is made there."""
    url = 'sqlite:///%s' % (tmp_path / 'mine.db')

    class Mine(pfix.PlacementFixture):
        def _configure_placement(self, conf_fixture):
            super()._configure_placement(conf_fixture)
            conf_fixture.config(connection=url, group='placement_database')

    with Mine() as fix:
        _create_rp(fix)
        assert str(db_api.get_engine().url) == url
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        count = conn.execute(sa.text(
            'SELECT count(*) FROM resource_providers')).scalar()
    engine.dispose()
    assert count == 1


def test_database_needs_a_connection():
    conf = cfg.ConfigOpts()
    with config_fixture.Config(conf) as conf_fixture:
        placement_conf.register_opts(conf)
        # fixtures wraps a setUp error in MultipleExceptions.
        with pytest.raises(Exception, match='needs .placement_database'):
            with db_fixtures.Database(conf_fixture):
                pass


def test_logging_captures_info_and_formats_debug():
    log = logging.getLogger('placement.test_embedding')
    fix = capture.Logging()
    with fix:
        log.info('kept %s', 'this')
        log.debug('dropped %s', 'that')
        text = fix.getDetails()['log'].as_text()
        with pytest.raises(TypeError):
            log.debug('bad format %d', 'not a number')
    assert 'kept this' in text
    assert 'dropped' not in text


def test_register_opts_includes_oslo_log():
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf([], default_config_files=[])
    assert conf.debug is False
    assert conf.log_file is None
    assert conf.placement_database.connection is None


def _journal_mode(engine):
    with engine.connect() as conn:
        return conn.exec_driver_sql('PRAGMA journal_mode').scalar()


def test_listeners_stay_on_placement_engines(tmp_path):
    """Importing placement.db.api changes no engine but its own."""
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    ours = 'sqlite:///%s' % (tmp_path / 'ours.db')
    conf.set_override('connection', ours, group='placement_database')
    try:
        db_api.configure(conf)
        assert _journal_mode(db_api.get_engine()) == 'wal'
    finally:
        conf.clear_override('connection', group='placement_database')
    other = sa.create_engine('sqlite:///%s' % (tmp_path / 'other.db'))
    statements = []
    sa.event.listen(other, 'before_cursor_execute',
                    lambda *args: statements.append(args[2]))
    assert _journal_mode(other) == 'delete'
    with other.connect() as conn:
        assert conn.connection.driver_connection.isolation_level == ''
        conn.exec_driver_sql('CREATE TABLE t (x INTEGER)')
        conn.commit()
    other.dispose()
    assert not sa.event.contains(other, 'begin', db_api._sqlite_begin)


def test_configured_engine_begins_immediate(tmp_path):
    """Several workers on one SQLite file: a transaction takes the write
    lock when it begins (ahead of oslo.db's own plain BEGIN), so a read
    followed by a write cannot fail with 'database is locked'."""
    path = str(tmp_path / 'ours.db')
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    conf.set_override('connection', 'sqlite:///' + path,
                      group='placement_database')
    try:
        db_api.configure(conf)
        engine = db_api.get_engine()
        with engine.begin() as conn:
            conn.exec_driver_sql('SELECT 1')
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            with pytest.raises(sqlite3.OperationalError, match='locked'):
                other.execute('BEGIN IMMEDIATE')
            other.close()
    finally:
        conf.clear_override('connection', group='placement_database')


def test_reconfigure_switches_database(tmp_path, monkeypatch):
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    urls = ['sqlite:///%s' % (tmp_path / name) for name in ('a.db', 'b.db')]
    try:
        conf.set_override('connection', urls[0], group='placement_database')
        db_api.configure(conf)
        first = db_api.get_engine()
        db_api.configure(conf)
        assert db_api.get_engine() is first, 'same options: same engine'
        disposed = []
        monkeypatch.setattr(db_api._CONFIGURED['manager'], 'dispose_pool',
                            lambda: disposed.append(True))
        conf.set_override('connection', urls[1], group='placement_database')
        db_api.configure(conf)
        assert str(db_api.get_engine().url) == urls[1]
        assert disposed, 'old pool not disposed'
    finally:
        conf.clear_override('connection', group='placement_database')


def test_admin_token_may_reshape():
    """nova's report client tests reshape with the admin token, as
    upstream's fixture allows (legacy policy defaults)."""
    with pfix.PlacementFixture() as fix:
        resp = requests.post(fix.endpoint + '/reshaper', json={}, headers={
            'x-auth-token': 'admin',
            'openstack-api-version': 'placement 1.30'})
        assert resp.status_code == 400, resp.text


def _policy_default():
    """oslo.policy's default for ``enforce_new_defaults`` now: its option
    objects, and so their defaults, are shared by every ConfigOpts in the
    process."""
    probe = cfg.ConfigOpts()
    policy_opts.set_defaults(probe)
    return probe.oslo_policy.enforce_new_defaults


def test_handed_conf_keeps_the_embedders_explicit_values(tmp_path):
    """What the embedder set on the configuration it hands the fixture
    stands while placement runs on it, as with upstream's fixture: the
    legacy policy rules are a default there, not an override (issue 51)."""
    url = 'sqlite:///%s' % (tmp_path / 'mine.db')
    conf = cfg.ConfigOpts()
    with config_fixture.Config(conf) as conf_fixture:
        placement_conf.register_opts(conf)
        conf([], project='embedder', default_config_files=[])
        conf_fixture.config(group='oslo_policy', enforce_new_defaults=True)
        conf_fixture.config(group='placement_database', connection=url)
        conf_fixture.config(group='oslo_middleware',
                            max_request_body_size=4096)
        with pfix.PlacementFixture(conf_fixture=conf_fixture,
                                   register_opts=False, use_intercept=False):
            assert conf.oslo_policy.enforce_new_defaults is True
            assert conf.placement_database.connection == url
            assert conf.oslo_middleware.max_request_body_size == 4096
            assert conf.project == 'embedder'
            # The one value the fixture must impose, as upstream's does:
            # its token is noauth2's.
            assert conf.api.auth_strategy == 'noauth2'


def test_legacy_policy_is_the_whole_process_default_while_running():
    """Upstream's fixture makes the legacy rules oslo.policy's default in
    the whole process, the embedder's own configuration included: nova's
    tests in which a user with only the role 'other' creates a server
    pass by it. An explicit value still wins; ours puts the default back
    when it ends."""
    before = _policy_default()
    embedders = cfg.ConfigOpts()
    policy_opts.set_defaults(embedders)
    explicit = cfg.ConfigOpts()
    policy_opts.set_defaults(explicit)
    explicit.set_override('enforce_new_defaults', True, group='oslo_policy')
    with pfix.PlacementFixture(use_intercept=False):
        assert embedders.oslo_policy.enforce_new_defaults is False
        assert explicit.oslo_policy.enforce_new_defaults is True
    assert _policy_default() == before
