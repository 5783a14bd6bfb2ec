"""Turn the GET /allocation_candidates query string into request groups.

Pure: a webob MultiDict (``req.GET``) and the negotiated version in,
``RequestGroup``s and ``RequestWide`` out; bad input raises
``exception.BadRequest`` with upstream's detail text (and error code).
The value parsers are shared with GET /resource_providers
(``placement.lib_query``).
"""
import re

from placement import errors
from placement import exception
from placement import lib_query
from placement.schemas import allocation_candidate as schema

_KEYS = ('resources', 'required', 'member_of', 'in_tree')
_KEY_RE = re.compile(r'^(%s)(%s)?$' % ('|'.join(_KEYS), schema.GROUP_PAT))
_KEY_RE_1_33 = re.compile(
    r'^(%s)(%s)?$' % ('|'.join(_KEYS), schema.GROUP_PAT_1_33))

FORBIDDEN_VERSION = (1, 22)
STRING_SUFFIX_VERSION = (1, 33)
# From 1.36 a numbered group may come without resources when it is named
# in same_subtree; the older "orphan" checks no longer apply.
SAME_SUBTREE_VERSION = (1, 36)


def _bad(msg, code=None):
    exc = exception.BadRequest(msg)
    exc.code = code
    return exc


class RequestGroup:
    """One request group: the unnumbered one (suffix '') may be spread over
    a tree and sharing providers; a suffixed one needs a single provider."""

    def __init__(self, suffix):
        self.suffix = suffix
        self.use_same_provider = bool(suffix)
        self.resources = {}
        self.required = []          # list of any-of sets of trait names
        self.forbidden = set()      # trait names
        self.member_of = []         # list of any-of sets of aggregate uuids
        self.forbidden_aggs = set()
        self.in_tree = None


class RequestWide:
    """Parameters that apply to the request as a whole."""

    def __init__(self, limit=None, group_policy=None, root_required=None,
                 root_forbidden=None, same_subtrees=None):
        self.limit = limit
        self.group_policy = group_policy
        self.root_required = root_required or set()
        self.root_forbidden = root_forbidden or set()
        self.same_subtrees = same_subtrees or []


def parse_wide(params):
    limit = params.getall('limit')
    limit = int(limit[0]) if limit else None
    policy = params.getall('group_policy')
    policy = policy[0] if policy else None
    root_required = set()
    root_forbidden = set()
    values = params.getall('root_required')
    if values:
        if len(values) > 1:
            raise _bad("Query parameter 'root_required' may be specified "
                       "only once.", errors.ILLEGAL_DUPLICATE_QUERYPARAM)
        required, root_forbidden = lib_query.parse_required_value(
            values[0], allow_forbidden=True, allow_any=False)
        root_required = {name for any_of in required for name in any_of}
        conflicts = root_required & root_forbidden
        if conflicts:
            raise _bad('Conflicting required and forbidden traits found in '
                       'root_required: %s' % ', '.join(conflicts),
                       errors.QUERYPARAM_BAD_VALUE)
    same_subtrees = []
    for value in params.getall('same_subtree'):
        suffixes = {part.strip() for part in value.split(',')}
        if '' in suffixes:
            raise _bad('Empty string (unsuffixed group) can not be '
                       'specified in `same_subtree` ',
                       errors.QUERYPARAM_BAD_VALUE)
        same_subtrees.append(suffixes)
    return RequestWide(limit, policy, root_required, root_forbidden,
                       same_subtrees)


def parse_groups(params, version, wide):
    """{suffix: RequestGroup} in order of first appearance."""
    pattern = _KEY_RE_1_33 if version >= STRING_SUFFIX_VERSION else _KEY_RE
    groups = {}
    for key, value in params.items():
        match = pattern.match(key)
        if not match:
            continue
        prefix, suffix = match.groups()
        suffix = suffix or ''
        group = groups.get(suffix)
        if group is None:
            group = groups[suffix] = RequestGroup(suffix)
        if prefix == 'resources':
            group.resources = lib_query.parse_resources(value)
        elif prefix == 'required':
            group.required, group.forbidden = lib_query.parse_required(
                params.getall(key), version, suffix)
        elif prefix == 'member_of':
            group.member_of, group.forbidden_aggs = lib_query.parse_member_of(
                params.getall(key), version, suffix)
        else:
            group.in_tree = lib_query.parse_in_tree(value)

    if version >= SAME_SUBTREE_VERSION:
        resourceless = [s for s, g in groups.items() if not g.resources]
        in_subtrees = set().union(*wide.same_subtrees)
        if len(resourceless) == len(groups):
            raise _bad('There must be at least one resources or '
                       'resources[$S] parameter.',
                       errors.QUERYPARAM_MISSING_VALUE)
        bad = [s for s in resourceless if s not in in_subtrees]
        if bad:
            raise _bad('Resourceless suffixed group request should be '
                       'specified in `same_subtree` query param: bad '
                       'group(s) - %s.' % bad, errors.QUERYPARAM_BAD_VALUE)
        bad = sorted(s for s in in_subtrees if s not in groups)
        if bad:
            raise _bad('Real suffixes should be specified in '
                       '`same_subtree`: %s not found in %s.'
                       % (bad, list(groups)), errors.QUERYPARAM_BAD_VALUE)
    else:
        _check_orphans(groups)

    if version >= FORBIDDEN_VERSION:
        conflicts = []
        for suffix, group in groups.items():
            for any_of in group.required:
                if all(name in group.forbidden for name in any_of):
                    conflicts.append('required%s: (%s)' % (
                        suffix, ', '.join(sorted(any_of))))
        if conflicts:
            raise _bad('Conflicting required and forbidden traits found in '
                       'the following traits keys: %s'
                       % ', '.join(sorted(conflicts)))
    return groups


def _check_orphans(groups):
    orphans = ['required%s' % s for s, g in groups.items()
               if g.required and not g.resources]
    if orphans:
        raise _bad('All traits parameters must be associated with '
                   'resources.  Found the following orphaned traits keys: '
                   '%s' % ', '.join(orphans))
    orphans = ['member_of%s' % s for s, g in groups.items()
               if not g.resources and (g.member_of or g.forbidden_aggs)]
    if orphans:
        raise _bad('All member_of parameters must be associated with '
                   'resources. Found the following orphaned member_of '
                   'keys: %s' % ', '.join(orphans))
    if not all(g.resources for g in groups.values()):
        raise _bad('All request groups must specify resources.')
    if not groups:
        raise _bad('At least one request group (`resources` or '
                   '`resources{$S}`) is required.')


def check_group_policy(groups, wide):
    if wide.group_policy:
        return
    if sum(1 for g in groups.values() if g.use_same_provider) > 1:
        raise _bad('The "group_policy" parameter is required when '
                   'specifying more than one "resources{N}" parameter.')
