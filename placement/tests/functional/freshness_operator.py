"""What an operator does to the database under running processes, for
the freshness check (freshness.py): backups taken and restored with each
database's own tools, and change triggers turned off and on again.

Triggers off: on PostgreSQL a table's triggers disabled (``ALTER TABLE
... DISABLE TRIGGER USER``, as bulk tools do), elsewhere dropped (MySQL
and SQLite cannot disable one); a few steps later enabled or made again.
Meanwhile every process must answer from the database (it asks at every
request in this check: ``freshness_server.py --recheck-always``), and
once they are back, reload: the writes made meanwhile were never
counted. The check lets a world process answer with SQL from the step
that turns them off until every world answers from memory again, at
most 50 steps after they are back (``Operator.sql_allowed``).

Backups:

A restore puts the change counters back where the backup left them; the
writes after it count them up again to values a process has already
seen. Each world must still answer as the database now stands
(placement/objects/changes.py: the counters' marks). So that the check
meets that case (and not only a counter gone back, which any process
notices), a backup is restored a few steps after it was taken, as after
a failover to a standby that lagged by a few transactions, and before
the next query each slot is written to as many times as it went back:
each an inventory or allocation row updated to what it is; and the
epoch by as many renames of a custom resource class (to a name and
back). The counters then stand where the processes last saw them (where
the providers of a slot all came after the backup, that slot stays
back), on other data.

* PostgreSQL: ``pg_dump -Fc``, and ``pg_restore --clean --if-exists
  --single-transaction`` into the same database (tables, functions and
  triggers dropped and made again, in one transaction).
* MariaDB / MySQL: ``mysqldump --single-transaction --routines``, and
  the dump piped back to ``mysql`` (each table dropped and made again,
  its triggers with it).
* SQLite: the online backup API, both ways, as ``sqlite3``'s ``.backup``
  and ``.restore`` do.
"""
import os
import sqlite3
import subprocess
import tempfile

import sqlalchemy as sa

from placement.db import change_triggers
from placement.tests.functional import freshness_writes as writes

SLOTS = change_triggers.SLOTS
EPOCH_SLOT = change_triggers.EPOCH_SLOT


def _pg_args(url):
    env = dict(os.environ, PGPASSWORD=url.password or '')
    return ['-h', url.host or '127.0.0.1', '-p', str(url.port or 5432),
            '-U', url.username, '-d', url.database], env


def _mysql_args(url):
    return ['-h', url.host or '127.0.0.1', '-P', str(url.port or 3306),
            '-u', url.username, '-p' + (url.password or '')]


def take(engine, path):
    """A backup of ``engine``'s database in ``path``."""
    url = engine.url
    dialect = engine.dialect.name
    if dialect == 'postgresql':
        args, env = _pg_args(url)
        subprocess.run(['pg_dump', '-Fc', '-f', path] + args, env=env,
                       check=True, capture_output=True)
    elif dialect == 'mysql':
        with open(path, 'wb') as out:
            subprocess.run(['mysqldump', '--single-transaction',
                            '--routines'] + _mysql_args(url) +
                           [url.database], stdout=out, check=True,
                           stderr=subprocess.PIPE)
    else:
        with sqlite3.connect(url.database) as live, \
                sqlite3.connect(path) as copy:
            live.backup(copy)


def restore(engine, path):
    """``engine``'s database as the backup in ``path`` holds it."""
    url = engine.url
    dialect = engine.dialect.name
    if dialect == 'postgresql':
        args, env = _pg_args(url)
        subprocess.run(['pg_restore', '--clean', '--if-exists',
                        '--single-transaction'] + args + [path], env=env,
                       check=True, capture_output=True)
    elif dialect == 'mysql':
        with open(path, 'rb') as dump:
            subprocess.run(['mysql'] + _mysql_args(url) + [url.database],
                           stdin=dump, check=True, capture_output=True)
    else:
        with sqlite3.connect(path) as copy, \
                sqlite3.connect(url.database) as live:
            copy.backup(live)
    # Pooled connections of this process may have cached what the
    # restore replaced (MySQL's prepared metadata, SQLite's schema).
    engine.dispose()


def _counters(engine):
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            'SELECT slot, seq FROM placement_change_slots')).all())


# At most this many writes after a restore (a slot far behind is left
# behind: the processes see its counter back).
_MOST_TOUCHES = 300


