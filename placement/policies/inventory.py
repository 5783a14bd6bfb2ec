"""Rules for a provider's inventories."""
from placement.policies import base

PREFIX = 'placement:resource_providers:inventories:%s'
LIST = PREFIX % 'list'
CREATE = PREFIX % 'create'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'
DELETE = PREFIX % 'delete'
BASE_PATH = '/resource_providers/{uuid}/inventories'
ONE_PATH = BASE_PATH + '/{resource_class}'

rules = [
    base.documented(LIST, base.ADMIN_OR_SERVICE,
                    'List resource provider inventories.',
                    [('GET', BASE_PATH)]),
    base.documented(CREATE, base.ADMIN_OR_SERVICE,
                    'Create one resource provider inventory.',
                    [('POST', BASE_PATH)]),
    base.documented(SHOW, base.ADMIN_OR_SERVICE,
                    'Show resource provider inventory.',
                    [('GET', ONE_PATH)]),
    base.documented(UPDATE, base.ADMIN_OR_SERVICE,
                    'Update resource provider inventory.',
                    [('PUT', BASE_PATH), ('PUT', ONE_PATH)]),
    base.documented(DELETE, base.ADMIN_OR_SERVICE,
                    'Delete resource provider inventory.',
                    [('DELETE', BASE_PATH), ('DELETE', ONE_PATH)]),
]


def list_rules():
    return rules
