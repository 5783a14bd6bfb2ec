"""JSON schemas for writing allocations, one per body form.

PUT /allocations/{consumer_uuid}:
  1.0-1.7   list of {resource_provider: {uuid}, resources}
  1.8-1.11  same, plus required project_id and user_id
  1.12-1.27 dict keyed by provider uuid (symmetric with GET)
  1.28-1.33 plus required consumer_generation; empty allocations allowed
  1.34-1.37 plus optional mappings
  1.38+     plus required consumer_type
POST /allocations (1.13+): a dict keyed by consumer uuid of the PUT bodies,
where allocations may be empty (meaning "remove this consumer's").
"""
import copy

UUID_PATTERN = '^[0-9a-fA-F-]{36}$'
RC_PATTERN = '^[A-Z0-9_]+$'
CONSUMER_TYPE_PATTERN = '^[A-Z0-9_]+$'
GROUP_SUFFIX_PATTERN_1_33 = '[a-zA-Z0-9_-]{1,64}'

_EXTERNAL_ID = {'type': 'string', 'minLength': 1, 'maxLength': 255}

_RESOURCES = {
    'type': 'object',
    'minProperties': 1,
    'patternProperties': {
        RC_PATTERN: {'type': 'integer', 'minimum': 1},
    },
    'additionalProperties': False,
}

# 1.0 - 1.7
ALLOCATION_SCHEMA = {
    'type': 'object',
    'properties': {
        'allocations': {
            'type': 'array',
            'minItems': 1,
            'items': {
                'type': 'object',
                'properties': {
                    'resource_provider': {
                        'type': 'object',
                        'properties': {
                            'uuid': {'type': 'string', 'format': 'uuid'},
                        },
                        'required': ['uuid'],
                        'additionalProperties': False,
                    },
                    'resources': _RESOURCES,
                },
                'required': ['resource_provider', 'resources'],
                'additionalProperties': False,
            },
        },
    },
    'required': ['allocations'],
    'additionalProperties': False,
}

# 1.8 - 1.11: who the consumer belongs to becomes mandatory.
ALLOCATION_SCHEMA_V1_8 = copy.deepcopy(ALLOCATION_SCHEMA)
ALLOCATION_SCHEMA_V1_8['properties']['project_id'] = _EXTERNAL_ID
ALLOCATION_SCHEMA_V1_8['properties']['user_id'] = _EXTERNAL_ID
ALLOCATION_SCHEMA_V1_8['required'] += ['project_id', 'user_id']

# 1.12 - 1.27: the dict form GET returns; a provider generation may ride
# along (and is ignored).
ALLOCATION_SCHEMA_V1_12 = {
    'type': 'object',
    'properties': {
        'allocations': {
            'type': 'object',
            'minProperties': 1,
            'patternProperties': {
                UUID_PATTERN: {
                    'type': 'object',
                    'properties': {
                        'generation': {'type': 'integer'},
                        'resources': _RESOURCES,
                    },
                    'required': ['resources'],
                    'additionalProperties': False,
                },
            },
            'additionalProperties': False,
        },
        'project_id': _EXTERNAL_ID,
        'user_id': _EXTERNAL_ID,
    },
    'required': ['allocations', 'project_id', 'user_id'],
    'additionalProperties': False,
}

# The 1.12 form with allocations allowed to be empty: POST /allocations
# uses it per consumer, PUT from 1.28 on.
_DELETABLE = copy.deepcopy(ALLOCATION_SCHEMA_V1_12)
_DELETABLE['properties']['allocations']['minProperties'] = 0

_CONSUMER_GENERATION = {'type': ['integer', 'null']}

# 1.28 - 1.33: consumer generation, null for a consumer expected to be new.
ALLOCATION_SCHEMA_V1_28 = copy.deepcopy(_DELETABLE)
ALLOCATION_SCHEMA_V1_28['properties']['consumer_generation'] = (
    _CONSUMER_GENERATION)
ALLOCATION_SCHEMA_V1_28['required'].append('consumer_generation')

# 1.34 - 1.37: optional request-group to provider mappings (accepted, not
# stored, as upstream).
_MAPPINGS = {
    'type': 'object',
    'minProperties': 1,
    'patternProperties': {
        GROUP_SUFFIX_PATTERN_1_33: {
            'type': 'array',
            'minItems': 1,
            'items': {'type': 'string', 'format': 'uuid'},
        },
    },
}
ALLOCATION_SCHEMA_V1_34 = copy.deepcopy(ALLOCATION_SCHEMA_V1_28)
ALLOCATION_SCHEMA_V1_34['properties']['mappings'] = _MAPPINGS

# 1.38+: consumer type is required.
ALLOCATION_SCHEMA_V1_38 = copy.deepcopy(ALLOCATION_SCHEMA_V1_34)
ALLOCATION_SCHEMA_V1_38['properties']['consumer_type'] = {
    'type': 'string', 'pattern': CONSUMER_TYPE_PATTERN,
    'minLength': 1, 'maxLength': 255,
}
ALLOCATION_SCHEMA_V1_38['required'].append('consumer_type')


def _by_consumer(per_consumer, min_properties=1):
    return {
        'type': 'object',
        'minProperties': min_properties,
        'patternProperties': {UUID_PATTERN: per_consumer},
        'additionalProperties': False,
    }


# POST /allocations
_POST_PER_CONSUMER_V1_28 = copy.deepcopy(_DELETABLE)
_POST_PER_CONSUMER_V1_28['properties']['consumer_generation'] = (
    _CONSUMER_GENERATION)
_POST_PER_CONSUMER_V1_28['required'].append('consumer_generation')

POST_ALLOCATIONS_V1_13 = _by_consumer(_DELETABLE)
POST_ALLOCATIONS_V1_28 = _by_consumer(_POST_PER_CONSUMER_V1_28)
POST_ALLOCATIONS_V1_34 = _by_consumer(ALLOCATION_SCHEMA_V1_34)
POST_ALLOCATIONS_V1_38 = _by_consumer(ALLOCATION_SCHEMA_V1_38)


def put_schema(want):
    """The PUT /allocations/{consumer_uuid} schema for a version."""
    if want >= (1, 38):
        return ALLOCATION_SCHEMA_V1_38
    if want >= (1, 34):
        return ALLOCATION_SCHEMA_V1_34
    if want >= (1, 28):
        return ALLOCATION_SCHEMA_V1_28
    if want >= (1, 12):
        return ALLOCATION_SCHEMA_V1_12
    if want >= (1, 8):
        return ALLOCATION_SCHEMA_V1_8
    return ALLOCATION_SCHEMA


def post_schema(want):
    """The POST /allocations schema for a version (1.13+)."""
    if want >= (1, 38):
        return POST_ALLOCATIONS_V1_38
    if want >= (1, 34):
        return POST_ALLOCATIONS_V1_34
    if want >= (1, 28):
        return POST_ALLOCATIONS_V1_28
    return POST_ALLOCATIONS_V1_13


def allocations_by_consumer(want, min_properties=0):
    """The consumer-keyed allocations object, as the reshaper embeds it."""
    schema = copy.deepcopy(post_schema(want))
    schema['minProperties'] = min_properties
    return schema
