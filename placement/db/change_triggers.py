"""Database triggers that count every write to what candidates read.

Each API process keeps the providers in memory (``objects/candidates/
world/``) and refreshes it from the change counters and log
(``placement_change_slots``, ``placement_changes``; see
``objects/changes.py`` for why they are exact). Who bumps them must not
depend on the writer remembering to: our API, upstream's API serving the
same database during a rolling upgrade, and SQL typed by an operator all
go through these triggers. A write path added next year cannot forget.

What they watch (``WATCHED``): a row of ``resource_providers`` (its id,
uuid, name or place in a tree), ``inventories``, ``allocations``,
``resource_provider_traits`` and ``resource_provider_aggregates`` logs
its provider -- the old one and the new one of an update. A rename or
delete of a resource class or trait (``RENAMES``; a row deleted may come
back under its id with another name) changes what providers' answers
say, so it starts a new epoch: every process reloads.

How each database does it:

* PostgreSQL: a row trigger only notes the provider in a transaction-
  local setting (no lock taken); a deferred constraint trigger, fired at
  COMMIT, bumps each slot once, in slot order, and logs the providers.
  The counter's row lock is then held for the commit only, and two
  committers never wait on each other in a cycle. A transaction that
  notes more than ``_PG_NOTE_MAX`` providers (a bulk load) starts a new
  epoch instead.
* MySQL / MariaDB (no deferred triggers, no transaction-local
  variables): each row bumps its slot and logs itself at once, so the
  slot's lock is held from that row to the COMMIT; writers contend on
  the slot only when they share it (one in ``SLOTS``).
* SQLite: the same as MySQL; one writer at a time anyway.

Every bump logs at least one row, so the sequence numbers a reader finds
for a slot are dense unless the log was pruned under it (the reader
checks). Every ``PRUNE_EVERY``-th bump of a slot deletes its rows older
than ``KEEP`` changes.

A migration installs them (``install``) with the revision that adds them;
``BASE.metadata.create_all`` does too (tests). Changing them means a new
revision that drops and installs again.
"""

import os
import re

import sqlalchemy as sa

SLOTS = 64
EPOCH_SLOT = -1
KEEP = 2000
PRUNE_EVERY = 100
_PG_NOTE_MAX = 1000

# table -> the column naming its provider; resource_providers is watched
# only when one of _RP_COLUMNS changes (not on every generation): its
# place in a tree, and its name (which the web view shows; revision
# e4b8d2a6c913 added it).
WATCHED = {
    'resource_providers': 'id',
    'inventories': 'resource_provider_id',
    'allocations': 'resource_provider_id',
    'resource_provider_traits': 'resource_provider_id',
    'resource_provider_aggregates': 'resource_provider_id',
}
_RP_COLUMNS = ('id', 'uuid', 'name', 'parent_provider_id',
               'root_provider_id')
# Tables whose names providers' answers show: a rename is a new epoch.
RENAMES = {'resource_classes': ('id', 'name'), 'traits': ('id', 'name')}

_EVENTS = ('INSERT', 'UPDATE', 'DELETE')

# Where the privileges installing the triggers needs are told (errors
# name it).
PRIVILEGES_DOC = ('doc/source/upgrade.rst, section "Database privileges '
                  'for the change triggers"')


def _name(table, event):
    return 'placement_chg_%s_%s' % (table, event.lower())


def trigger_names():
    """Every trigger ``install`` makes, by table."""
    names = {}
    for table in WATCHED:
        names[table] = [_name(table, e) for e in _EVENTS]
    for table in RENAMES:
        names[table] = [_name(table, 'update'), _name(table, 'delete')]
    return names


def _changed(columns, old='OLD', new='NEW', distinct='IS DISTINCT FROM'):
    return ' OR '.join('%s.%s %s %s.%s' % (old, c, distinct, new, c)
                       for c in columns)


# -- PostgreSQL --------------------------------------------------------

