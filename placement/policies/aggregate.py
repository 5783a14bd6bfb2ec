"""Rules for a provider's aggregates."""
from placement.policies import base

PREFIX = 'placement:resource_providers:aggregates:%s'
LIST = PREFIX % 'list'
UPDATE = PREFIX % 'update'
BASE_PATH = '/resource_providers/{uuid}/aggregates'

rules = [
    base.documented(LIST, base.ADMIN_OR_SERVICE,
                    'List resource provider aggregates.',
                    [('GET', BASE_PATH)]),
    base.documented(UPDATE, base.ADMIN_OR_SERVICE,
                    'Update resource provider aggregates.',
                    [('PUT', BASE_PATH)]),
]


def list_rules():
    return rules
