"""JSON schemas and query-string rules for traits."""
import copy

# Trait and resource class names: upper case letters, digits, underscores.
CUSTOM_TRAIT_PATTERN = '^CUSTOM_[A-Z0-9_]+$'

TRAIT = {
    'type': 'string',
    'minLength': 1,
    'maxLength': 255,
}

CUSTOM_TRAIT = dict(TRAIT, pattern=CUSTOM_TRAIT_PATTERN)

SET_TRAITS_FOR_RP_SCHEMA = {
    'type': 'object',
    'properties': {
        'traits': {
            'type': 'array',
            'items': copy.deepcopy(TRAIT),
        },
        'resource_provider_generation': {'type': 'integer'},
    },
    'required': ['traits', 'resource_provider_generation'],
    'additionalProperties': False,
}

LIST_TRAIT_SCHEMA = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string'},
        'associated': {'type': 'string'},
    },
    'additionalProperties': False,
}