def _pg_note_function(col):
    """The row trigger's function for tables naming their provider in
    ``col``: note the old and new provider in this transaction."""
    return """
CREATE OR REPLACE FUNCTION placement_note_%(col)s() RETURNS trigger AS $$
DECLARE
    noted text := coalesce(current_setting('placement.changed', true), '');
    ids integer[];
    rp integer;
BEGIN
    IF noted = '*' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        ids := ARRAY[NEW.%(col)s];
    ELSIF TG_OP = 'DELETE' THEN
        ids := ARRAY[OLD.%(col)s];
    ELSE
        ids := ARRAY[OLD.%(col)s, NEW.%(col)s];
    END IF;
    FOREACH rp IN ARRAY ids LOOP
        IF rp IS NOT NULL AND position(',' || rp || ',' IN noted) = 0 THEN
            IF length(noted) > %(max_chars)d THEN
                noted := '*';
                EXIT;
            END IF;
            noted := noted || ',' || rp || ',';
        END IF;
    END LOOP;
    PERFORM set_config('placement.changed', noted, true);
    RETURN NULL;
END $$ LANGUAGE plpgsql
""" % {'col': col, 'max_chars': _PG_NOTE_MAX * 8}


# A random mark per bump, below 2**53 (random() has 52 bits or more).
_PG_MARK = 'floor(random() * 9007199254740992)::bigint'


def _pg_functions(marks):
    """The functions the triggers call; ``marks``: the tables have the
    ``mark`` columns (revision f2c6a8e1d9b4 added them)."""
    return [_pg_note_function(col) for col in sorted(
        set(WATCHED.values()))] + [
        _marked(f, marks, _PG_MARK) for f in _PG_MARKING_FUNCTIONS]


def _marked(statement, marks, random):
    """``statement`` writing each bump's mark ``m`` (``random``, or a new
    one for @SET_RANDOM@), or without marks."""
    parts = {'@SET_M@': ', mark = m', '@COL_M@': ', mark',
             '@VAL_M@': ', m', '@SET_RANDOM@': ', mark = ' + random,
             '@NEW_M@': 'm := %s;' % random}
    for key, text in parts.items():
        statement = statement.replace(key, text if marks else '')
    return statement


_PG_MARKING_FUNCTIONS = [
    # Everything changed (a rename, a TRUNCATE): a new epoch at COMMIT.
    """
CREATE OR REPLACE FUNCTION placement_note_everything() RETURNS trigger AS $$
BEGIN
    PERFORM set_config('placement.changed', '*', true);
    RETURN NULL;
END $$ LANGUAGE plpgsql
""",
    # TRUNCATE: no row trigger fires, so a new epoch at once.
    """
CREATE OR REPLACE FUNCTION placement_new_epoch() RETURNS trigger AS $$
BEGIN
    UPDATE placement_change_slots SET seq = seq + 1@SET_RANDOM@
        WHERE slot = %d;
    RETURN NULL;
END $$ LANGUAGE plpgsql
""" % EPOCH_SLOT,
    # At COMMIT: bump and log what was noted, slots in order.
    """
CREATE OR REPLACE FUNCTION placement_log_changes() RETURNS trigger AS $$
DECLARE
    noted text := coalesce(current_setting('placement.changed', true), '');
    ids integer[];
    s integer;
    n bigint;
    m bigint;
BEGIN
    IF noted = '' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('placement.changed', '', true);
    IF noted = '*' THEN
        UPDATE placement_change_slots SET seq = seq + 1@SET_RANDOM@
            WHERE slot = %(epoch)d;
        RETURN NULL;
    END IF;
    ids := string_to_array(
        trim(both ',' from replace(noted, ',,', ',')), ',')::integer[];
    FOR s IN SELECT DISTINCT id %% %(slots)d FROM unnest(ids) AS t(id)
             ORDER BY 1
    LOOP
        @NEW_M@
        UPDATE placement_change_slots SET seq = seq + 1@SET_M@
            WHERE slot = s RETURNING seq INTO n;
        IF n IS NULL THEN
            -- A slot row deleted by hand: start it again.
            INSERT INTO placement_change_slots (slot, seq@COL_M@)
                VALUES (s, 1@VAL_M@);
            n := 1;
        END IF;
        INSERT INTO placement_changes (slot, seq, resource_provider_id@COL_M@)
            SELECT s, n, id@VAL_M@ FROM unnest(ids) AS t(id)
            WHERE id %% %(slots)d = s;
        IF n %% %(every)d = 0 THEN
            DELETE FROM placement_changes
                WHERE slot = s AND seq <= n - %(keep)d;
        END IF;
    END LOOP;
    RETURN NULL;
END $$ LANGUAGE plpgsql
""" % {'epoch': EPOCH_SLOT, 'slots': SLOTS, 'every': PRUNE_EVERY,
       'keep': KEEP},
]


