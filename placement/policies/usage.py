"""Rules for usages: per provider, and totals per project.

Totals are readable by a reader of the project asked about (the target's
``project_id`` is the ``project_id`` query parameter), besides admin and
service."""
from placement.policies import base

PROVIDER_USAGES = 'placement:resource_providers:usages'
TOTAL_USAGES = 'placement:usages'

rules = [
    base.documented(PROVIDER_USAGES, base.ADMIN_OR_SERVICE,
                    'List resource provider usages.',
                    [('GET', '/resource_providers/{uuid}/usages')]),
    base.documented(TOTAL_USAGES, base.ADMIN_OR_PROJECT_READER_OR_SERVICE,
                    'List total resource usages for a given project.',
                    [('GET', '/usages')]),
]


def list_rules():
    return rules
