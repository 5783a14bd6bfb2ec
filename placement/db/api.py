"""Database access: one oslo.db enginefacade for the whole service.

Objects decorate their functions with ``@reader``/``@writer`` and reach the
session as ``context.session``. Writers are retried on deadlock by oslo.db
before anything reaches the client. oslo.db pings a pooled connection
before use (pool_pre_ping) and replaces it if the database went away and
came back, so service resumes on the first request after an outage; new
connections time out after CONNECT_TIMEOUT seconds (503 meanwhile, see
fault_wrap).
"""
import contextlib
import functools
import logging
import threading
import time

from oslo_db import api as oslo_db_api
from oslo_db import exception as oslo_db_exc
from oslo_db.sqlalchemy import enginefacade
import sqlalchemy as sa

from placement import conf as placement_conf
from placement.db import unparsed_triggers

LOG = logging.getLogger(__name__)

# The one manager objects decorate with; configure() swaps the factory
# (engines and their settings) underneath it, so decorated functions
# follow a reconfiguration. Readers may join an enclosing asynchronous
# reader (replica_reader below): on their own they stay synchronous (the
# primary), inside one they read what it reads.
context_manager = enginefacade.transaction_context()
reader = context_manager.reader.allow_async
# The same for a Connection rather than a Session. (allow_async must come
# last: oslo.db's other modifiers drop it.)
reader_connection = context_manager.reader.connection.allow_async
writer = context_manager.writer

# The facade options and transaction manager configure() last installed.
_CONFIGURED = {'options': None, 'manager': None}


def _sqlite_pragmas(dbapi_conn, _record):
    """Let several workers share one SQLite file without 'database is
    locked'."""
    # Transactions are begun by _sqlite_begin below, not by pysqlite.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute('PRAGMA busy_timeout = 30000')
    cur.execute('PRAGMA journal_mode = WAL')
    cur.close()


# Seconds a new connection may take before the request gives up with 503;
# without it a database host that drops packets hangs every request.
CONNECT_TIMEOUT = 5


def _with_connect_timeout(url, parameters):
    """Add a bounded connect timeout for PostgreSQL and MySQL unless the
    deployer set one in the URL or ``connection_parameters``."""
    backend = sa.engine.make_url(url).get_backend_name()
    if backend not in ('postgresql', 'mysql'):
        return parameters
    if 'connect_timeout' in url or 'connect_timeout' in (parameters or ''):
        return parameters
    extra = 'connect_timeout=%d' % CONNECT_TIMEOUT
    return '%s&%s' % (parameters, extra) if parameters else extra


def facade_options(conf):
    """The enginefacade's options for ``conf`` (configure_with's)."""
    url = placement_conf.database_url(conf)
    db = conf.placement_database
    options = dict(
        connection=url,
        slave_connection=db.slave_connection,
        sqlite_synchronous=db.sqlite_synchronous,
        mysql_sql_mode=db.mysql_sql_mode,
        connection_recycle_time=db.connection_recycle_time,
        connection_debug=db.connection_debug,
        max_pool_size=db.max_pool_size,
        max_overflow=db.max_overflow,
        pool_timeout=db.pool_timeout,
        connection_trace=db.connection_trace,
        max_retries=db.max_retries,
        retry_interval=db.retry_interval,
        connection_parameters=_with_connect_timeout(
            url, db.connection_parameters),
        # oslo.db's time.sleep(0) at every connection checkin lets eventlet
        # green threads run; no eventlet here, and on a busy machine the
        # yield hands the CPU away in the middle of a request.
        thread_checkin=False,
    )
    options = {k: v for k, v in options.items() if v is not None}
    # Ours, not the facade's: configure() takes it out again.
    options['galera_sync_wait'] = db.galera_sync_wait
    return options


def configure(conf):
    """Point the enginefacade at the configured (or embedded) database.

    Configuring again with other database options (an embedding process,
    such as nova's functional tests, wants a fresh database per test)
    installs a new enginefacade factory with its own engines and closes
    the previous one's pooled connections; the same options keep the
    current engines (and an in-memory SQLite database's contents).
    """
    configure_with(facade_options(conf))


def configure_with(options):
    """configure, with facade_options made already (a process of the
    node's that reads the world for the workers is given them)."""
    if options == _CONFIGURED['options']:
        return
    facade_options = dict(options)
    sync_wait = facade_options.pop('galera_sync_wait')
    manager = enginefacade.transaction_context()
    manager.configure(
        on_engine_create=[install_listeners,
                          functools.partial(_galera_listener, sync_wait)],
        **facade_options)
    _replica_engine_untested(manager, options.get('slave_connection'))
    context_manager.patch_factory(manager)
    previous = _CONFIGURED['manager']
    _CONFIGURED.update(options=options, manager=manager)
    if previous is not None:
        previous.dispose_pool()


