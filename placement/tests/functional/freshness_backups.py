"""Backups taken and restored under running processes, with each
database's own tools, for the freshness check (freshness.py).

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


class Backups:
    """The operator's writes: a backup taken (``make``), and restored a
    few steps later (when ``due``)."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix='placement-backup-')
        self.path = os.path.join(self._dir.name, 'backup')
        self.restore_in = None
        self.touches = 0

    def due(self):
        """Whether this step restores the backup."""
        if self.restore_in is None:
            return False
        self.restore_in -= 1
        return self.restore_in == 0

    def make(self, rnd):
        if self.restore_in == 0:
            self.restore_in = None
            return writes.Write('restore', act=self._restore)
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
