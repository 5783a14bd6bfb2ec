"""Rules for /resource_providers and /resource_providers/{uuid}."""
from placement.policies import base

PREFIX = 'placement:resource_providers:%s'
LIST = PREFIX % 'list'
CREATE = PREFIX % 'create'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'
DELETE = PREFIX % 'delete'

rules = [
    base.documented(LIST, base.ADMIN_OR_SERVICE, 'List resource providers.',
                    [('GET', '/resource_providers')]),
    base.documented(CREATE, base.ADMIN_OR_SERVICE,
                    'Create resource provider.',
                    [('POST', '/resource_providers')]),
    base.documented(SHOW, base.ADMIN_OR_SERVICE, 'Show resource provider.',
                    [('GET', '/resource_providers/{uuid}')]),
    base.documented(UPDATE, base.ADMIN_OR_SERVICE,
                    'Update resource provider.',
                    [('PUT', '/resource_providers/{uuid}')]),
    base.documented(DELETE, base.ADMIN_OR_SERVICE,
                    'Delete resource provider.',
                    [('DELETE', '/resource_providers/{uuid}')]),
]


def list_rules():
    return rules
