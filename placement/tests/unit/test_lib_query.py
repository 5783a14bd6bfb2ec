"""The shared query-string parsers: forms, version gates, messages."""
import microversion_parse
import pytest

from placement import exception
from placement import lib_query

A = '11111111-1111-1111-1111-111111111111'
B = '22222222-2222-2222-2222-222222222222'
C = '33333333-3333-3333-3333-333333333333'


def v(s):
    return microversion_parse.parse_version_string(s)


def test_resources_parse_to_amounts():
    assert lib_query.parse_resources('VCPU:2,MEMORY_MB:1024') == {
        'VCPU': 2, 'MEMORY_MB': 1024}


# gabbi's pytest plugin trips over parametrize ids, so loop instead.
_BAD_RESOURCES = [
    ('', 'Got: empty string.'),
    ('VCPU', 'Got: VCPU.'),
    ('VCPU:1:2', 'Got: VCPU:1:2.'),
    ('VCPU:x', 'Requested resource VCPU expected positive integer amount. '
               'Got: x.'),
    ('VCPU:0', 'Requested resource VCPU requires amount >= 1. Got: 0.'),
]


def test_resources_refused():
    for value, fragment in _BAD_RESOURCES:
        with pytest.raises(exception.BadRequest) as exc:
            lib_query.parse_resources(value)
        assert fragment in exc.value.format_message()


def test_member_of_forms():
    assert lib_query.parse_member_of_value(A) == ({A}, set())
    assert lib_query.parse_member_of_value('!' + A) == (set(), {A})
    assert lib_query.parse_member_of_value('in:%s,%s' % (A, B)) == (
        {A, B}, set())
    assert lib_query.parse_member_of_value('!in:%s,%s' % (A, B)) == (
        set(), {A, B})


def test_member_of_bang_inside_in_is_refused():
    with pytest.raises(exception.BadRequest) as exc:
        lib_query.parse_member_of_value('in:%s,!%s' % (A, B))
    assert 'valid UUID(s). Got: !%s' % B in exc.value.format_message()


def test_member_of_list_without_in_is_refused():
    with pytest.raises(exception.BadRequest) as exc:
        lib_query.parse_member_of_value('%s,%s' % (A, B))
    assert "must be prefixed with the 'in:' or '!in:'" in (
        exc.value.format_message())


def test_member_of_version_gates():
    with pytest.raises(exception.BadRequest):
        lib_query.parse_member_of([A, B], v('1.23'))
    assert lib_query.parse_member_of([A, 'in:%s,%s' % (B, C)], v('1.24')) == (
        [{A}, {B, C}], set())
    with pytest.raises(exception.BadRequest) as exc:
        lib_query.parse_member_of(['!' + A], v('1.31'))
    assert 'Forbidden member_of parameters are not supported' in (
        exc.value.format_message())
    assert lib_query.parse_member_of(
        [A, '!' + B, '!in:%s' % C], v('1.32')) == ([{A}], {B, C})


def test_required_forms_and_gates():
    assert lib_query.parse_required(['A,B'], v('1.18')) == (
        [{'A'}, {'B'}], set())
    with pytest.raises(exception.BadRequest):
        lib_query.parse_required(['A,!B'], v('1.21'))
    assert lib_query.parse_required(['A,!B'], v('1.22')) == ([{'A'}], {'B'})
    # Before 1.39 only the last repeated value counts.
    assert lib_query.parse_required(['A', 'B'], v('1.38')) == ([{'B'}], set())
    with pytest.raises(exception.BadRequest) as exc:
        lib_query.parse_required(['in:A,B'], v('1.38'))
    assert 'only supported since microversion 1.39' in (
        exc.value.format_message())
    assert lib_query.parse_required(['in:A,B', 'C,!D'], v('1.39')) == (
        [{'A', 'B'}, {'C'}], {'D'})
    with pytest.raises(exception.BadRequest) as exc:
        lib_query.parse_required(['in:A,!B'], v('1.39'))
    assert 'does not support forbidden traits' in exc.value.format_message()
    with pytest.raises(exception.BadRequest) as exc:
        lib_query.parse_required(['A,,B'], v('1.22'))
    assert 'HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait' in (
        exc.value.format_message())


def test_in_tree():
    assert lib_query.parse_in_tree(' %s ' % A) == A
    with pytest.raises(exception.BadRequest):
        lib_query.parse_in_tree('nope')