_PG_FUNCTION_NAMES = ['placement_note_' + col for col in sorted(
    set(WATCHED.values()))] + ['placement_note_everything',
                               'placement_new_epoch', 'placement_log_changes']


def _pg_pair(name, event, table, when, function):
    """A row trigger noting, and a deferred one logging at COMMIT."""
    return [
        'CREATE TRIGGER %s AFTER %s ON %s FOR EACH ROW %s '
        'EXECUTE FUNCTION %s()' % (name, event, table, when, function),
        'CREATE CONSTRAINT TRIGGER %s_log AFTER %s ON %s '
        'DEFERRABLE INITIALLY DEFERRED FOR EACH ROW %s '
        'EXECUTE FUNCTION placement_log_changes()'
        % (name, event, table, when)]


def _pg_triggers():
    out = []
    for table, col in WATCHED.items():
        for event in _EVENTS:
            when = ''
            if table == 'resource_providers' and event == 'UPDATE':
                when = 'WHEN (%s)' % _changed(_RP_COLUMNS)
            out += _pg_pair(_name(table, event), event, table, when,
                            'placement_note_' + col)
        # TRUNCATE fires no row trigger: everything changed. (MySQL and
        # SQLite have no TRUNCATE trigger; see
        # doc/source/candidates-engine.rst.)
        out.append(
            'CREATE TRIGGER %s AFTER TRUNCATE ON %s FOR EACH STATEMENT '
            'EXECUTE FUNCTION placement_new_epoch()'
            % (_name(table, 'truncate'), table))
    for table, cols in RENAMES.items():
        out += _pg_pair(_name(table, 'update'), 'UPDATE', table,
                        'WHEN (%s)' % _changed(cols),
                        'placement_note_everything')
        # Deleted (and perhaps made again under its id, by hand).
        out += _pg_pair(_name(table, 'delete'), 'DELETE', table, '',
                        'placement_note_everything')
    return out


# -- MySQL / MariaDB ---------------------------------------------------

_MYSQL_MARK = 'FLOOR(RAND() * 9007199254740992)'
_MYSQL_PROCEDURES = [
    """
CREATE PROCEDURE placement_log_change(IN rp INTEGER)
BEGIN
    DECLARE n BIGINT;
    DECLARE m BIGINT DEFAULT %(mark)s;
    IF rp IS NOT NULL THEN
        UPDATE placement_change_slots SET seq = seq + 1@SET_M@
            WHERE slot = rp %% %(slots)d;
        SELECT seq INTO n FROM placement_change_slots
            WHERE slot = rp %% %(slots)d;
        IF n IS NULL THEN
            INSERT INTO placement_change_slots (slot, seq@COL_M@)
                VALUES (rp %% %(slots)d, 1@VAL_M@);
            SET n = 1;
        END IF;
        INSERT INTO placement_changes (slot, seq, resource_provider_id@COL_M@)
            VALUES (rp %% %(slots)d, n, rp@VAL_M@);
        IF n %% %(every)d = 0 THEN
            DELETE FROM placement_changes
                WHERE slot = rp %% %(slots)d AND seq <= n - %(keep)d;
        END IF;
    END IF;
END
""" % {'slots': SLOTS, 'every': PRUNE_EVERY, 'keep': KEEP,
       'mark': _MYSQL_MARK},
]


