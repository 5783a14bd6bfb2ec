"""The query strings of GET /resource_providers and GET
/allocation_candidates: the parsers of the values both take
(``resources``, ``member_of``, ``required``, ``in_tree``), then the
request groups of allocation candidates (``RequestGroup`` per suffix,
``RequestWide``), which the candidates engine reads.

Pure functions: strings (a webob MultiDict, ``req.GET``, and the
negotiated Version, which compares with tuples) in, plain values out.
Bad input raises ``placement.exception.BadRequest`` carrying the detail
text (and error code) upstream sends, so any handler (under
``util.wsgify``) answers 400 with it.
"""
import re

from oslo_utils import uuidutils

from placement import errors
from placement import exception
from placement.schemas import allocation_candidate as ac_schema

# member_of: repeatable from 1.24, "!" forms from 1.32.
MULTI_MEMBER_OF_VERSION = (1, 24)
FORBIDDEN_AGGS_VERSION = (1, 32)
# required: "!TRAIT" from 1.22; "in:" any-of and repeating from 1.39.
FORBIDDEN_TRAITS_VERSION = (1, 22)
ANY_TRAITS_VERSION = (1, 39)

_RESOURCES_FORM = ('Badly formed resources parameter. Expected resources '
                   'query string parameter in form: '
                   '?resources=VCPU:2,MEMORY_MB:1024. Got: %s.')


def _bad(msg, code=None):
    exc = exception.BadRequest(msg)
    exc.code = code
    return exc


def parse_resources(value):
    """``VCPU:2,MEMORY_MB:1024`` -> {'VCPU': 2, 'MEMORY_MB': 1024}.

    Class names are not checked against the database here; amounts must
    be integers >= 1. A repeated class keeps the last amount, as upstream.
    """
    if value.strip() == '':
        raise _bad(_RESOURCES_FORM % 'empty string')
    result = {}
    for pair in value.split(','):
        parts = pair.split(':')
        if len(parts) != 2:
            raise _bad(_RESOURCES_FORM % pair)
        name, raw_amount = parts
        try:
            amount = int(raw_amount)
        except ValueError:
            raise _bad('Requested resource %(name)s expected positive '
                       'integer amount. Got: %(amount)s.'
                       % {'name': name, 'amount': raw_amount})
        if amount < 1:
            raise _bad('Requested resource %(name)s requires amount >= 1. '
                       'Got: %(amount)d.' % {'name': name, 'amount': amount})
        result[name] = amount
    return result


def parse_member_of_value(value):
    """One ``member_of`` value -> (any-of required set, forbidden set).

    Forms: ``UUID``, ``!UUID``, ``in:U1,U2``, ``!in:U1,U2``. A "!" inside
    ``in:`` is not a form: the value then fails the uuid check (400).
    """
    if ',' in value and not (value.startswith('in:')
                             or value.startswith('!in:')):
        raise _bad("Multiple values for 'member_of' must be prefixed with "
                   "the 'in:' or '!in:' keyword using the valid "
                   "microversion. Got: %s" % value)
    required = set()
    forbidden = set()
    if value.startswith('!in:'):
        forbidden = set(value[4:].split(','))
    elif value.startswith('!'):
        forbidden = {value[1:]}
    elif value.startswith('in:'):
        required = set(value[3:].split(','))
    else:
        required = {value}
    for agg in sorted(required | forbidden):
        if not uuidutils.is_uuid_like(agg):
            raise _bad("Invalid query string parameters: Expected "
                       "'member_of' parameter to contain valid UUID(s). "
                       "Got: %s" % agg)
    return required, forbidden


def parse_member_of(values, version, suffix=''):
    """All ``member_of<suffix>`` values -> (required, forbidden).

    ``required`` is a list of sets: AND across the list, OR within a set.
    ``forbidden`` is one set of aggregate uuids none of which may match.
    """
    if len(values) > 1 and not version >= MULTI_MEMBER_OF_VERSION:
        raise _bad('Multiple member_of%s parameters are not supported'
                   % suffix)
    required = []
    forbidden = set()
    for value in values:
        any_of, none_of = parse_member_of_value(value)
        if any_of:
            required.append(any_of)
        if none_of:
            if not version >= FORBIDDEN_AGGS_VERSION:
                raise _bad('Forbidden member_of%s parameters are not '
                           'supported in the specified microversion'
                           % suffix)
            forbidden |= none_of
    return required, forbidden


