"""Base rules that the per-resource rules build on (placeholder until the
full upstream rule set lands)."""
from oslo_policy import policy

ADMIN_OR_SERVICE = 'role:admin or role:service'
RULE_ADMIN_API = 'rule:admin_api'

rules = [
    policy.RuleDefault('admin_api', 'role:admin',
                       description='Default rule for most placement APIs.',
                       scope_types=['project']),
]


def list_rules():
    return rules