def _mysql_triggers():
    out = []
    for table, col in WATCHED.items():
        for event in _EVENTS:
            if event == 'INSERT':
                body = 'CALL placement_log_change(NEW.%s);' % col
            elif event == 'DELETE':
                body = 'CALL placement_log_change(OLD.%s);' % col
            else:
                cols = (_RP_COLUMNS if table == 'resource_providers'
                        else None)
                log = ('CALL placement_log_change(OLD.{c}); '
                       'IF NOT (OLD.{c} <=> NEW.{c}) THEN '
                       'CALL placement_log_change(NEW.{c}); END IF;'
                       .format(c=col))
                if cols:
                    cond = ' OR '.join('NOT (OLD.%s <=> NEW.%s)' % (c, c)
                                       for c in cols)
                    body = 'IF %s THEN %s END IF;' % (cond, log)
                else:
                    body = log
            out.append('CREATE TRIGGER %s AFTER %s ON %s FOR EACH ROW '
                       'BEGIN %s END'
                       % (_name(table, event), event, table, body))
    for table, cols in RENAMES.items():
        cond = ' OR '.join('NOT (OLD.%s <=> NEW.%s)' % (c, c) for c in cols)
        out.append(
            'CREATE TRIGGER %s AFTER UPDATE ON %s FOR EACH ROW BEGIN '
            'IF %s THEN UPDATE placement_change_slots SET seq = seq + 1'
            '@SET_RANDOM@ WHERE slot = %d; END IF; END'
            % (_name(table, 'update'), table, cond, EPOCH_SLOT))
        out.append(
            'CREATE TRIGGER %s AFTER DELETE ON %s FOR EACH ROW BEGIN '
            'UPDATE placement_change_slots SET seq = seq + 1@SET_RANDOM@ '
            'WHERE slot = %d; END' % (_name(table, 'delete'), table,
                                      EPOCH_SLOT))
    return out


# -- SQLite --------------------------------------------------------------

def _sqlite_log(rp, guard='1'):
    slot = '(%s) %% %d' % (rp, SLOTS)
    return (
        'INSERT OR IGNORE INTO placement_change_slots (slot, seq) '
        'SELECT {slot}, 0 WHERE {guard}; '
        'UPDATE placement_change_slots SET seq = seq + 1@SET_RANDOM@ '
        'WHERE slot = {slot} AND {guard}; '
        'INSERT INTO placement_changes (slot, seq, resource_provider_id'
        '@COL_M@) SELECT slot, seq, {rp}@COL_M@ FROM placement_change_slots '
        'WHERE slot = {slot} AND {guard}; '
        'DELETE FROM placement_changes WHERE slot = {slot} AND {guard} '
        'AND seq <= (SELECT seq - {keep} FROM placement_change_slots '
        'WHERE slot = {slot} AND seq % {every} = 0); '
    ).format(slot=slot, rp=rp, guard=guard, keep=KEEP, every=PRUNE_EVERY)


