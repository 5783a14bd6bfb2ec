"""MariaDB's unparsed trigger: a table whose change triggers (see
``change_triggers``) MariaDB failed to load, and how to make it load them
again. Apart from the triggers themselves: only the database layer's
retry (``db/api.py``) and the fault wrapper ask."""
import re

from placement.db import change_triggers


def unparsed_trigger_table(exc):
    """The table whose trigger MariaDB failed to load, if ``exc`` says so.

    MariaDB parses a table's triggers each time it opens the table; on
    Galera, a session aborted by the cluster (a conflicting write
    replicated from another node) while it parses them records the
    trigger as unparseable ("Trigger '...' has an error in its body", or
    "Unknown trigger ...") in the open table it then caches, and every
    write that reuses that open table fails so until the table is
    reopened. The definition itself is intact (the cluster tests met it
    under racing writes). Returns the table, ``'*'`` when the message
    names no trigger of ours, or None for any other error."""
    text = str(exc)
    if '1064' not in text or 'has an error in its body' not in text:
        return None
    found = re.search(r"Trigger '(\w+)'|TRIGGER (\w+) AFTER", text)
    name = found and (found.group(1) or found.group(2))
    for table, names in change_triggers.trigger_names().items():
        if name in names:
            return table
    return '*'


def reopen_tables(conn, table):
    """Make MariaDB drop its cached open copies of ``table`` (``'*'``:
    every table with our triggers), so that the next use parses the
    triggers again. A table comment set to what it is changes nothing
    stored; it is the one statement a schema owner may run that flushes
    the table (``FLUSH TABLES`` needs the global RELOAD privilege)."""
    if conn.dialect.name != 'mysql':
        return
    tables = (sorted(change_triggers.trigger_names()) if table == '*'
              else [table])
    for name in tables:
        conn.exec_driver_sql("ALTER TABLE %s COMMENT = ''" % name)