def count_back(engine, before):
    """Writes that change nothing, one transaction each, until each
    slot's counter is at ``before`` again (where one can be made);
    returns how many."""
    now = _counters(engine)
    made = _rename_back(engine, before[EPOCH_SLOT] - now[EPOCH_SLOT])
    del before[EPOCH_SLOT]
    for slot, seq in sorted(before.items()):
        short = seq - now.get(slot, 0)
        if short <= 0 or made + short > _MOST_TOUCHES:
            continue
        for table in ('inventories', 'allocations'):
            with engine.connect() as conn:
                row = conn.execute(sa.text(
                    'SELECT id FROM %s WHERE resource_provider_id %% %d '
                    '= :slot ORDER BY id LIMIT 1' % (table, SLOTS)),
                    {'slot': slot}).first()
            if row is not None:
                break
        else:
            continue
        for _ in range(short):
            with engine.begin() as conn:
                conn.execute(sa.text(
                    'UPDATE %s SET used = used WHERE id = :id' % table
                    if table == 'allocations' else
                    'UPDATE %s SET total = total WHERE id = :id' % table),
                    {'id': row[0]})
        made += short
    return made


def _rename_back(engine, short):
    """``short`` renames of a custom resource class, each a new epoch
    (change_triggers.RENAMES), if there is one and ``short`` is small."""
    if not 0 < short <= _MOST_TOUCHES:
        return 0
    with engine.connect() as conn:
        names = set(conn.execute(sa.text(
            'SELECT name FROM resource_classes')).scalars())
    name = next((n for n in sorted(names) if n.startswith('CUSTOM_') and
                 n + '_R' not in names), None)
    if name is None:
        return 0
    for i in range(short):
        old, new = (name, name + '_R') if i % 2 == 0 else (name + '_R', name)
        with engine.begin() as conn:
            conn.execute(sa.text('UPDATE resource_classes SET name = :new '
                                 'WHERE name = :old'), {'new': new, 'old': old})
    return short


def _watched_triggers(dialect, table):
    return [name for name, t, _ in change_triggers.made(dialect)
            if t == table]


def switch_triggers(engine, table, on):
    """``table``'s triggers off (PostgreSQL: disabled, elsewhere
    dropped) or on again as they were (unless ``placement-manage db
    sync`` mended them meanwhile), without a new epoch: the processes
    must see to that."""
    with engine.begin() as conn:
        if conn.dialect.name == 'postgresql':
            conn.exec_driver_sql('ALTER TABLE %s %s TRIGGER USER'
                                 % (table, 'ENABLE' if on else 'DISABLE'))
            return
        present = change_triggers._on_database(conn)
        for name in _watched_triggers(conn.dialect.name, table):
            if on and name not in present:
                change_triggers.install_one(conn, name)
            elif not on and name in present:
                change_triggers.drop_one(conn, name)


# Steps a world may still answer with SQL after the triggers are back:
# its first request there starts a new epoch, in a thread, which on a
# loaded machine (or behind SQLite's lock) may take a few requests. The
# grace ends sooner, once every world has answered from memory.
_GRACE = 50


class Operator:
    """The operator's writes: a backup taken, and restored a few steps
    later; a table's triggers turned off, and on again a few steps later.
    ``due`` says when the second half is."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix='placement-backup-')
        self.path = os.path.join(self._dir.name, 'backup')
        self.restore_in = None
        self.on_in = None
        self.off_table = None
        self.grace = 0
        self.touches = 0

    def due(self):
        """Whether this step is the second half of an earlier one."""
        if self.grace:
            self.grace -= 1
        for name in ('restore_in', 'on_in'):
            left = getattr(self, name)
            if left:
                setattr(self, name, left - 1)
        return self.restore_in == 0 or self.on_in == 0

    def sql_allowed(self):
        """Whether a world process may answer from the database now."""
        return self.off_table is not None or self.grace > 0

    def answered_from_memory(self):
        """Every world answered from memory: back, the grace is over."""
        if self.off_table is None:
            self.grace = 0

    def make(self, rnd):
        if self.restore_in == 0:
            self.restore_in = None
            return writes.Write('restore', act=self._restore)
        if self.on_in == 0:
            self.on_in = None
            table, self.off_table = self.off_table, None
            self.grace = _GRACE
            return writes.Write('triggers_on', act=lambda engine: (
                switch_triggers(engine, table, True)))
        if self.off_table is None and (self.restore_in is not None or
                                       rnd.random() < 0.4):
            self.off_table = rnd.choice(sorted(change_triggers.WATCHED))
            self.on_in = rnd.randint(2, 8)
            table = self.off_table
            return writes.Write('triggers_off', act=lambda engine: (
                switch_triggers(engine, table, False)))
        if self.restore_in is not None or self.off_table is not None:
            # No backup while a table's triggers are off: restored, it
            # would bring them back off (the service then answers from
            # SQL until db sync, rightly, but the check would not know).
            return None
        self.restore_in = rnd.randint(2, 8)
        return writes.Write('backup', act=self._take)

    def _take(self, engine):
        take(engine, self.path)

    def _restore(self, engine):
        before = _counters(engine)
        restore(engine, self.path)
        self.touches += count_back(engine, before)

    def close(self):
        self._dir.cleanup()
