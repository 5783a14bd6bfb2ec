"""Rules for /traits and a provider's traits."""
from placement.policies import base

RP_TRAIT_PREFIX = 'placement:resource_providers:traits:%s'
RP_TRAIT_LIST = RP_TRAIT_PREFIX % 'list'
RP_TRAIT_UPDATE = RP_TRAIT_PREFIX % 'update'
RP_TRAIT_DELETE = RP_TRAIT_PREFIX % 'delete'

TRAITS_PREFIX = 'placement:traits:%s'
TRAITS_LIST = TRAITS_PREFIX % 'list'
TRAITS_SHOW = TRAITS_PREFIX % 'show'
TRAITS_UPDATE = TRAITS_PREFIX % 'update'
TRAITS_DELETE = TRAITS_PREFIX % 'delete'

RP_PATH = '/resource_providers/{uuid}/traits'

rules = [
    base.documented(TRAITS_LIST, base.ADMIN_OR_SERVICE, 'List traits.',
                    [('GET', '/traits')]),
    base.documented(TRAITS_SHOW, base.ADMIN_OR_SERVICE, 'Show trait.',
                    [('GET', '/traits/{name}')]),
    base.documented(TRAITS_UPDATE, base.ADMIN_OR_SERVICE, 'Update trait.',
                    [('PUT', '/traits/{name}')]),
    base.documented(TRAITS_DELETE, base.ADMIN_OR_SERVICE, 'Delete trait.',
                    [('DELETE', '/traits/{name}')]),
    base.documented(RP_TRAIT_LIST, base.ADMIN_OR_SERVICE,
                    'List resource provider traits.', [('GET', RP_PATH)]),
    base.documented(RP_TRAIT_UPDATE, base.ADMIN_OR_SERVICE,
                    'Update resource provider traits.', [('PUT', RP_PATH)]),
    base.documented(RP_TRAIT_DELETE, base.ADMIN_OR_SERVICE,
                    'Delete resource provider traits.',
                    [('DELETE', RP_PATH)]),
]


def list_rules():
    return rules
