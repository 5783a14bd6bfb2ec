"""PUT /resource_providers/{uuid}/aggregates bodies: a bare list before
1.19, an object with the provider generation from 1.19."""
import copy

_LIST = {
    'type': 'array',
    'items': {'type': 'string', 'format': 'uuid'},
    'uniqueItems': True,
}

PUT_AGGREGATES_1_1 = copy.deepcopy(_LIST)

PUT_AGGREGATES_1_19 = {
    'type': 'object',
    'properties': {
        'aggregates': copy.deepcopy(_LIST),
        'resource_provider_generation': {'type': 'integer'},
    },
    'required': ['aggregates', 'resource_provider_generation'],
    'additionalProperties': False,
}
