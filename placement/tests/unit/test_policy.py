"""The default policy: upstream's rule names, and who passes which rule
with the new defaults, the legacy ones, and a system-scoped token."""
import os

import pytest

from placement import conf as placement_conf
from placement import context
from placement import exception
from placement import policies
from placement.policies import ops as ops_policies
from placement import policy

ALL_RULES = {
    'placement:resource_providers:list',
    'placement:resource_providers:create',
    'placement:resource_providers:show',
    'placement:resource_providers:update',
    'placement:resource_providers:delete',
    'placement:resource_classes:list',
    'placement:resource_classes:create',
    'placement:resource_classes:show',
    'placement:resource_classes:update',
    'placement:resource_classes:delete',
    'placement:resource_providers:inventories:list',
    'placement:resource_providers:inventories:create',
    'placement:resource_providers:inventories:show',
    'placement:resource_providers:inventories:update',
    'placement:resource_providers:inventories:delete',
    'placement:resource_providers:aggregates:list',
    'placement:resource_providers:aggregates:update',
    'placement:resource_providers:usages',
    'placement:usages',
    'placement:traits:list',
    'placement:traits:show',
    'placement:traits:update',
    'placement:traits:delete',
    'placement:resource_providers:traits:list',
    'placement:resource_providers:traits:update',
    'placement:resource_providers:traits:delete',
    'placement:allocations:manage',
    'placement:allocations:list',
    'placement:allocations:update',
    'placement:allocations:delete',
    'placement:resource_providers:allocations:list',
    'placement:allocation_candidates:list',
    'placement:reshaper:reshape',
}
# Parameter ids without colons: gabbi's pytest plugin reads "a:b" in a
# test id as a gabbi suite name.
def _id(rule):
    return rule.replace(':', '.')


BASE_RULES = {'admin_api', 'service_api', 'admin_or_service_api',
              'project_reader_api', 'admin_or_project_reader_or_service_api'}


@pytest.fixture
def enforce():
    """A function (ctx, rule, target=None) -> bool over a fresh enforcer;
    ``enforce.configure(**oslo_policy_overrides)`` rebuilds it."""
    def configure(**overrides):
        conf = placement_conf.build_conf(args=[], default_config_files=[])
        for name, value in overrides.items():
            conf.set_override(name, value, group='oslo_policy')
        policy.init(conf)

    def check(ctx, rule, target=None):
        return bool(ctx.can(rule, target=target, fatal=False))

    check.configure = configure
    configure()
    yield check
    policy.reset()


def project_ctx(*roles, project='proj'):
    return context.RequestContext(user_id='user', project_id=project,
                                  roles=list(roles))


def test_rule_names_are_upstreams():
    """Upstream's rules, plus the operator extensions' own."""
    names = {rule.name for rule in policies.list_rules()}
    extensions = {rule.name for rule in ops_policies.list_rules()}
    assert names - extensions == ALL_RULES | BASE_RULES
    assert extensions == {'placement:metrics:read',
                          'placement:capacity:read',
                          'placement:allocation_candidates:explain',
                          'placement:ui:read'}


def test_documented_rules_are_project_scoped_with_operations():
    for rule in policies.list_rules():
        if rule.name in BASE_RULES:
            continue
        assert rule.scope_types == ['project'], rule.name
        assert rule.operations, rule.name


def test_default_check_strings():
    by_name = {rule.name: rule for rule in policies.list_rules()}
    assert by_name['placement:traits:update'].check_str == (
        'rule:admin_or_service_api')
    assert by_name['placement:reshaper:reshape'].check_str == (
        'rule:service_api')
    assert by_name['placement:usages'].check_str == (
        'rule:admin_or_project_reader_or_service_api')
    assert by_name['project_reader_api'].check_str == (
        'role:reader and project_id:%(project_id)s')
    assert by_name['project_reader_api'].scope_types is None
    for name in BASE_RULES - {'admin_api'}:
        deprecated = by_name[name].deprecated_rule
        assert deprecated.name == 'rule:admin_api'
        assert deprecated.check_str == 'role:admin'


