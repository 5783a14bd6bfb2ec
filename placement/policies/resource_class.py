"""Rules for /resource_classes."""
from placement.policies import base

PREFIX = 'placement:resource_classes:%s'
LIST = PREFIX % 'list'
CREATE = PREFIX % 'create'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'
DELETE = PREFIX % 'delete'

rules = [
    base.documented(LIST, base.ADMIN_OR_SERVICE, 'List resource classes.',
                    [('GET', '/resource_classes')]),
    base.documented(CREATE, base.ADMIN_OR_SERVICE, 'Create resource class.',
                    [('POST', '/resource_classes')]),
    base.documented(SHOW, base.ADMIN_OR_SERVICE, 'Show resource class.',
                    [('GET', '/resource_classes/{name}')]),
    base.documented(UPDATE, base.ADMIN_OR_SERVICE, 'Update resource class.',
                    [('PUT', '/resource_classes/{name}')]),
    base.documented(DELETE, base.ADMIN_OR_SERVICE, 'Delete resource class.',
                    [('DELETE', '/resource_classes/{name}')]),
]


def list_rules():
    return rules
