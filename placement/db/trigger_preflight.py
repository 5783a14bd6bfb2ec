"""Can this database take the change triggers? Asked before ``db sync``
changes anything.

MySQL and MariaDB refuse ``CREATE TRIGGER`` (error 1419) when binary
logging is on -- or Galera replicates, which emulates it -- unless the
user has ``SUPER`` or ``log_bin_trust_function_creators`` is 1; a
managed database grants ``ALL ON placement.*`` only. MariaDB 10.11 asks
for ``SUPER`` itself: none of the finer privileges split from it in
10.5.2 (``BINLOG ADMIN``, ``SET USER``, ...) will do. The triggers also
need ``TRIGGER`` and ``CREATE ROUTINE`` / ``ALTER ROUTINE`` (their
procedure) on the schema. PostgreSQL needs ``CREATE`` on the schema and
the ownership of the tables the triggers go on and of any function of
ours already there.

Met half-way, such a refusal left tables made and our track between
revisions, and a ``db sync`` run again failed the same way: so the sync
asks first, and stops with one line naming the grant or setting that
mends it (``problems``, ``check``).
"""
import sqlalchemy as sa

from placement.db import change_triggers

DOC = change_triggers.PRIVILEGES_DOC


class NotReady(Exception):
    """The database cannot take the triggers; the message says why and
    what mends it, on one line."""


def _mysql_grantees(conn):
    """How information_schema names the current user and its enabled
    roles (``'name'@'host'``, a role as ``'role'``)."""
    current = conn.exec_driver_sql('SELECT CURRENT_USER()').scalar()
    name, _, host = current.rpartition('@')
    user = "'%s'@'%s'" % (name, host)
    grantees = {user}
    try:
        roles = conn.exec_driver_sql(
            'SELECT role_name FROM information_schema.enabled_roles')
        for (role,) in roles:
            if role:
                grantees.update(("'%s'" % role, "'%s'@''" % role,
                                 "'%s'@'%%'" % role))
    except sa.exc.DBAPIError:  # MySQL 5.7 has no such view
        pass
    return user, grantees


def _query(conn, sql, **params):
    stmt = sa.text(sql)
    for name, value in params.items():
        if isinstance(value, (list, tuple, set)):
            stmt = stmt.bindparams(sa.bindparam(name, expanding=True))
            params[name] = sorted(value)
    return conn.execute(stmt, params)


def _mysql_privileges(conn, grantees):
    """(global privileges, privileges on the current schema)."""
    globally = {r[0] for r in _query(
        conn, 'SELECT privilege_type FROM information_schema.user_privileges '
        'WHERE grantee IN :g', g=grantees)}
    # A grant names its schema as a LIKE pattern (placement\_%.*).
    on_schema = {r[0] for r in _query(
        conn, 'SELECT privilege_type FROM '
        'information_schema.schema_privileges '
        'WHERE grantee IN :g AND DATABASE() LIKE table_schema', g=grantees)}
    return globally, on_schema


def _binlog_on(conn):
    """Whether the server logs (or Galera replicates) statements: MariaDB
    then checks who creates a trigger."""
    if conn.exec_driver_sql('SELECT @@log_bin').scalar():
        return True
    row = conn.exec_driver_sql("SHOW VARIABLES LIKE 'wsrep_on'").first()
    return bool(row) and str(row[1]).upper() == 'ON'


def _mysql_problems(conn):
    user, grantees = _mysql_grantees(conn)
    schema = conn.exec_driver_sql('SELECT DATABASE()').scalar()
    globally, on_schema = _mysql_privileges(conn, grantees)
    have = globally | on_schema
    out = []
    lacking = [p for p in ('TRIGGER', 'CREATE ROUTINE', 'ALTER ROUTINE')
               if p not in have]
    if lacking:
        out.append('%s lacks %s on %s: GRANT %s ON `%s`.* TO %s'
                   % (user, ', '.join(lacking), schema, ', '.join(lacking),
                      schema, user))
    trusted = conn.exec_driver_sql(
        'SELECT @@log_bin_trust_function_creators').scalar()
    if not trusted and 'SUPER' not in globally and _binlog_on(conn):
        out.append(
            'binary logging is on and %s lacks SUPER, which creating a '
            'trigger then needs: as an administrator, SET GLOBAL '
            'log_bin_trust_function_creators = 1 (and put '
            'log_bin_trust_function_creators = 1 in my.cnf, or the '
            'managed database\'s parameters, to keep it after a restart), '
            'or GRANT SUPER ON *.* TO %s' % (user, user))
    return out


def _pg_problems(conn):
    user = conn.exec_driver_sql('SELECT current_user').scalar()
    schema = conn.exec_driver_sql('SELECT current_schema()').scalar()
    if schema is None:
        return ['%s has no schema to create tables in (search_path): '
                'CREATE SCHEMA %s AUTHORIZATION %s' % (user, user, user)]
    out = []
    if not conn.exec_driver_sql(
            "SELECT has_schema_privilege(current_schema(), 'CREATE')"
    ).scalar():
        out.append('%s may not create tables and functions in schema %s: '
                   'GRANT CREATE ON SCHEMA %s TO %s'
                   % (user, schema, schema, user))
    tables = sorted(set(change_triggers.WATCHED)
                    | set(change_triggers.RENAMES))
    foreign = [r[0] for r in _query(
        conn, 'SELECT c.relname FROM pg_class c WHERE c.relnamespace = '
        'current_schema()::regnamespace AND c.relname IN :t '
        "AND NOT pg_has_role(current_user, c.relowner, 'USAGE') "
        'ORDER BY 1', t=tables)]
    foreign += [r[0] + '()' for r in _query(
        conn, 'SELECT p.proname FROM pg_proc p WHERE p.pronamespace = '
        'current_schema()::regnamespace AND p.proname IN :f '
        "AND NOT pg_has_role(current_user, p.proowner, 'USAGE') "
        'ORDER BY 1', f=change_triggers._PG_FUNCTION_NAMES)]
    if foreign:
        out.append('%s does not own %s, and only their owner may put '
                   'triggers on them: as their owner, ALTER TABLE (or '
                   'ALTER FUNCTION) ... OWNER TO %s, or run db sync as the '
                   'owner' % (user, ', '.join(foreign), user))
    return out


def problems(conn):
    """What keeps ``conn``'s user from installing the triggers, each with
    its fix; empty when nothing does (or the database has no such
    rules: SQLite)."""
    if conn.dialect.name == 'mysql':
        return _mysql_problems(conn)
    if conn.dialect.name == 'postgresql':
        return _pg_problems(conn)
    return []


def advice(found):
    """One line: the problems found, their fixes, the doc."""
    return 'cannot install the change triggers: %s. See %s.' % (
        '; '.join(found), DOC)


def check(engine):
    """Raise ``NotReady`` when the triggers cannot be installed."""
    with engine.connect() as conn:
        found = problems(conn)
    if found:
        raise NotReady(advice(found))