def _sqlite_triggers():
    out = []
    for table, col in WATCHED.items():
        for event in _EVENTS:
            when = ''
            if event == 'INSERT':
                body = _sqlite_log('NEW.%s' % col)
            elif event == 'DELETE':
                body = _sqlite_log('OLD.%s' % col)
            else:
                body = _sqlite_log('OLD.%s' % col) + _sqlite_log(
                    'NEW.%s' % col, 'NEW.{c} IS NOT OLD.{c}'.format(c=col))
                if table == 'resource_providers':
                    when = 'WHEN %s' % _changed(
                        _RP_COLUMNS, distinct='IS NOT')
            out.append('CREATE TRIGGER %s AFTER %s ON %s FOR EACH ROW %s '
                       'BEGIN %s END'
                       % (_name(table, event), event, table, when, body))
    for table, cols in RENAMES.items():
        out.append(
            'CREATE TRIGGER %s AFTER UPDATE ON %s FOR EACH ROW WHEN %s '
            'BEGIN UPDATE placement_change_slots SET seq = seq + 1'
            '@SET_RANDOM@ WHERE slot = %d; END'
            % (_name(table, 'update'), table,
               _changed(cols, distinct='IS NOT'), EPOCH_SLOT))
        out.append(
            'CREATE TRIGGER %s AFTER DELETE ON %s FOR EACH ROW '
            'BEGIN UPDATE placement_change_slots SET seq = seq + 1'
            '@SET_RANDOM@ WHERE slot = %d; END'
            % (_name(table, 'delete'), table, EPOCH_SLOT))
    return out


# -- install, remove, check ----------------------------------------------

# SQLite's random() is a signed 64-bit integer.
_SQLITE_MARK = '(random() & 9007199254740991)'


def _statements(dialect, marks=True):
    """What ``install`` runs on ``dialect``; ``marks``: the change tables
    have their ``mark`` columns (see revision f2c6a8e1d9b4)."""
    if dialect == 'postgresql':
        return _pg_functions(marks) + _pg_triggers()
    if dialect == 'mysql':
        return [_marked(st, marks, _MYSQL_MARK) for st in
                _MYSQL_PROCEDURES + _mysql_triggers()]
    if dialect == 'sqlite':
        return [_marked(st, marks, _SQLITE_MARK)
                for st in _sqlite_triggers()]
    raise NotImplementedError(dialect)


def _has_marks(conn):
    """Whether the change tables have their ``mark`` columns (a database
    between revisions d7e2b9c41f05 and f2c6a8e1d9b4 has not)."""
    return 'mark' in {c['name'] for c in
                      sa.inspect(conn).get_columns('placement_change_slots')}


def _epoch_bump(conn):
    """The statement moving the epoch: its counter, and its mark."""
    if _has_marks(conn):
        return ('UPDATE placement_change_slots SET seq = seq + 1, mark = %d '
                'WHERE slot = %d' % (random_mark(), EPOCH_SLOT))
    return ('UPDATE placement_change_slots SET seq = seq + 1 '
            'WHERE slot = %d' % EPOCH_SLOT)


def random_mark():
    """A bump's mark made here (a new epoch's; a new slot's): random,
    below 2**53 as the triggers' own."""
    return int.from_bytes(os.urandom(7), 'big') >> 3


def _run(conn, statement):
    """Execute DDL as written: drivers with a format paramstyle read
    ``%`` as a placeholder."""
    if conn.dialect.paramstyle in ('format', 'pyformat'):
        statement = statement.replace('%', '%%')
    conn.exec_driver_sql(statement)


class InstallFailed(Exception):
    """The database refused a trigger; what ``install`` made before it is
    gone again. The message says why, on one line."""


def install(conn):
    """Create the triggers on ``conn``'s database (inside its
    transaction where the database allows DDL in one). A procedure left
    by dropped tables (MySQL drops triggers with their table, not
    procedures) is replaced.

    All or none: MySQL commits each statement, so a refusal half-way
    (db sync's preflight passed, then a grant went) drops those made
    before it, rather than leave writes counted on some tables only;
    PostgreSQL's transaction undoes them itself."""
    if conn.dialect.name == 'mysql':
        _run(conn, 'DROP PROCEDURE IF EXISTS placement_log_change')
    done = []
    try:
        for statement in _statements(conn.dialect.name, _has_marks(conn)):
            _run(conn, statement)
            done.append(statement)
    except sa.exc.DBAPIError as exc:
        left = []
        if conn.dialect.name != 'postgresql':
            left = _undo(conn, done)
        undone = ('the triggers made before it were removed' if not left
                  else 'these made before it could not be removed: %s'
                  % ', '.join(left))
        raise InstallFailed(_refused(exc, statement, undone)) from exc