def get_engine():
    return context_manager.writer.get_engine()


# Set while unpinged_checkout() waits for its connection.
_CHECKOUT = threading.local()


def _skippable_ping(engine):
    """Let this thread skip the pool's liveness check of its next checkout
    (see unpinged_checkout); installed once per engine."""
    dialect = engine.dialect
    if getattr(dialect.do_ping, 'placement_skippable', False):
        return
    real_ping = dialect.do_ping

    def do_ping(dbapi_connection):
        if getattr(_CHECKOUT, 'no_ping', False):
            # One checkout per arming: the rest of the block (nested
            # checkouts, say) is checked as usual.
            _CHECKOUT.no_ping = False
            return True
        return real_ping(dbapi_connection)

    do_ping.placement_skippable = True
    dialect.do_ping = do_ping


@contextlib.contextmanager
def unpinged_checkout():
    """The next pooled connection this thread checks out (in the block)
    is handed over without the pool's liveness check, a round trip. Only
    for work that is run again when its first statement finds the
    connection lost (is_disconnect): nothing was done on it then, and
    SQLAlchemy has invalidated it and the pool's older connections, so
    the next checkout connects afresh."""
    _skippable_ping(context_manager.writer.get_engine())
    _CHECKOUT.no_ping = True
    try:
        yield
    finally:
        _CHECKOUT.no_ping = False


def is_disconnect(exc):
    """``exc`` says the connection to the database was lost."""
    return isinstance(exc, oslo_db_exc.DBConnectionError) or (
        isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated)


@contextlib.contextmanager
def one_statement_reader(ctx):
    """``ctx``'s read connection, for reads that are each one statement.
    On PostgreSQL they run outside any transaction: one statement sees
    one snapshot anyway, and BEGIN and ROLLBACK are two round trips more
    (0.18 ms, a twentieth of a flat allocation-candidates answer).
    psycopg2's own autocommit flag is flipped, and back before the
    enginefacade ends its (then empty) transaction; SQLAlchemy's isolation
    level is not used, as its reset at check-in costs a round trip of its
    own. Lookups nested in the block share the connection."""
    with reader_connection.using(ctx) as conn:
        dbapi_conn = conn.connection.driver_connection
        flip = (conn.dialect.driver == 'psycopg2' and
                not dbapi_conn.autocommit and _pg_idle(dbapi_conn))
        if flip:
            dbapi_conn.autocommit = True
        try:
            yield conn
        finally:
            if flip and not dbapi_conn.closed:
                dbapi_conn.autocommit = False


def one_statement_reads(read):
    """Decorator: ``read(ctx, conn, ...)`` is given ``ctx``'s
    one_statement_reader connection (for functions whose every read is
    one statement)."""
    @functools.wraps(read)
    def wrapper(ctx, *args, **kwargs):
        with one_statement_reader(ctx) as conn:
            return read(ctx, conn, *args, **kwargs)
    return wrapper


def unpinged_read(read):
    """``read()``, whose first checkout goes without the pool's ping
    (unpinged_checkout): a read is safe to ask again, so one that finds
    its connection lost is asked once more, on a checked connection."""
    try:
        with unpinged_checkout():
            return read()
    except Exception as exc:
        if not is_disconnect(exc):
            raise
    LOG.debug('Pooled connection lost; reading again on a checked one')
    return read()


def unpinged(read):
    """Decorator: ``read`` (a function that only reads) runs as
    unpinged_read runs it."""
    @functools.wraps(read)
    def wrapper(*args, **kwargs):
        return unpinged_read(functools.partial(read, *args, **kwargs))
    return wrapper


def one_statement_read(ctx, statement, params):
    """The rows of one read-only ``statement`` (one_statement_reader), on
    a connection not pinged first (unpinged_read)."""
    def read():
        with one_statement_reader(ctx) as conn:
            return conn.execute(statement, params).all()
    return unpinged_read(read)


def _pg_idle(dbapi_conn):
    """No transaction open on this psycopg2 connection (a checkout
    listener may have begun one); psycopg2 refuses autocommit then."""
    from psycopg2 import extensions
    return (dbapi_conn.get_transaction_status() ==
            extensions.TRANSACTION_STATUS_IDLE)


def patch_engine(engine):
    """Tests: route every transaction to ``engine``; returns an undo call."""
    install_listeners(engine)
    return context_manager.patch_engine(engine)