def parse_required_value(value, allow_forbidden=False, allow_any=False):
    """One ``required`` value -> (list of any-of sets, forbidden set).

    ``A,B,!C`` gives ([{A}, {B}], {C}); ``in:A,B`` gives ([{A, B}], set()).
    Trait names are not checked against the database here.
    """
    if value.startswith('in:'):
        if not allow_any:
            raise _bad("Invalid query string parameters: The format "
                       "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported "
                       "since microversion 1.39. Got: %s" % value)
        any_of = {name.strip() for name in value[3:].split(',')}
        if not all(any_of):
            raise _bad("Invalid query string parameters: Expected "
                       "'required' parameter value of the form: "
                       "in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait "
                       "in: %s" % value)
        if any(name.startswith('!') for name in any_of):
            raise _bad("Invalid query string parameters: The format "
                       "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support "
                       "forbidden traits. Got: %s" % value)
        return [any_of], set()

    names = [name.strip() for name in value.split(',')]
    # Upstream strips every leading "!" ("!!FOO" forbids FOO); kept as is.
    forbidden = {name.lstrip('!') for name in names if name.startswith('!')}
    if not all(names) or not all(forbidden):
        form = ('HW_CPU_X86_VMX,!CUSTOM_MAGIC' if allow_forbidden
                else 'HW_CPU_X86_VMX,CUSTOM_MAGIC')
        raise _bad("Invalid query string parameters: Expected 'required' "
                   "parameter value of the form: %s. Got an empty trait "
                   "in: %s" % (form, value))
    if forbidden and not allow_forbidden:
        raise _bad("Invalid query string parameters: Expected 'required' "
                   "parameter value of the form: "
                   "HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: %s" % value)
    required = [{name} for name in names if not name.startswith('!')]
    return required, forbidden


def parse_required(values, version, suffix=''):
    """All ``required<suffix>`` values -> (list of any-of sets, forbidden).

    Before 1.39 only the last value counts (upstream's behaviour for a
    repeated key); from 1.39 every value is AND-ed.
    """
    allow_forbidden = version >= FORBIDDEN_TRAITS_VERSION
    allow_any = version >= ANY_TRAITS_VERSION
    if not allow_any:
        values = values[-1:]
    required = []
    forbidden = set()
    for value in values:
        any_of, none_of = parse_required_value(
            value, allow_forbidden=allow_forbidden, allow_any=allow_any)
        required += any_of
        forbidden |= none_of
    return required, forbidden


def parse_in_tree(value):
    """An ``in_tree`` value -> the provider uuid it names."""
    stripped = value.strip()
    if not uuidutils.is_uuid_like(stripped):
        raise _bad("Invalid query string parameters: Expected 'in_tree' "
                   "parameter to be a format of uuid. Got: %s" % value)
    return stripped


# -- GET /allocation_candidates: request groups ----------------------------

_KEYS = ('resources', 'required', 'member_of', 'in_tree')
_KEY_RE = re.compile(r'^(%s)(%s)?$' % ('|'.join(_KEYS), ac_schema.GROUP_PAT))
_KEY_RE_1_33 = re.compile(
    r'^(%s)(%s)?$' % ('|'.join(_KEYS), ac_schema.GROUP_PAT_1_33))

STRING_SUFFIX_VERSION = (1, 33)
# From 1.36 a numbered group may come without resources when it is named
# in same_subtree; the older "orphan" checks no longer apply.
SAME_SUBTREE_VERSION = (1, 36)


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
        required, root_forbidden = parse_required_value(
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
            group.resources = parse_resources(value)
        elif prefix == 'required':
            group.required, group.forbidden = parse_required(
                params.getall(key), version, suffix)
        elif prefix == 'member_of':
            group.member_of, group.forbidden_aggs = parse_member_of(
                params.getall(key), version, suffix)
        else:
            group.in_tree = parse_in_tree(value)

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

    if version >= FORBIDDEN_TRAITS_VERSION:
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