_MADE = re.compile(r'\s*CREATE (?:CONSTRAINT )?(TRIGGER|PROCEDURE) (\w+)')


def _undo(conn, done):
    """Drop what ``done`` created, each on its own: the refusal may
    refuse some drops too (MariaDB asks for SUPER to drop a trigger as
    to create one, even one that is not there). The names left."""
    left = []
    for statement in reversed(done):
        kind, name = _MADE.match(statement).groups()
        try:
            _run(conn, 'DROP %s IF EXISTS %s' % (kind, name))
        except sa.exc.DBAPIError:
            left.append(name)
    return left


def _refused(exc, statement, undone):
    """InstallFailed's one line: the statement, the database's words,
    what is left, the doc."""
    what = ' '.join(statement.split()[:3])
    text = ' '.join(str(getattr(exc, 'orig', exc)).split())
    return ('installing the change triggers failed at "%s ...": %s; %s. '
            'Mend what the error names (see %s) and run placement-manage '
            'db sync again.' % (what, text, undone, PRIVILEGES_DOC))


def reinstall(conn):
    """What a revision that (re)installs the triggers runs: drop any
    there are, install these, and move the epoch -- writes committed
    before them, or while they were replaced (MySQL commits each DDL
    statement), may not all be logged, so every process reloads once."""
    try:
        remove(conn)
    except sa.exc.DBAPIError as exc:
        raise InstallFailed(_refused(
            exc, 'DROP TRIGGER IF EXISTS', 'no new trigger was made')) from exc
    install(conn)
    _run(conn, _epoch_bump(conn))


def remove(conn):
    """Drop what ``install`` made (going back to upstream's schema)."""
    dialect = conn.dialect.name
    for table, names in trigger_names().items():
        for name in names:
            if dialect == 'postgresql':
                _run(conn, 'DROP TRIGGER IF EXISTS %s ON %s'
                     % (name, table))
                _run(conn, 'DROP TRIGGER IF EXISTS %s_log ON %s'
                     % (name, table))
            else:
                _run(conn, 'DROP TRIGGER IF EXISTS %s' % name)
    if dialect == 'postgresql':
        for table in WATCHED:
            _run(conn, 'DROP TRIGGER IF EXISTS %s ON %s'
                 % (_name(table, 'truncate'), table))
        for function in _PG_FUNCTION_NAMES:
            _run(conn, 'DROP FUNCTION IF EXISTS %s()' % function)
    elif dialect == 'mysql':
        _run(conn, 'DROP PROCEDURE IF EXISTS placement_log_change')


def _on_database(conn):
    """{name: whether it fires} of the triggers on the database. On
    PostgreSQL a trigger disabled (``ALTER TABLE ... DISABLE TRIGGER``,
    as bulk tools and some replication set-ups do: pg_trigger.tgenabled
    'D') or made to fire only for replication ('R') is there but counts
    nothing an ordinary session writes. MySQL, MariaDB and SQLite cannot
    disable a trigger, only drop it; on MySQL a trigger calling our
    procedure when the procedure is gone (a dump made without
    ``--routines`` restored into a new database) fails every write it
    sees, and is counted as not firing."""
    dialect = conn.dialect.name
    if dialect == 'sqlite':
        query = "SELECT name, 1 FROM sqlite_master WHERE type = 'trigger'"
    elif dialect == 'postgresql':
        query = ("SELECT tgname, tgenabled IN ('O', 'A') FROM pg_trigger "
                 'WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM '
                 'pg_class WHERE relnamespace = '
                 'current_schema()::regnamespace)')
    elif dialect == 'mysql':
        query = ("SELECT trigger_name, LOCATE('placement_log_change', "
                 'action_statement) = 0 OR EXISTS (SELECT 1 FROM '
                 'information_schema.routines WHERE routine_schema = '
                 "DATABASE() AND routine_name = 'placement_log_change') "
                 'FROM information_schema.triggers '
                 'WHERE trigger_schema = DATABASE()')
    else:
        return {}
    return {r[0]: bool(r[1]) for r in conn.exec_driver_sql(query)}


