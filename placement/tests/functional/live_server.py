"""A real placement server in a child process, for tests that need one.

Concurrency, fuzz and fault tests want what deployers run: gunicorn with
several worker processes over a real database, reached over HTTP. Usage::

    from placement.tests.functional import live_server

    with live_server.LiveServer(workers=4) as server:
        requests.get(server.url + '/resource_providers',
                     headers=server.headers())

Each server gets a fresh database from ``placement.tests.db`` (SQLite, or
the server named by ``PLACEMENT_TEST_DB_URL``), migrated to head, and its
own ``placement.conf`` in a temporary ``OS_PLACEMENT_CONFIG_DIR`` with
noauth2. Everything is torn down on exit, the process group included.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from placement.tests import db as test_db

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


def _gunicorn():
    """gunicorn next to the running interpreter (the project's .venv)."""
    candidates = [
        os.path.join(os.path.dirname(sys.executable), 'gunicorn'),
        os.path.join(REPO_ROOT, '.venv', 'bin', 'gunicorn'),
    ]
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    raise RuntimeError('gunicorn not found; install the test extras')


_NO_CONTROL_SOCKET = {}


def _control_socket_args(gunicorn):
    """Newer gunicorn opens one shared control socket per user; servers
    started side by side would fight over it, so turn it off when the
    option exists."""
    if gunicorn not in _NO_CONTROL_SOCKET:
        out = subprocess.run([gunicorn, '--help'], capture_output=True,
                             text=True).stdout
        _NO_CONTROL_SOCKET[gunicorn] = '--no-control-socket' in out
    return ['--no-control-socket'] if _NO_CONTROL_SOCKET[gunicorn] else []


def free_port():
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class LiveServer:
    """Context manager: a fresh database plus gunicorn serving placement.

    :param workers: gunicorn worker processes.
    :param port: loopback port; a free one when None.
    :param conf: extra config, ``{'group': {'option': value}}``, written
        into placement.conf.
    :param threads: gthread threads per worker (1 means sync workers).
    :param start_timeout: seconds to wait for ``GET /`` to answer.
    :param gunicorn_args: extra gunicorn command-line arguments.
    :param env: extra environment variables for gunicorn.
    :param gunicorn: the gunicorn to run (another virtualenv's, e.g. one
        with upstream placement installed); the project's by default.
    :param cwd: where gunicorn runs (and so which ``placement`` package it
        imports first); the repository by default.
    :param db_url: serve this existing database (left in place at stop)
        instead of a fresh one: several servers over one database, or
        over the nodes of a cluster.
    """

    def __init__(self, workers=2, port=None, conf=None, threads=1,
                 start_timeout=60, timeout=60, gunicorn_args=(),
                 env=None, gunicorn=None, cwd=None, db_url=None):
        self.db_url = db_url
        self.gunicorn = gunicorn
        self.cwd = cwd or REPO_ROOT
        self.workers = workers
        self.port = port or free_port()
        self.conf = conf or {}
        self.threads = threads
        self.start_timeout = start_timeout
        self.timeout = timeout
        self.gunicorn_args = list(gunicorn_args)
        self.env = dict(env or {})
        self.url = 'http://127.0.0.1:%d' % self.port
        self.db = None
        self.proc = None
        self.config_dir = None
        self.log_path = None
        self._log = None

    # -- helpers for callers --------------------------------------------

    @staticmethod
    def headers(version='latest', token='admin', **extra):
        headers = {'x-auth-token': token, 'accept': 'application/json',
                   'openstack-api-version': 'placement %s' % version}
        headers.update(extra)
        return headers

    def log_text(self):
        """What gunicorn and placement wrote so far (for failure messages)."""
        if not self.log_path or not os.path.exists(self.log_path):
            return ''
        with open(self.log_path, errors='replace') as f:
            return f.read()

    # -- lifecycle --------------------------------------------------------

    def _write_conf(self):
        groups = {
            'DEFAULT': {'debug': 'False'},
            'api': {'auth_strategy': 'noauth2'},
            'placement_database': {'connection':
                                   self.db_url or self.db.url,
                                   'sync_on_startup': 'True'},
        }
        for group, options in self.conf.items():
            groups.setdefault(group, {}).update(
                {k: str(v) for k, v in options.items()})
        path = os.path.join(self.config_dir, 'placement.conf')
        with open(path, 'w') as f:
            for group, options in groups.items():
                f.write('[%s]\n' % group)
                for name, value in options.items():
                    f.write('%s = %s\n' % (name, value))
                f.write('\n')
        return path

    def start(self):
        # Migrated up front so that N workers booting at once find the
        # schema at head and sync_on_startup has nothing to race on.
        if not self.db_url:
            self.db = test_db.TestDatabase(migrate=True)
        self.config_dir = tempfile.mkdtemp(prefix='placement-live-')
        self._write_conf()
        self.log_path = os.path.join(self.config_dir, 'server.log')
        self._log = open(self.log_path, 'wb')
        env = dict(os.environ)
        env['OS_PLACEMENT_CONFIG_DIR'] = self.config_dir
        env.pop('PLACEMENT_TEST_DB_URL', None)
        env.update(self.env)
        gunicorn = self.gunicorn or _gunicorn()
        cmd = [gunicorn, '-w', str(self.workers),
               '-b', '127.0.0.1:%d' % self.port,
               '--timeout', str(self.timeout),
               '--graceful-timeout', '5']
        cmd += _control_socket_args(gunicorn)
        if self.threads > 1:
            cmd += ['--threads', str(self.threads)]
        cmd += self.gunicorn_args
        cmd.append('placement.wsgi.api:application')
        self.proc = subprocess.Popen(
            cmd, cwd=self.cwd, env=env, stdout=self._log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self._wait_ready()
        return self

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('placement server exited with %s:\n%s'
                                   % (self.proc.returncode, self.log_text()))
            try:
                with urllib.request.urlopen(self.url + '/', timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError('placement server did not answer GET / within '
                           '%ss:\n%s' % (self.start_timeout, self.log_text()))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.db is not None:
            self.db.drop()
            self.db = None
        if self.config_dir:
            import shutil
            keep = os.environ.get('PLACEMENT_TEST_KEEP_LOGS')
            if keep and os.path.exists(self.log_path):
                # For a failure to be read after the run: the log, by port.
                os.makedirs(keep, exist_ok=True)
                shutil.copy(self.log_path, os.path.join(
                    keep, 'server-%d-%d.log' % (self.port, time.time())))
            shutil.rmtree(self.config_dir, ignore_errors=True)
            self.config_dir = None

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False


def live_server(**kwargs):
    """Functional spelling of ``LiveServer(**kwargs)``."""
    return LiveServer(**kwargs)
