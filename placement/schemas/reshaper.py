"""JSON schemas for POST /reshaper (1.30+): the new inventories of some
providers and the new allocations of some consumers, in one body."""
import copy

from placement.schemas import allocation
from placement.schemas import inventory


def _reshaper_schema(want):
    # Allocations are the POST /allocations form of the version, except
    # that there may be none at all (the inventory being moved may simply
    # have no allocations yet).
    return {
        'type': 'object',
        'properties': {
            'inventories': {
                'type': 'object',
                'patternProperties': {
                    allocation.UUID_PATTERN: copy.deepcopy(
                        inventory.PUT_INVENTORIES),
                },
                # Nothing to reshape without at least one provider.
                'minProperties': 1,
                'additionalProperties': False,
            },
            'allocations': allocation.allocations_by_consumer(want),
        },
        'required': ['inventories', 'allocations'],
        'additionalProperties': False,
    }


POST_RESHAPER_SCHEMA = _reshaper_schema((1, 30))
POST_RESHAPER_SCHEMA_V1_34 = _reshaper_schema((1, 34))
POST_RESHAPER_SCHEMA_V1_38 = _reshaper_schema((1, 38))


def post_schema(want):
    if want >= (1, 38):
        return POST_RESHAPER_SCHEMA_V1_38
    if want >= (1, 34):
        return POST_RESHAPER_SCHEMA_V1_34
    return POST_RESHAPER_SCHEMA