@pytest.mark.parametrize('rule', sorted(ALL_RULES - {
    'placement:reshaper:reshape'}), ids=_id)
def test_admin_passes_every_rule_but_reshape(enforce, rule):
    assert enforce(project_ctx('admin'), rule)


def test_explain_is_for_admins_only(enforce):
    rule = 'placement:allocation_candidates:explain'
    assert enforce(project_ctx('admin'), rule)
    assert not enforce(project_ctx('service'), rule)
    assert not enforce(project_ctx('reader'), rule)
    enforce.configure(enforce_new_defaults=False)
    assert enforce(project_ctx('admin'), rule)
    assert not enforce(project_ctx('member'), rule)


def test_admin_alone_may_not_reshape(enforce):
    assert not enforce(project_ctx('admin'), 'placement:reshaper:reshape')
    assert enforce(project_ctx('admin', 'service'),
                   'placement:reshaper:reshape')


@pytest.mark.parametrize('rule', sorted(ALL_RULES), ids=_id)
def test_service_passes_every_rule(enforce, rule):
    assert enforce(project_ctx('service'), rule)


@pytest.mark.parametrize('rule', sorted(ALL_RULES - {'placement:usages'}),
                         ids=_id)
@pytest.mark.parametrize('roles', [(), ('reader',), ('member', 'reader')])
def test_project_users_fail_every_rule_but_usages(enforce, rule, roles):
    assert not enforce(project_ctx(*roles), rule)


def test_reader_may_see_usages_of_own_project_only(enforce):
    ctx = project_ctx('reader', project='proj')
    assert enforce(ctx, 'placement:usages', {'project_id': 'proj'})
    assert not enforce(ctx, 'placement:usages', {'project_id': 'other'})
    assert not enforce(project_ctx('member', project='proj'),
                       'placement:usages', {'project_id': 'proj'})


@pytest.mark.parametrize('rule', sorted(ALL_RULES), ids=_id)
def test_system_scope_fails_every_rule(enforce, rule):
    ctx = context.RequestContext(user_id='admin', system_scope='all',
                                 roles=['admin', 'service'])
    assert not enforce(ctx, rule)


def test_system_scope_failure_names_the_rule(enforce):
    ctx = context.RequestContext(user_id='admin', system_scope='all',
                                 roles=['admin'])
    with pytest.raises(exception.PolicyNotAuthorized) as caught:
        ctx.can('placement:traits:list')
    assert caught.value.format_message() == 'placement:traits:list'


def test_refusal_message(enforce):
    with pytest.raises(exception.PolicyNotAuthorized) as caught:
        project_ctx().can('placement:traits:update')
    assert caught.value.format_message() == (
        'Policy does not allow placement:traits:update to be performed.')


def test_legacy_defaults_let_admin_reshape(enforce):
    enforce.configure(enforce_new_defaults=False)
    assert enforce(project_ctx('admin'), 'placement:reshaper:reshape')
    assert enforce(project_ctx('admin'), 'placement:usages',
                   {'project_id': 'other'})
    assert not enforce(project_ctx('reader'), 'placement:traits:list')


def test_policy_file_overrides_one_rule(enforce, tmp_path):
    path = tmp_path / 'policy.yaml'
    path.write_text('"placement:traits:list": "role:reader"\n')
    enforce.configure(policy_file=str(path))
    assert enforce(project_ctx('reader'), 'placement:traits:list')
    assert not enforce(project_ctx('admin'), 'placement:traits:list')
    assert enforce(project_ctx('admin'), 'placement:traits:show')


def _traits_list_policy(enforce, tmp_path, monkeypatch, check_str):
    """A policy file giving placement:traits:list ``check_str``, under a
    clock of our own; returns (clock, rewrite(check_str))."""
    clock = [1000.0]
    monkeypatch.setattr(policy.time, 'monotonic', lambda: clock[0])
    path = tmp_path / 'policy.yaml'

    def rewrite(check_str):
        path.write_text('"placement:traits:list": "%s"\n' % check_str)
        # mtime granularity: make the change visible as a change.
        later = path.stat().st_mtime + 5
        os.utime(path, (later, later))

    rewrite(check_str)
    enforce.configure(policy_file=str(path))
    return clock, rewrite


