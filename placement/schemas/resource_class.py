"""JSON schemas for resource classes."""
import copy

CUSTOM_RC_PATTERN = '^CUSTOM_[A-Z0-9_]+$'

POST_RC_SCHEMA_V1_2 = {
    'type': 'object',
    'properties': {
        'name': {
            'type': 'string',
            'pattern': CUSTOM_RC_PATTERN,
            'maxLength': 255,
        },
    },
    'required': ['name'],
    'additionalProperties': False,
}

# The 1.2-1.6 rename body, and (from 1.7) the rule the URL's name obeys.
PUT_RC_SCHEMA_V1_2 = copy.deepcopy(POST_RC_SCHEMA_V1_2)
