"""Inventory request bodies: one record, or the whole set of a provider."""
import copy

MAX_INT = 0x7FFFFFFF
# Largest single-precision float: allocation_ratio's column is a FLOAT.
SQL_SP_FLOAT_MAX = 3.40282e+38
RC_PATTERN = '^[A-Z0-9_]+$'


def _int(minimum):
    return {'type': 'integer', 'maximum': MAX_INT, 'minimum': minimum}


BASE_INVENTORY = {
    'type': 'object',
    'properties': {
        'resource_provider_generation': {'type': 'integer'},
        'total': _int(1),
        'reserved': _int(0),
        'min_unit': _int(1),
        'max_unit': _int(1),
        'step_size': _int(1),
        'allocation_ratio': {'type': 'number', 'maximum': SQL_SP_FLOAT_MAX},
    },
    'required': ['total', 'resource_provider_generation'],
    'additionalProperties': False,
}

# POST .../inventories: one class, no generation.
POST_INVENTORY = copy.deepcopy(BASE_INVENTORY)
POST_INVENTORY['properties']['resource_class'] = {
    'type': 'string', 'pattern': RC_PATTERN}
POST_INVENTORY['required'] = ['total', 'resource_class']

_RECORD = copy.deepcopy(BASE_INVENTORY)
_RECORD['required'] = ['total']

PUT_INVENTORIES = {
    'type': 'object',
    'properties': {
        'resource_provider_generation': {'type': 'integer'},
        'inventories': {
            'type': 'object',
            'patternProperties': {RC_PATTERN: _RECORD},
        },
    },
    'required': ['resource_provider_generation', 'inventories'],
    'additionalProperties': False,
}

# What an absent field means.
DEFAULTS = {
    'reserved': 0,
    'min_unit': 1,
    'max_unit': MAX_INT,
    'step_size': 1,
    'allocation_ratio': 1.0,
}
