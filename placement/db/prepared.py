"""Statements whose shape repeats, built once; on PostgreSQL also planned
once per connection.

Building a statement of the size allocation candidates use costs
SQLAlchemy 1-2 ms, and PostgreSQL takes about as long again to plan it
(1.9 ms for the flat-world statement over 1,000 providers, against 1.2 ms
to run it). So each shape is built once per process and, on PostgreSQL
with psycopg2, sent once per connection as ``PREPARE`` and afterwards run
with ``EXECUTE`` and the request's values: after five custom plans
PostgreSQL keeps a generic one when it costs no more.

Prepared statements belong to a server session. A pooler in transaction
mode (pgbouncer) hands later transactions other server sessions, where a
statement is missing or already exists; the first such error turns
preparing off for the process (``Unavailable``: the caller runs its
transaction again, see ``retry_unprepared``), and statements are then
sent whole, as on SQLite and MySQL.
"""
import functools
import hashlib
import re
import threading

from oslo_log import log as logging
from sqlalchemy.sql import sqltypes

LOG = logging.getLogger(__name__)

# Shapes seen; odd requests must not grow this forever.
_MAX_SHAPES = 512
# SQLSTATEs for a prepared statement that the session lacks, or has
# already (the server session is not the one we prepared on), or whose
# result type a schema change altered ("cached plan must not change
# result type", a database upgraded under running workers).
_SESSION_MOVED = {'26000', '42P05', '0A000'}
# The key in a pooled connection's info (kept for the life of the DBAPI
# connection, cleared when it is replaced).
_INFO_KEY = 'placement_prepared'
_PARAM = re.compile(r'%\((\w+)\)s')

_lock = threading.Lock()
_shapes = {}
_state = {'enabled': True, 'generation': 0}


class Unavailable(Exception):
    """The server session lost (or never had) our prepared statements;
    the transaction is aborted and must be run again."""


def enabled():
    return _state['enabled']


def disable():
    _state['enabled'] = False


def enable():
    """Tests: back to preparing."""
    _state['enabled'] = True


class _Shape:
    """One built statement and, per dialect, its PREPARE text."""

    def __init__(self, stmt):
        self.stmt = stmt
        self.pg = None          # (sql, bind names, binds) once compiled
        self.names = {}         # types -> (prepared name, EXECUTE text)

    def compile_pg(self, dialect):
        if self.pg is None:
            compiled = self.stmt.compile(dialect=dialect)
            order = []
            for name in _PARAM.findall(compiled.string):
                if name not in order:
                    order.append(name)
            # '%%' stays: psycopg2 formats every statement SQLAlchemy
            # sends, PREPARE included.
            sql = _PARAM.sub(
                lambda m: '$%d' % (order.index(m.group(1)) + 1),
                compiled.string)
            binds = [compiled.binds[name] for name in order]
            if any(b.expanding or b.callable is not None for b in binds):
                sql = None      # not a fixed list of values: send it whole
            # Declared types (None: from the value, see _pg_type).
            types = [None if isinstance(b.type, sqltypes.NullType) else
                     dialect.type_compiler_instance.process(b.type)
                     for b in binds]
            self.pg = (sql, order, binds, types)
        return self.pg


def _shape(key, build):
    shape = _shapes.get(key)
    if shape is None:
        with _lock:
            if len(_shapes) >= _MAX_SHAPES:
                _shapes.clear()
                # Names prepared for the old shapes go on each connection's
                # next use (see _prepared_on).
                _state['generation'] += 1
            shape = _shapes[key] = _Shape(build())
    return shape


def _pg_type(declared, value):
    """The parameter's type in PREPARE; None for a NULL of no declared
    type (such a statement is sent whole)."""
    if declared is not None:
        return declared
    if isinstance(value, bool):
        return 'boolean'
    if isinstance(value, int):
        return 'bigint'
    if isinstance(value, float):
        return 'double precision'
    if isinstance(value, str):
        return 'text'
    return None


