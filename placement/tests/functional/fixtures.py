"""Gabbi fixtures: each YAML file gets a fresh database and application.

``APIFixture`` starts an app with noauth2 on a new database (see
``placement.tests.db``) and exports uuids and names the YAML files use as
``$ENVIRON['NAME']``. Worlds are built through the API in the YAML itself.
"""
import contextlib
import json
import os
import shutil
import tempfile
import uuid

from gabbi import fixture

from placement import conf as placement_conf
from placement.db import api as db_api
from placement import deploy
from placement.tests import db as test_db

_APP = {'app': None}

ENV_UUIDS = (
    ['RP_UUID', 'ALT_RP_UUID', 'PARENT_PROVIDER_UUID',
     'ALT_PARENT_PROVIDER_UUID', 'CONSUMER_UUID', 'ALT_CONSUMER_UUID',
     'CONSUMER_ID', 'INSTANCE_UUID', 'MIGRATION_UUID',
     'PROJECT_ID', 'ALT_PROJECT_ID', 'USER_ID', 'ALT_USER_ID',
     'AGGA_UUID', 'AGGB_UUID', 'AGGC_UUID', 'AGGD_UUID', 'AGGE_UUID',
     'CN1_UUID', 'CN2_UUID', 'CN3_UUID', 'SS_UUID', 'SS1_UUID', 'SS2_UUID']
    + ['RP_UUID%d' % i for i in range(1, 10)]
    + ['CONSUMER_UUID%d' % i for i in range(1, 10)]
    + ['NUMA%d_UUID' % i for i in range(0, 4)]
    + ['PF%d_UUID' % i for i in range(0, 4)])


def _current_app(environ, start_response):
    return _APP['app'](environ, start_response)


def setup_app():
    """gabbi's intercept. gabbi asks for the app when it builds the suite,
    before any fixture runs, so hand it a shim that finds the app the
    current fixture built at request time."""
    return _current_app


def build_test_conf(url, overrides=None):
    """``overrides``: {(group, option): value}."""
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    conf.set_override('auth_strategy', 'noauth2', group='api')
    conf.set_override('connection', url, group='placement_database')
    for (group, name), value in (overrides or {}).items():
        conf.set_override(name, value, group=group)
    return conf


@contextlib.contextmanager
def app_over_world(world, overrides=None):
    """An app (noauth2) over a fresh test database into which ``world``
    (a candidate_worlds.WorldBuilder) was written; for pytest modules that
    build worlds in SQL rather than through the API."""
    with app_and_engine_over_world(world, overrides) as (app, _engine):
        yield app


@contextlib.contextmanager
def app_and_engine_over_world(world, overrides=None):
    """app_over_world, with the SQLAlchemy engine the app uses."""
    db = test_db.TestDatabase()
    world.write(db.engine)
    conf = build_test_conf(db.url, overrides)
    db_api.configure(conf)
    undo = db_api.patch_engine(db.engine)
    try:
        yield deploy.loadapp(conf), db.engine
    finally:
        for group, name in (list(overrides or ())
                            + [('api', 'auth_strategy'),
                               ('placement_database', 'connection')]):
            conf.clear_override(name, group=group)
        undo()
        db.drop()


class APIFixture(fixture.GabbiFixture):
    """A fresh database and placement app for one YAML file."""

    conf_overrides = {}

    def start_fixture(self):
        self.db = test_db.TestDatabase()
        self.conf = build_test_conf(self.db.url, self.conf_overrides)
        db_api.configure(self.conf)
        self.undo_engine = db_api.patch_engine(self.db.engine)
        self._saved_env = {}
        for name in ENV_UUIDS:
            self._set_env(name, str(uuid.uuid4()))
        self._set_env('RP_NAME', 'rp-' + uuid.uuid4().hex[:8])
        self._set_env('ALT_RP_NAME', 'rp-' + uuid.uuid4().hex[:8])
        self._set_env('DB_BACKEND', test_db.backend())
        _APP['app'] = deploy.loadapp(self.conf)

    def _set_env(self, name, value):
        self._saved_env.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    def stop_fixture(self):
        _APP['app'] = None
        # placement's option groups are module-level OptGroup objects that
        # every ConfigOpts shares, so overrides outlive this conf: clear
        # them, or later tests (e.g. test_conf) see noauth2 and friends.
        for group, name in (list(self.conf_overrides)
                            + [('api', 'auth_strategy'),
                               ('placement_database', 'connection')]):
            self.conf.clear_override(name, group=group)
        self.undo_engine()
        self.db.drop()
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class RandomizedCandidatesFixture(APIFixture):
    conf_overrides = {('placement', 'randomize_allocation_candidates'): True}


class MaxCandidatesFixture(APIFixture):
    conf_overrides = {('placement', 'max_allocation_candidates'): 3}


class MaxCandidatesBreadthFirstFixture(APIFixture):
    conf_overrides = {
        ('placement', 'max_allocation_candidates'): 3,
        ('placement', 'allocation_candidates_generation_strategy'):
            'breadth-first'}


class SmallBodyLimitFixture(APIFixture):
    """A 1 KiB request body limit, so 413 tests need no megabyte bodies."""
    conf_overrides = {('oslo_middleware', 'max_request_body_size'): 1024}


class PolicyFileFixture(APIFixture):
    """An operator policy file ([oslo_policy] policy_file) overriding two
    defaults: project readers may list traits; nobody may list resource
    classes."""
    policy_rules = {'placement:traits:list': 'role:reader',
                    'placement:resource_classes:list': '!'}

    def start_fixture(self):
        self._policy_dir = tempfile.mkdtemp(prefix='placement-policy-')
        path = os.path.join(self._policy_dir, 'policy.yaml')
        with open(path, 'w') as f:
            json.dump(self.policy_rules, f)   # JSON is YAML
        self.conf_overrides = dict(self.conf_overrides)
        self.conf_overrides[('oslo_policy', 'policy_file')] = path
        super().start_fixture()

    def stop_fixture(self):
        super().stop_fixture()
        shutil.rmtree(self._policy_dir, ignore_errors=True)


class LegacyPolicyFixture(APIFixture):
    """The legacy policy defaults: the deprecated rule:admin_api
    alternatives count. (oslo.policy 6 always enforces token scope; it has
    no enforce_scope option any more.)"""
    conf_overrides = {('oslo_policy', 'enforce_new_defaults'): False}


class ProxyHeadersFixture(APIFixture):
    """[oslo_middleware] enable_proxy_headers_parsing on: the app sits
    behind a proxy whose X-Forwarded-* / Forwarded headers it trusts."""
    conf_overrides = {
        ('oslo_middleware', 'enable_proxy_headers_parsing'): True}


class MetricsFixture(APIFixture):
    """``[metrics] enabled``: GET /metrics is served."""
    conf_overrides = {('metrics', 'enabled'): True}


class MetricsOpenFixture(PolicyFileFixture):
    """/metrics opened to anyone (no token) by the operator's policy, and
    to a ``metrics`` role; the API stays closed to both."""
    conf_overrides = {('metrics', 'enabled'): True}
    policy_rules = {'placement:metrics:read': '@'}
