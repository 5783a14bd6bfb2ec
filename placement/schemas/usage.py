"""GET /usages query strings: project (and user) from 1.9, consumer_type
from 1.38."""
import copy

_ID = {'type': 'string', 'minLength': 1, 'maxLength': 255}

GET_USAGES_1_9 = {
    'type': 'object',
    'properties': {'project_id': _ID, 'user_id': _ID},
    'required': ['project_id'],
    'additionalProperties': False,
}

# A type name, or "all", or "unknown" (untyped consumers).
CONSUMER_TYPE_GET_PATTERN = '^[A-Z0-9_]+$|^all|^unknown$'
GET_USAGES_1_38 = copy.deepcopy(GET_USAGES_1_9)
GET_USAGES_1_38['properties']['consumer_type'] = {
    'type': 'string', 'pattern': CONSUMER_TYPE_GET_PATTERN,
    'minLength': 1, 'maxLength': 255}