def install_listeners(engine):
    """Our SQLite connection settings and BEGIN IMMEDIATE, on ``engine``
    only (the engines configure() creates, and test engines): other
    engines in the process (an embedding nova's, say) keep their own
    behaviour. Does nothing for other databases or when already there."""
    if engine.dialect.name != 'sqlite':
        return
    if sa.event.contains(engine, 'connect', _sqlite_pragmas):
        return
    sa.event.listen(engine, 'connect', _sqlite_pragmas, insert=True)
    # Ours must begin first: oslo.db's own listener on its engines emits
    # a plain (deferred) BEGIN unless a transaction was already begun.
    # SQLAlchemy ignores insert=True for connection events, so the
    # listeners already there are put back after ours.
    earlier = list(engine.dispatch.begin)
    for fn in earlier:
        sa.event.remove(engine, 'begin', fn)
    sa.event.listen(engine, 'begin', _sqlite_begin)
    for fn in earlier:
        sa.event.listen(engine, 'begin', fn)
    for event in ('commit', 'rollback'):
        sa.event.listen(engine, event, _sqlite_end)


def _galera_listener(sync_wait, engine):
    """On MySQL, set ``wsrep_sync_wait`` on each new connection to a
    Galera node ([placement_database] galera_sync_wait): a read through
    one node then sees what a client committed through another."""
    if engine.dialect.name != 'mysql' or not sync_wait:
        return

    def on_connect(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        try:
            cur.execute("SHOW VARIABLES LIKE 'wsrep_on'")
            row = cur.fetchone()
            if row and str(row[1]).upper() == 'ON':
                cur.execute('SET SESSION wsrep_sync_wait = %d' % sync_wait)
        finally:
            cur.close()

    sa.event.listen(engine, 'connect', on_connect)
    # oslo.db tried a connection before this hook ran; it waits in the
    # pool without the setting, so let it go.
    engine.pool.dispose()


def _sqlite_begin(conn):
    """BEGIN IMMEDIATE: take SQLite's write lock when the transaction starts.

    A transaction that reads and then writes fails at once with 'database
    is locked' if another process wrote in between (busy_timeout does not
    cover upgrading a read lock), as several gunicorn workers on the
    embedded database do; waiting for the lock up front serializes them.
    """
    if 'in_transaction' not in conn.info:
        # Straight to the driver: a transaction boundary, not a query
        # (statement-counting tests and SQL echo need not see it).
        conn.connection.driver_connection.execute('BEGIN IMMEDIATE')
        # oslo.db's own listener (which would emit a plain BEGIN next)
        # skips a connection so marked, and clears the mark at the end.
        conn.info['in_transaction'] = True


def _sqlite_end(conn):
    try:
        conn.info.pop('in_transaction', None)
    except sa.exc.SQLAlchemyError:
        # A connection lost mid-transaction refuses even this; the
        # original error (503 for a lost database) must surface, not this.
        pass


# The text of the log line each retried deadlock leaves (the cluster tests
# count them).
DEADLOCK_RETRY_LOG = 'Deadlock or Galera certification failure, retrying'


def note_deadlock(exc, where):
    """``exc`` is a deadlock the caller retries: log it, once per retry.

    On Galera a write that conflicts with one committed through another
    node fails certification, reported as deadlock 1213, often at COMMIT
    after every statement succeeded; oslo.db raises DBDeadlock from the
    commit as well, so a retry around the whole writer covers both."""
    if isinstance(exc, oslo_db_exc.DBDeadlock):
        LOG.warning('%s: %s', DEADLOCK_RETRY_LOG, where)
        return True
    return False


# Tables reopened for an unparsed trigger, and when (at most one
# reopening per table and REOPEN_EVERY seconds in a process).
REOPEN_EVERY = 2.0
_REOPENED = {}
UNPARSED_TRIGGER_LOG = 'MariaDB left a change trigger unparsed'


def note_unparsed_trigger(exc, where):
    """``exc`` is MariaDB's unparsed change trigger (see
    unparsed_triggers.unparsed_trigger_table): reopen the table, so that
    the retry parses it again, and say so; False for any other error."""
    if not isinstance(exc, (oslo_db_exc.DBError, sa.exc.DBAPIError)):
        # A refusal of ours (a conflict, a bad value): not the database.
        return False
    table = unparsed_triggers.unparsed_trigger_table(exc)
    if table is None:
        return False
    now = time.monotonic()
    if now - _REOPENED.get(table, -REOPEN_EVERY) >= REOPEN_EVERY:
        _REOPENED[table] = now
        LOG.warning('%s on %s in %s: reopening the table and retrying (%s)',
                    UNPARSED_TRIGGER_LOG, table, where, exc)
        try:
            with get_engine().connect() as conn:
                unparsed_triggers.reopen_tables(conn, table)
        except Exception as reopen_exc:
            LOG.error('Could not reopen %s: %s', table, reopen_exc)
    return True


def retry_on_deadlock(f, also=None):
    """Retry a whole write transaction (the ``@writer`` function ``f``,
    its COMMIT included) when the database says deadlock; exceptions for
    which ``also(exc)`` is true are retried too."""
    where = getattr(f, '__qualname__', repr(f))

    def checker(exc):
        return (note_deadlock(exc, where)
                or note_unparsed_trigger(exc, where)
                or bool(also and also(exc)))

    wrapped = oslo_db_api.wrap_db_retry(
        max_retries=5, exception_checker=checker, retry_interval=0.05,
        inc_retry_interval=True, max_retry_interval=0.5)(f)
    return functools.wraps(f)(wrapped)


# --- reads a replica may answer ([placement_database] slave_connection) ---

# Seconds asynchronous reads go straight to the primary after the replica
# failed to answer, so that a replica that is down (or drops packets, up to
# CONNECT_TIMEOUT per attempt) costs one failed attempt per process and
# period, not one per request.
REPLICA_PAUSE = 10.0
_REPLICA = {'down_until': 0.0, 'fallbacks': 0}


def _replica_engine_untested(manager, slave_url):
    """Create the replica's engine without oslo.db's connection test.

    oslo.db connects to each new engine up to ``max_retries`` times,
    ``retry_interval`` apart, and starts neither engine if one fails: a
    replica that is down when a worker starts would hold every request
    (writes too) for minutes and then fail them. The primary keeps that
    test; the replica is tried when a read needs it (replica_reader).
    """
    if not slave_url:
        return
    factory = manager._factory
    setup = factory._setup_for_connection

    def setup_for_connection(url, engine_kwargs, maker_kwargs):
        if url == slave_url:
            engine_kwargs = dict(engine_kwargs, max_retries=0)
        return setup(url, engine_kwargs, maker_kwargs)

    factory._setup_for_connection = setup_for_connection


_PRIMARY_ONLY = '_placement_primary_only'


@contextlib.contextmanager
def primary_only(ctx):
    """Within the block, replica_reader functions read the primary: for
    callers that compare their answer with what they read themselves."""
    before = getattr(ctx, _PRIMARY_ONLY, False)
    setattr(ctx, _PRIMARY_ONLY, True)
    try:
        yield
    finally:
        setattr(ctx, _PRIMARY_ONLY, before)


def replica_configured():
    options = _CONFIGURED['options'] or {}
    return bool(options.get('slave_connection'))


def _in_transaction(ctx):
    try:
        return ctx.transaction_ctx is not None
    except oslo_db_exc.NoEngineContextEstablished:
        return False


def replica_reader(recheck=()):
    """Run the decorated ``f(ctx, ...)`` as an oslo.db asynchronous reader:
    with ``slave_connection`` set, on the replica. Only for reads whose
    answer may lag the primary and that no write of this process depends
    on (see doc/source/many-nodes.rst, "PostgreSQL primary and a hot
    standby").

    When the replica cannot answer (down, restarting, a query cancelled by
    a recovery conflict) the read runs again on the primary, and the next
    REPLICA_PAUSE seconds of such reads go there directly. Exceptions in
    ``recheck`` (a name not yet replicated, say) are asked of the primary
    too before they reach the client. Without a replica, or inside an
    enclosing transaction, and on the primary, ``f`` runs undecorated
    (its own readers are synchronous: the primary).
    """
    def decorate(f):
        on_replica = context_manager.async_(f)
        on_primary = f

        @functools.wraps(f)
        def wrapper(ctx, *args, **kwargs):
            if (not replica_configured() or _in_transaction(ctx) or
                    getattr(ctx, _PRIMARY_ONLY, False)):
                return on_primary(ctx, *args, **kwargs)
            if time.monotonic() < _REPLICA['down_until']:
                return on_primary(ctx, *args, **kwargs)
            try:
                return on_replica(ctx, *args, **kwargs)
            except recheck:
                pass
            except (oslo_db_exc.DBError, sa.exc.SQLAlchemyError) as exc:
                # Down, restarting, a statement cancelled by a recovery
                # conflict, or a transaction left unusable by one of
                # these: the primary answers for a while.
                _REPLICA['down_until'] = time.monotonic() + REPLICA_PAUSE
                LOG.warning('Replica read failed (%s: %s); reading from the '
                            'primary for %.0f s', exc.__class__.__name__,
                            exc, REPLICA_PAUSE)
            _REPLICA['fallbacks'] += 1
            return on_primary(ctx, *args, **kwargs)
        return wrapper
    return decorate
