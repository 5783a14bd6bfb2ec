"""Rule for /reshaper: a service-only operation by default (an admin
token needs the ``service`` role too, unless the legacy defaults are on)."""
from placement.policies import base

PREFIX = 'placement:reshaper:%s'
RESHAPE = PREFIX % 'reshape'

rules = [
    base.documented(RESHAPE, base.SERVICE,
                    'Reshape Inventory and Allocations.',
                    [('POST', '/reshaper')]),
]


def list_rules():
    return rules