def _name(sql, types):
    """A name that only this statement with these parameter types has, in
    any process running this code: behind a pooler, a server session may
    hold what another process prepared, and a name must never run another
    statement there."""
    digest = hashlib.sha1(
        ('%s\n%s' % (sql, ','.join(types))).encode('utf-8')).hexdigest()
    return 'placement_%s' % digest[:24]


def _prepared_on(conn):
    """The set of names prepared on ``conn``'s server session."""
    info = conn.connection.info
    entry = info.get(_INFO_KEY)
    if entry is None or entry[0] != _state['generation']:
        if entry is not None:
            conn.exec_driver_sql('DEALLOCATE ALL')
        entry = info[_INFO_KEY] = (_state['generation'], set())
    return entry[1]


def _sqlstate(exc):
    for err in (exc, getattr(exc, 'inner_exception', None)):
        orig = getattr(err, 'orig', None)
        code = getattr(orig, 'pgcode', None)
        if code:
            return code
    return None


def _instrumented(conn):
    """Someone watches statements on ``conn``: SQL echo
    (``connection_debug``), oslo.db's trace comments or another
    before/after_cursor_execute listener (tests count statements)."""
    dispatch = conn.dispatch
    return bool(conn._echo or dispatch.before_cursor_execute or
                dispatch.after_cursor_execute)


def _execute_on_driver(conn, execute, values):
    """EXECUTE on psycopg2's own cursor. SQLAlchemy's execution machinery
    (an execution context, a result, event dispatch) costs 0.1 ms per
    statement, a twentieth of a flat allocation-candidates answer; what
    it adds, mapping driver errors (a lost database becomes oslo.db's
    DBConnectionError and the connection is invalidated), is done here
    by the same call SQLAlchemy makes."""
    cursor = conn.connection.driver_connection.cursor()
    try:
        cursor.execute(execute, values)
        return cursor.fetchall()
    except Exception as exc:  # noqa: BLE001 - raised again, mapped
        conn._handle_dbapi_exception(exc, execute, values, cursor, None)
    finally:
        if not cursor.closed and not cursor.connection.closed:
            cursor.close()


def rows(conn, key, build, params):
    """Run the statement ``build()`` makes (once, for ``key``) with
    ``params`` on ``conn`` (a Connection) and return all its rows."""
    shape = _shape(key, build)
    dialect = conn.dialect
    if not (_state['enabled'] and dialect.name == 'postgresql'
            and dialect.driver == 'psycopg2'):
        return conn.execute(shape.stmt, params).all()
    sql, order, binds, declared = shape.compile_pg(dialect)
    if sql is None:
        return conn.execute(shape.stmt, params).all()
    values = tuple(params[n] if n in params else b.effective_value
                   for n, b in zip(order, binds))
    types = tuple(map(_pg_type, declared, values))
    if None in types:
        return conn.execute(shape.stmt, params).all()
    found = shape.names.get(types)
    if found is None:
        name = _name(sql, types)
        found = shape.names[types] = (name, 'EXECUTE %s%s' % (
            name, '(%s)' % ', '.join(['%s'] * len(values)) if values else ''))
    name, execute = found
    try:
        prepared = _prepared_on(conn)
        if name not in prepared:
            conn.exec_driver_sql('PREPARE %s%s AS %s' % (
                name, '(%s)' % ', '.join(types) if types else '', sql))
            prepared.add(name)
        if _instrumented(conn):
            result = conn.exec_driver_sql(execute, values)
            try:
                # Plain tuples, straight from the driver: a Row per row
                # costs more than the rows' own use for the large answers.
                return result.cursor.fetchall()
            finally:
                result.close()
        return _execute_on_driver(conn, execute, values)
    except Exception as exc:
        if _sqlstate(exc) not in _SESSION_MOVED:
            raise
        LOG.warning('Prepared statements are not kept by this database '
                    'connection (a pooler in transaction mode?); sending '
                    'statements whole from now on: %s', exc)
        disable()
        raise Unavailable() from exc


def retry_unprepared(f):
    """Run ``f`` (a whole transaction) again if prepared statements turned
    out unavailable in it."""
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except Unavailable:
            return f(*args, **kwargs)
    return wrapper

