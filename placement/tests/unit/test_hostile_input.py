"""Request-body and fault-barrier defences, without a server.

extract_json must answer 400 (never raise anything else) for bodies a
database or the validator cannot cope with; the fault barrier must turn
database failures into 503 / 400 / 409, never a 500.
"""
import json

from oslo_db import exception as db_exc
import pytest
import sqlalchemy.exc as sa_exc
import webob
import webob.exc

from placement import fault_wrap
from placement import util

SCHEMA = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'maxLength': 200},
        'total': {'type': 'integer'},
        'allocation_ratio': {'type': 'number'},
        'nested': {},
    },
    'additionalProperties': False,
}


def _ids(values):
    """Plain ids: gabbi's pytest plugin misreads ids holding a colon."""
    return ['case%d' % i for i in range(len(values))]


DEEP = [
    '[' * 100000 + ']' * 100000,
    '{"nested": ' + '[' * 500 + ']' * 500 + '}',
    '{"nested": ' + '{"a": ' * 2000 + '1' + '}' * 2000 + '}',
]
NON_FINITE = [
    '{"allocation_ratio": NaN}',
    '{"allocation_ratio": Infinity}',
    '{"allocation_ratio": -Infinity}',
    '{"allocation_ratio": 1e400}',
]
UNSTORABLE = [
    '{"name": "a\\u0000b"}',
    '{"name\\u0000": "a"}',
    '{"name": "\\ud800"}',
    '{"name": "\\udfff x"}',
    b'{"name": "\xff\xfe"}',
    b'\xc3\x28',
    '{"total": 1' + '0' * 5000 + '}',
]
DB_AWAY = [
    db_exc.DBConnectionError('could not connect to server'),
    sa_exc.TimeoutError('QueuePool limit of size 5 overflow 10 reached'),
    sa_exc.OperationalError('SELECT 1', {}, Exception(
        'connection to server at "127.0.0.1", port 5432 failed')),
]
DB_REFUSES = [
    db_exc.DBDataError(Exception('value too long for type character '
                                 'varying(200)')),
    sa_exc.DataError('INSERT', {}, Exception('integer out of range')),
    OverflowError('Python int too large to convert to SQLite INTEGER'),
]


def _refused(body):
    with pytest.raises(webob.exc.HTTPBadRequest) as info:
        util.extract_json(body, SCHEMA)
    return str(info.value)


@pytest.mark.parametrize('body', DEEP, ids=_ids(DEEP))
def test_deep_nesting_is_400(body):
    assert 'nested too deeply' in _refused(body)


@pytest.mark.parametrize('body', NON_FINITE, ids=_ids(NON_FINITE))
def test_non_finite_numbers_are_400(body):
    assert 'Malformed JSON' in _refused(body)


@pytest.mark.parametrize('body', UNSTORABLE, ids=_ids(UNSTORABLE))
def test_strings_a_database_cannot_store_are_400(body):
    assert 'Malformed JSON' in _refused(body)


@pytest.mark.parametrize('number', [2 ** 63, -2 ** 63 - 1, 2 ** 70, 1e300],
                         ids=_ids(range(4)))
def test_numbers_beyond_any_integer_column_are_400(number):
    body = json.dumps({'total': number}) if isinstance(number, int) else (
        '{"nested": %r}' % number)
    assert 'out of the range' in _refused(body)


def test_schema_errors_still_come_first():
    # 2**63 is an integer the schema allows; a string is not.
    assert 'JSON does not validate' in _refused('{"total": "1"}')


def test_valid_bodies_pass():
    data = util.extract_json(
        json.dumps({'name': 'caf\u00e9 \U0001F600', 'total': 2 ** 31,
                    'allocation_ratio': 16.0,
                    'nested': [[{'a': [1, 2, {'b': None}]}]]}), SCHEMA)
    assert data['total'] == 2 ** 31


def _barrier_response(exc):
    def broken(environ, start_response):
        raise exc
    req = webob.Request.blank('/', headers={'accept': 'application/json'})
    resp = req.get_response(fault_wrap.FaultWrapper(broken))
    return resp.status_int, resp.json['errors'][0]


@pytest.mark.parametrize('exc', DB_AWAY, ids=_ids(DB_AWAY))
def test_database_away_is_503(exc):
    status, error = _barrier_response(exc)
    assert status == 503
    assert fault_wrap.DB_UNAVAILABLE_MSG in error['detail']


@pytest.mark.parametrize('exc', DB_REFUSES, ids=_ids(DB_REFUSES))
def test_values_the_database_refuses_are_400(exc):
    status, error = _barrier_response(exc)
    assert status == 400
    assert fault_wrap.DB_DATA_MSG in error['detail']


def test_deadlock_after_retries_is_409_concurrent_update():
    status, error = _barrier_response(db_exc.DBDeadlock())
    assert status == 409


def test_anything_else_is_a_json_500():
    status, error = _barrier_response(KeyError('x'))
    assert status == 500
    assert 'KeyError' not in error['detail']


def test_mysql_refusing_a_character_is_a_data_error():
    """MySQL's 'Illegal mix of collations' (1267) and 'Incorrect string
    value' (1366), as oslo.db wraps them, are values refused (400)."""
    from oslo_db import exception as db_exc
    import sqlalchemy.exc as sa_exc

    for code in (1267, 1366):
        orig = Exception(code, 'refused')
        wrapped = db_exc.DBError(sa_exc.OperationalError('SELECT', {}, orig))
        assert fault_wrap.is_db_data_error(wrapped)
        assert fault_wrap.is_db_data_error(
            sa_exc.OperationalError('SELECT', {}, orig))
    other = db_exc.DBError(sa_exc.OperationalError(
        'SELECT', {}, Exception(1064, 'syntax')))
    assert not fault_wrap.is_db_data_error(other)


def test_a_connection_closed_while_the_app_is_built_is_503(monkeypatch):
    """A worker building its app as the database is killed: the engine's
    first connection closed under SQLAlchemy's first statements is the
    database away, 503 (the next request builds the app again), not a
    500 from the server."""
    from placement.wsgi import api

    def init_application():
        raise sa_exc.ResourceClosedError('This Connection is closed')

    monkeypatch.setattr(api, '_APP', None)
    monkeypatch.setattr(api, 'init_application', init_application)
    req = webob.Request.blank('/', headers={'accept': 'application/json'})
    resp = req.get_response(api.application)
    assert resp.status_int == 503
    assert fault_wrap.DB_UNAVAILABLE_MSG in resp.json['errors'][0]['detail']
    # Elsewhere it stays a bug of ours, not the database's.
    assert not fault_wrap.is_db_unavailable(
        sa_exc.ResourceClosedError('This Connection is closed'))
