"""Rules for allocations, per consumer and per provider."""
from placement.policies import base

RP_ALLOC_LIST = 'placement:resource_providers:allocations:list'

ALLOC_PREFIX = 'placement:allocations:%s'
ALLOC_LIST = ALLOC_PREFIX % 'list'
ALLOC_MANAGE = ALLOC_PREFIX % 'manage'
ALLOC_UPDATE = ALLOC_PREFIX % 'update'
ALLOC_DELETE = ALLOC_PREFIX % 'delete'

rules = [
    base.documented(ALLOC_MANAGE, base.ADMIN_OR_SERVICE,
                    'Manage allocations.', [('POST', '/allocations')]),
    base.documented(ALLOC_LIST, base.ADMIN_OR_SERVICE, 'List allocations.',
                    [('GET', '/allocations/{consumer_uuid}')]),
    base.documented(ALLOC_UPDATE, base.ADMIN_OR_SERVICE,
                    'Update allocations.',
                    [('PUT', '/allocations/{consumer_uuid}')]),
    base.documented(ALLOC_DELETE, base.ADMIN_OR_SERVICE,
                    'Delete allocations.',
                    [('DELETE', '/allocations/{consumer_uuid}')]),
    base.documented(RP_ALLOC_LIST, base.ADMIN_OR_SERVICE,
                    'List resource provider allocations.',
                    [('GET', '/resource_providers/{uuid}/allocations')]),
]


def list_rules():
    return rules
