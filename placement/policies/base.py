"""Base rules every per-resource rule refers to.

The ``admin_api`` legacy rule is what all rules fell back to before the
scoped-role defaults; it remains the deprecated alternative, so an operator
with ``[oslo_policy] enforce_new_defaults = False`` still gets ``role:admin``
semantics everywhere.
"""
from oslo_log import versionutils
from oslo_policy import policy

RULE_ADMIN_API = 'rule:admin_api'
ADMIN_OR_SERVICE = 'rule:admin_or_service_api'
SERVICE = 'rule:service_api'
ADMIN_OR_PROJECT_READER_OR_SERVICE = (
    'rule:admin_or_project_reader_or_service_api')

_DEPRECATED_REASON = """
Placement API policies are introducing new default roles with scope_type
capabilities. Old policies are deprecated and silently going to be ignored
in the placement 6.0.0 (Xena) release.
"""

DEPRECATED_ADMIN_POLICY = policy.DeprecatedRule(
    name=RULE_ADMIN_API,
    check_str='role:admin',
    deprecated_reason=_DEPRECATED_REASON,
    deprecated_since=versionutils.deprecated.WALLABY,
)

rules = [
    policy.RuleDefault(
        'admin_api', 'role:admin',
        description='Default rule for most placement APIs.',
        scope_types=['project']),
    policy.RuleDefault(
        'service_api', 'role:service',
        description='Default rule for service-to-service placement APIs.',
        scope_types=['project'],
        deprecated_rule=DEPRECATED_ADMIN_POLICY),
    policy.RuleDefault(
        'admin_or_service_api', 'role:admin or role:service',
        description='Default rule for most placement APIs.',
        scope_types=['project'],
        deprecated_rule=DEPRECATED_ADMIN_POLICY),
    # Upstream gives this one no scope_types; keep that.
    policy.RuleDefault(
        'project_reader_api', 'role:reader and project_id:%(project_id)s',
        description='Default rule for Project level reader APIs.',
        deprecated_rule=DEPRECATED_ADMIN_POLICY),
    policy.RuleDefault(
        'admin_or_project_reader_or_service_api',
        'role:admin or rule:project_reader_api or role:service',
        description='Default rule for project level reader APIs.',
        scope_types=['project'],
        deprecated_rule=DEPRECATED_ADMIN_POLICY),
]


def list_rules():
    return rules


def documented(name, check_str, description, operations):
    """A project-scoped DocumentedRuleDefault; ``operations`` is a list of
    (method, path) pairs."""
    return policy.DocumentedRuleDefault(
        name=name, check_str=check_str, description=description,
        operations=[{'method': m, 'path': p} for m, p in operations],
        scope_types=['project'])