def _present(conn):
    """The triggers on the database that fire."""
    return {name for name, fires in _on_database(conn).items() if fires}


_CREATE = re.compile(
    r'CREATE (?:CONSTRAINT )?TRIGGER (\w+) AFTER (\w+) ON (\w+)')


def made(dialect):
    """[(name, table, event)] of every trigger ``install`` makes on
    ``dialect``: ``trigger_names()`` and, on PostgreSQL, each one's
    ``_log`` partner (which logs at COMMIT what it noted) and the
    TRUNCATE ones. Each is needed: a database lacking any one leaves
    some write uncounted."""
    try:
        statements = _statements(dialect)
    except NotImplementedError:
        return [(n, t, None) for t, names in trigger_names().items()
                for n in names]
    return [(m.group(1), m.group(3), m.group(2)) for m in (
        _CREATE.match(s) for s in statements) if m]


def _wanted(conn):
    return {name for name, _, _ in made(conn.dialect.name)}


def installed(conn):
    """Whether every trigger ``install`` makes is on the database."""
    return _wanted(conn) <= _present(conn)


def missing(conn):
    """The triggers ``install`` makes that the database lacks, or has
    but will not fire (disabled), sorted."""
    return sorted(_wanted(conn) - _present(conn))


def not_firing(conn):
    """{table: {trigger: 'missing', 'disabled' or (MySQL) 'without
    procedure'}}: where writes go
    uncounted, and why; empty when every trigger ``install`` makes is
    there and fires."""
    on_db = _on_database(conn)
    stopped = ('without procedure' if conn.dialect.name == 'mysql'
               else 'disabled')
    out = {}
    for name, table, _ in made(conn.dialect.name):
        fires = on_db.get(name)
        if not fires:
            out.setdefault(table, {})[name] = (
                'missing' if fires is None else stopped)
    return out


def describe(broken):
    """``not_firing``'s answer for a message: 'inventories (7 disabled),
    traits (1 missing)'."""
    parts = []
    for table in sorted(broken):
        whys = sorted(broken[table].values())
        parts.append('%s (%s)' % (table, ', '.join(
            '%d %s' % (whys.count(w), w) for w in sorted(set(whys)))))
    return ', '.join(parts)


def not_firing_on(engine):
    """``describe(not_firing)`` of ``engine``'s database, or None when
    every trigger fires (placement-status)."""
    with engine.connect() as conn:
        return describe(not_firing(conn)) or None


def mend(engine):
    """Install again the triggers of a database at its head revision
    some of which are missing (dropped by hand) or disabled (by a bulk
    tool): no revision would, and the service answers candidates from SQL
    meanwhile (placement-manage db sync). ``reinstall`` starts a new
    epoch: writes made meanwhile were not logged. Returns what was wrong,
    or None."""
    with engine.begin() as conn:
        broken = not_firing(conn)
        if broken:
            reinstall(conn)
    return describe(broken) or None


def _one(dialect, name):
    for statement in _statements(dialect):
        m = _CREATE.match(statement)
        if m and m.group(1) == name:
            return m.group(3), statement
    raise KeyError(name)


def drop_one(conn, name):
    """Drop the trigger ``name`` of those ``install`` makes, and no other
    (the tests that show each one needed)."""
    table, _ = _one(conn.dialect.name, name)
    if conn.dialect.name == 'postgresql':
        _run(conn, 'DROP TRIGGER %s ON %s' % (name, table))
    else:
        _run(conn, 'DROP TRIGGER %s' % name)


def install_one(conn, name):
    """Create again the trigger ``name`` that ``drop_one`` dropped."""
    _run(conn, _one(conn.dialect.name, name)[1])
