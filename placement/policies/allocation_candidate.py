"""Rule for /allocation_candidates."""
from placement.policies import base

LIST = 'placement:allocation_candidates:list'

rules = [
    base.documented(LIST, base.ADMIN_OR_SERVICE,
                    'List allocation candidates.',
                    [('GET', '/allocation_candidates')]),
]


def list_rules():
    return rules
