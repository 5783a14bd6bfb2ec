"""Request bodies and query strings for /resource_providers, by version."""
import copy

_NAME = {'type': 'string', 'maxLength': 200}
_UUID = {'type': 'string', 'format': 'uuid'}

POST_RP = {
    'type': 'object',
    'properties': {'name': _NAME, 'uuid': _UUID},
    'required': ['name'],
    'additionalProperties': False,
}
PUT_RP = copy.deepcopy(POST_RP)
del PUT_RP['properties']['uuid']

# 1.14: a provider may name its parent (null for none).
POST_RP_1_14 = copy.deepcopy(POST_RP)
POST_RP_1_14['properties']['parent_provider_uuid'] = {
    'anyOf': [_UUID, {'type': 'null'}]}
PUT_RP_1_14 = copy.deepcopy(POST_RP_1_14)
del PUT_RP_1_14['properties']['uuid']

# GET /resource_providers query strings; values are parsed further in
# placement.lib_query.
LIST_1_0 = {
    'type': 'object',
    'properties': {'name': {'type': 'string'}, 'uuid': _UUID},
    'additionalProperties': False,
}
LIST_1_3 = copy.deepcopy(LIST_1_0)          # member_of
LIST_1_3['properties']['member_of'] = {'type': 'string'}
LIST_1_4 = copy.deepcopy(LIST_1_3)          # resources
LIST_1_4['properties']['resources'] = {'type': 'string'}
LIST_1_14 = copy.deepcopy(LIST_1_4)         # in_tree
LIST_1_14['properties']['in_tree'] = _UUID
LIST_1_18 = copy.deepcopy(LIST_1_14)        # required
LIST_1_18['properties']['required'] = {'type': 'string'}


def list_schema(version):
    for since, schema in (((1, 18), LIST_1_18), ((1, 14), LIST_1_14),
                          ((1, 4), LIST_1_4), ((1, 3), LIST_1_3)):
        if version >= since:
            return schema
    return LIST_1_0