def test_policy_file_changes_are_seen_within_the_interval(
        enforce, tmp_path, monkeypatch):
    clock, rewrite = _traits_list_policy(enforce, tmp_path, monkeypatch,
                                         'role:reader')
    assert not enforce(project_ctx('admin'), 'placement:traits:list')
    rewrite('role:admin')
    clock[0] += policy.RECHECK_INTERVAL / 2
    assert not enforce(project_ctx('admin'), 'placement:traits:list')
    clock[0] += policy.RECHECK_INTERVAL
    assert enforce(project_ctx('admin'), 'placement:traits:list')
    assert not enforce(project_ctx('reader'), 'placement:traits:list')


def test_get_enforcer_for_oslopolicy_tools():
    enforcer = policy.get_enforcer()
    try:
        assert 'placement:traits:list' in enforcer.registered_rules
    finally:
        policy.reset()


def _count_evaluations(monkeypatch):
    """How many times oslo.policy evaluates a rule."""
    calls = []
    real = policy.Enforcer.enforce

    def counting(self, *args, **kwargs):
        calls.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(policy.Enforcer, 'enforce', counting)
    return calls


def test_allowed_decisions_are_remembered_denials_are_not(enforce,
                                                          monkeypatch):
    calls = _count_evaluations(monkeypatch)
    admin, reader = project_ctx('admin'), project_ctx('reader')
    for _ in range(3):
        assert enforce(admin, 'placement:traits:list')
        assert not enforce(reader, 'placement:traits:list')
    assert calls.count('placement:traits:list') == 1 + 3
    # Another target, other credentials: evaluated afresh.
    assert enforce(project_ctx('reader', project='p2'), 'placement:usages',
                   {'project_id': 'p2'})
    assert not enforce(project_ctx('reader', project='p2'),
                       'placement:usages', {'project_id': 'p3'})
    assert enforce(project_ctx('admin', project='p2'),
                   'placement:traits:list')
    assert calls.count('placement:usages') == 2
    assert calls.count('placement:traits:list') == 5


def test_a_changed_policy_file_revokes_what_was_allowed(
        enforce, tmp_path, monkeypatch):
    clock, rewrite = _traits_list_policy(enforce, tmp_path, monkeypatch,
                                         'role:reader')
    assert enforce(project_ctx('reader'), 'placement:traits:list')
    assert enforce(project_ctx('reader'), 'placement:traits:list')
    rewrite('role:admin')
    clock[0] += policy.RECHECK_INTERVAL * 1.5
    assert not enforce(project_ctx('reader'), 'placement:traits:list')
    assert enforce(project_ctx('admin'), 'placement:traits:list')


def test_rules_that_ask_elsewhere_are_never_remembered(
        enforce, tmp_path, monkeypatch):
    path = tmp_path / 'policy.yaml'
    # role:reader decides first: the http check is never called here.
    path.write_text('"placement:traits:list": '
                    '"role:reader or http://127.0.0.1:9/allow"\n')
    enforce.configure(policy_file=str(path))
    calls = _count_evaluations(monkeypatch)
    for _ in range(3):
        assert enforce(project_ctx('reader'), 'placement:traits:list')
        assert enforce(project_ctx('admin'), 'placement:traits:show')
    assert calls.count('placement:traits:list') == 3
    assert calls.count('placement:traits:show') == 3


def test_ui_settings_say_noauth2_only_under_it():
    """The page hints at noauth2 tokens only when the service uses it."""
    import types

    import webob

    from placement.handlers import ui

    for strategy, expect in (('noauth2', True), ('keystone', False)):
        conf = types.SimpleNamespace(
            api=types.SimpleNamespace(auth_strategy=strategy))
        req = webob.Request.blank('/ui/settings.json')
        req.environ['placement.context'] = types.SimpleNamespace(config=conf)
        assert ui.settings(req).json == {'noauth2': expect}
