"""Query-string schemas for GET /allocation_candidates, one per
microversion at which the accepted keys change."""
import copy

# Request group suffixes: numbers before 1.33, then up to 64 of
# [a-zA-Z0-9_-].
GROUP_PAT = r'[1-9][0-9]*'
GROUP_PAT_1_33 = r'[a-zA-Z0-9_-]{1,64}'

GET_SCHEMA_1_10 = {
    'type': 'object',
    'properties': {
        'resources': {'type': 'string'},
    },
    'required': ['resources'],
    'additionalProperties': False,
}

# (1, 16): limit.
GET_SCHEMA_1_16 = copy.deepcopy(GET_SCHEMA_1_10)
GET_SCHEMA_1_16['properties']['limit'] = {
    'type': ['integer', 'string'],
    'pattern': '^[1-9][0-9]*$',
    'minimum': 1,
    'minLength': 1,
}

# (1, 17): required traits.
GET_SCHEMA_1_17 = copy.deepcopy(GET_SCHEMA_1_16)
GET_SCHEMA_1_17['properties']['required'] = {'type': ['string']}

# (1, 21): member_of.
GET_SCHEMA_1_21 = copy.deepcopy(GET_SCHEMA_1_17)
GET_SCHEMA_1_21['properties']['member_of'] = {'type': ['string']}


def _grouped(pattern, names):
    return {'^%s(%s)?$' % (name, pattern): {'type': 'string'}
            for name in names}


# (1, 25): granular request groups; resources is no longer required.
GET_SCHEMA_1_25 = copy.deepcopy(GET_SCHEMA_1_21)
for _key in ('resources', 'required', 'member_of'):
    del GET_SCHEMA_1_25['properties'][_key]
del GET_SCHEMA_1_25['required']
GET_SCHEMA_1_25['patternProperties'] = _grouped(
    GROUP_PAT, ('resources', 'required', 'member_of'))
GET_SCHEMA_1_25['properties']['group_policy'] = {
    'type': 'string', 'enum': ['none', 'isolate']}

# (1, 31): in_tree.
GET_SCHEMA_1_31 = copy.deepcopy(GET_SCHEMA_1_25)
GET_SCHEMA_1_31['patternProperties'].update(_grouped(GROUP_PAT, ('in_tree',)))

# (1, 33): string suffixes.
GET_SCHEMA_1_33 = copy.deepcopy(GET_SCHEMA_1_31)
GET_SCHEMA_1_33['patternProperties'] = _grouped(
    GROUP_PAT_1_33, ('resources', 'required', 'member_of', 'in_tree'))

# (1, 35): root_required.
GET_SCHEMA_1_35 = copy.deepcopy(GET_SCHEMA_1_33)
GET_SCHEMA_1_35['properties']['root_required'] = {'type': ['string']}

# (1, 36): same_subtree.
GET_SCHEMA_1_36 = copy.deepcopy(GET_SCHEMA_1_35)
GET_SCHEMA_1_36['properties']['same_subtree'] = {'type': ['string']}

_BY_VERSION = [
    ((1, 36), GET_SCHEMA_1_36), ((1, 35), GET_SCHEMA_1_35),
    ((1, 33), GET_SCHEMA_1_33), ((1, 31), GET_SCHEMA_1_31),
    ((1, 25), GET_SCHEMA_1_25), ((1, 21), GET_SCHEMA_1_21),
    ((1, 17), GET_SCHEMA_1_17), ((1, 16), GET_SCHEMA_1_16),
]


def get_schema(version):
    """The query schema in force at ``version``."""
    for since, schema in _BY_VERSION:
        if version >= since:
            return schema
    return GET_SCHEMA_1_10
