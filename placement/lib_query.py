"""Parsers for the query-string values GET /resource_providers and
GET /allocation_candidates share: ``resources``, ``member_of``,
``required`` and ``in_tree``.

They are pure functions: strings (and the negotiated Version, which
compares with tuples) in, plain sets/lists/dicts out. Bad input raises
``placement.exception.BadRequest`` carrying the detail text upstream
sends, so any handler (under ``util.wsgify``) answers 400 with it.
"""
from oslo_utils import uuidutils

from placement import exception

# member_of: repeatable from 1.24, "!" forms from 1.32.
MULTI_MEMBER_OF_VERSION = (1, 24)
FORBIDDEN_AGGS_VERSION = (1, 32)
# required: "!TRAIT" from 1.22; "in:" any-of and repeating from 1.39.
FORBIDDEN_TRAITS_VERSION = (1, 22)
ANY_TRAITS_VERSION = (1, 39)

_RESOURCES_FORM = ('Badly formed resources parameter. Expected resources '
                   'query string parameter in form: '
                   '?resources=VCPU:2,MEMORY_MB:1024. Got: %s.')


def _bad(msg):
    return exception.BadRequest(msg)


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
