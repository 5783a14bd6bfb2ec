"""Rule for the explain extension (/ops/explain/...): admin only, as
upstream's admin rules, since it shows every provider's usage."""
from placement.policies import base

EXPLAIN = 'placement:allocation_candidates:explain'

rules = [
    base.documented(EXPLAIN, base.RULE_ADMIN_API,
                    'Explain an allocation candidates query: which '
                    'providers each step kept, and why the others were '
                    'excluded.',
                    [('GET', '/ops/explain/allocation_candidates')]),
]


def list_rules():
    return rules
