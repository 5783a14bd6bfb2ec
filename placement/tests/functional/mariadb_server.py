"""A private MariaDB server whose settings a test chooses.

The shared MariaDB of ``tools/start-test-dbs`` has binary logging off and
grants the test user everything; a test of what a managed database
refuses (binary logging on, a user granted only its own schema) needs a
server of its own. ``TempMariaDB`` runs ``mariadb-install-db`` into a
temporary directory and ``mariadbd`` on a free loopback port: about a
second each. Root reaches it through its socket; other users over TCP
(name resolution off, so a user is ``'name'@'127.0.0.1'``).

As root the server runs as the ``mysql`` user, as the package's does.
"""
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time

import sqlalchemy as sa

MARIADBD = '/usr/sbin/mariadbd'


def available():
    return (os.access(MARIADBD, os.X_OK)
            and shutil.which('mariadb-install-db') is not None)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class TempMariaDB:
    """A throw-away MariaDB server; use as a context manager.
    ``options``: more ``mariadbd`` command-line options."""

    def __init__(self, options=()):
        self.port = _free_port()
        self.options = list(options)
        # Short: a socket path may not pass 107 characters.
        self.tmpdir = tempfile.mkdtemp(prefix='pmdb-', dir='/tmp')
        self.datadir = os.path.join(self.tmpdir, 'data')
        self.socket = os.path.join(self.tmpdir, 'sock')
        self.logfile = os.path.join(self.tmpdir, 'server.log')
        self.proc = None
        self._kwargs = {'stdin': subprocess.DEVNULL}
        if os.getuid() == 0:
            entry = pwd.getpwnam('mysql')
            os.chown(self.tmpdir, entry.pw_uid, entry.pw_gid)
            self._kwargs.update(user=entry.pw_uid, group=entry.pw_gid,
                                extra_groups=[])

    def root_url(self, database=''):
        return ('mysql+pymysql://root@localhost/%s?unix_socket=%s'
                % (database, self.socket))

    def url(self, user, password, database):
        return ('mysql+pymysql://%s:%s@127.0.0.1:%d/%s'
                % (user, password, self.port, database))

    def root_sql(self, *statements):
        """Run ``statements`` as root, autocommitted; the rows of the
        last one."""
        engine = sa.create_engine(self.root_url(),
                                  isolation_level='AUTOCOMMIT')
        try:
            with engine.connect() as conn:
                rows = None
                for statement in statements:
                    result = conn.exec_driver_sql(statement)
                    rows = result.fetchall() if result.returns_rows else None
                return rows
        finally:
            engine.dispose()

    def start(self, timeout=30):
        subprocess.run(
            ['mariadb-install-db', '--no-defaults',
             '--datadir=' + self.datadir, '--skip-test-db',
             '--auth-root-authentication-method=normal'],
            check=True, capture_output=True, cwd=self.tmpdir,
            **self._kwargs)
        with open(self.logfile, 'ab') as log:
            self.proc = subprocess.Popen(
                [MARIADBD, '--no-defaults', '--datadir=' + self.datadir,
                 '--socket=' + self.socket, '--port=%d' % self.port,
                 '--bind-address=127.0.0.1', '--skip-name-resolve',
                 '--pid-file=' + os.path.join(self.tmpdir, 'pid'),
                 '--innodb-flush-log-at-trx-commit=0',
                 '--innodb-buffer-pool-size=32M'] + self.options,
                stdout=log, stderr=subprocess.STDOUT, cwd=self.tmpdir,
                start_new_session=True, **self._kwargs)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('mariadbd exited:\n' + self.log_text())
            try:
                self.root_sql('SELECT 1')
                return self
            except sa.exc.OperationalError:
                time.sleep(0.1)
        raise RuntimeError('mariadbd did not start:\n' + self.log_text())

    def log_text(self):
        try:
            with open(self.logfile, errors='replace') as f:
                return f.read()[-5000:]
        except OSError:
            return ''

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False
