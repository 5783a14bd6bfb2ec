"""A private PostgreSQL server a test may kill and restart at will.

The shared servers from ``tools/start-test-dbs`` must stay up for every
other test; a fault test needs one of its own. ``TempPostgres`` runs
``initdb`` into a temporary directory and starts ``postgres`` on a free
loopback port in its own process group, so ``kill()`` takes down the
postmaster and every backend at once, as a crash would, and ``start()``
brings the same data directory back (crash recovery included).

PostgreSQL refuses to run as root; as root the server runs as the
``postgres`` user (or ``nobody``), which then owns the temporary directory.
"""
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

USER = 'placement'


def find_bindir():
    """The directory holding initdb and postgres, or None."""
    found = sorted(glob.glob('/usr/lib/postgresql/*/bin/postgres'),
                   key=lambda p: [int(x) if x.isdigit() else 0
                                  for x in p.split('/')[4].split('.')])
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which('initdb')
    if initdb and shutil.which('postgres'):
        return os.path.dirname(os.path.realpath(initdb))
    return None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _run_as():
    """(uid, gid) to run PostgreSQL as, or None when not root."""
    if os.getuid() != 0:
        return None
    for name in ('postgres', 'nobody'):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise RuntimeError('running as root and no postgres/nobody user')


class TempPostgres:
    """A throw-away PostgreSQL cluster; use as a context manager."""

    def __init__(self, bindir=None, port=None, parent=None):
        """``parent``: the directory to make the cluster's own one in
        (the system's temporary directory by default)."""
        self.bindir = bindir or find_bindir()
        if self.bindir is None:
            raise RuntimeError('PostgreSQL server binaries not found')
        self.port = port or _free_port()
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.tmpdir = tempfile.mkdtemp(prefix='placement-pg-', dir=parent)
        self.datadir = os.path.join(self.tmpdir, 'data')
        self.logfile = os.path.join(self.tmpdir, 'postgres.log')
        self.proc = None
        self._ids = _run_as()
        if self._ids:
            os.chmod(self.tmpdir, 0o755)
            os.chown(self.tmpdir, *self._ids)

    @property
    def url(self):
        """A superuser URL on the ``postgres`` database (trust auth)."""
        return ('postgresql+psycopg2://%s@127.0.0.1:%d/postgres'
                % (USER, self.port))

    def _popen_kwargs(self):
        kwargs = {'stdin': subprocess.DEVNULL}
        if self._ids:
            kwargs.update(user=self._ids[0], group=self._ids[1],
                          extra_groups=[])
        return kwargs

    def initdb(self):
        subprocess.run(
            [os.path.join(self.bindir, 'initdb'), '-D', self.datadir,
             '-U', USER, '--auth=trust', '-E', 'UTF8', '--no-sync',
             '--locale=C'],
            check=True, capture_output=True, cwd=self.tmpdir,
            **self._popen_kwargs())

    def start(self, timeout=30):
        """Start the server on the existing data directory; wait for it."""
        log = open(self.logfile, 'ab')
        try:
            self.proc = subprocess.Popen(
                [os.path.join(self.bindir, 'postgres'), '-D', self.datadir,
                 '-p', str(self.port), '-h', '127.0.0.1',
                 # fsync=off is safe: a killed process loses nothing the
                 # OS already has. synchronous_commit must stay on, or a
                 # kill loses commits the client was told about.
                 '-k', self.tmpdir, '-c', 'fsync=off',
                 '-c', 'max_connections=200'],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.tmpdir,
                start_new_session=True, **self._popen_kwargs())
        finally:
            log.close()
        self.wait_ready(timeout)
        return self

    def ready(self):
        import psycopg2
        try:
            conn = psycopg2.connect(host='127.0.0.1', port=self.port,
                                    user=USER, dbname='postgres',
                                    connect_timeout=2)
        except psycopg2.OperationalError:
            return False
        conn.close()
        return True

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('postgres exited:\n' + self.log_text())
            if self.ready():
                return
            time.sleep(0.05)
        raise RuntimeError('postgres did not start:\n' + self.log_text())

    def kill(self):
        """SIGKILL the postmaster and all its backends, as a crash would."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        self.proc = None
        # Backends die with the group; wait until the port is closed.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(('127.0.0.1', self.port)) != 0:
                    return
            time.sleep(0.05)

    def log_text(self):
        try:
            with open(self.logfile, errors='replace') as f:
                return f.read()[-5000:]
        except OSError:
            return ''

    def stop(self):
        self.kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self):
        try:
            self.initdb()
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False
