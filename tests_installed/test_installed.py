"""The package as a deployer gets it: built with ``python -m build`` from a
clean copy of the tree, installed into a fresh virtualenv, and run from a
directory that is not the checkout, so nothing can import from the source.

Run by ``tools/run-installed-tests`` (and ``.ci/run``), not by
``tools/run-tests``: it lives outside ``placement/`` so the wheel does not
carry it and the package's own suite does not collect it. One build, one
virtualenv for the module; the database checks run on SQLite and on the
servers named by ``PG_URL`` / ``MYSQL_URL`` (missing under ``CI=true`` is
a failure).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid
import zipfile

import pytest
import requests
import sqlalchemy as sa
from sqlalchemy.engine import make_url

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_NAME = 'openstack_placement_ng'
# What "placement-manage db version" prints after a sync: upstream's newest
# revision, as upstream's does; "db version --extra" prints our own track's
# (the change log the candidates' in-memory world reads).
HEAD = 'a082b8bb98d0'
EXTRA_HEAD = 'f2c6a8e1d9b4'
BACKENDS = ['sqlite', 'postgresql', 'mysql']
BACKEND_ENV = {'postgresql': 'PG_URL', 'mysql': 'MYSQL_URL'}
SERVERS = ['gunicorn', 'uwsgi', 'placement-api']
TIMEOUT = 600


def run(cmd, env, cwd, check=True, timeout=TIMEOUT):
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        pytest.fail('%s exited %d\n--- stdout\n%s\n--- stderr\n%s' % (
            ' '.join(cmd), proc.returncode, proc.stdout[-4000:],
            proc.stderr[-4000:]))
    return proc


def clean_env(venv=None):
    """The environment of a shell on a deploy host: none of the runner's
    virtualenv, Python path or placement settings leak in."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('PYTHON', 'VIRTUAL_ENV', 'OS_',
                                'PLACEMENT_'))}
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    if venv:
        env['VIRTUAL_ENV'] = venv
        env['PATH'] = os.path.join(venv, 'bin') + os.pathsep + env['PATH']
    return env


def tracked_files():
    """The tree as a clean clone has it: tracked files plus new ones not
    ignored (so a file added but not yet committed counts too)."""
    out = subprocess.run(
        ['git', '-C', REPO, 'ls-files', '-z', '--cached', '--others',
         '--exclude-standard'], check=True, capture_output=True).stdout
    names = sorted({n for n in out.decode().split('\0') if n})
    return [n for n in names if os.path.lexists(os.path.join(REPO, n))]


def package_files(names):
    return {n for n in names
            if n.startswith(('placement/', 'placement_request/'))}


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


# --- build and install, once ----------------------------------------------

@pytest.fixture(scope='module')
def work(tmp_path_factory):
    return tmp_path_factory.mktemp('installed')


@pytest.fixture(scope='module')
def source(work):
    """A copy of the tracked tree, with no .venv, caches or build leftovers."""
    names = tracked_files()
    src = work / 'src'
    for name in names:
        dest = src / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(REPO, name), dest, follow_symlinks=False)
    return src, names


@pytest.fixture(scope='module')
def dist(work, source):
    """sdist, then the wheel built from that sdist (build's default)."""
    src, _names = source
    out = work / 'dist'
    run([sys.executable, '-m', 'build', '--outdir', str(out), str(src)],
        env=clean_env(), cwd=str(work))
    wheels = list(out.glob('*.whl'))
    sdists = list(out.glob('*.tar.gz'))
    assert len(wheels) == 1 and len(sdists) == 1, os.listdir(out)
    return wheels[0], sdists[0]


@pytest.fixture(scope='module')
def venv(work, dist):
    """A fresh virtualenv with the wheel (PostgreSQL extra) and the two
    WSGI servers deployers use; returns its path."""
    wheel, _sdist = dist
    path = str(work / 'venv')
    run([sys.executable, '-m', 'venv', path], env=clean_env(), cwd=str(work))
    env = clean_env(path)
    pip = [os.path.join(path, 'bin', 'python'), '-m', 'pip', 'install', '-q']
    # uwsgi from PyPI compiles against this Python (tools/run-installed-
    # tests makes sure gcc and the headers are there); pip caches the build.
    run(pip + ['%s[postgresql]' % wheel, 'gunicorn', 'uwsgi'], env=env,
        cwd=str(work))
    return path


@pytest.fixture(scope='module')
def deploy_dir(work):
    """The current directory of every command: not the checkout."""
    path = work / 'deploy'
    path.mkdir()
    return path


def site_packages(venv, env, cwd):
    return run([os.path.join(venv, 'bin', 'python'), '-c',
                'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
               env, cwd).stdout.strip()


# --- what the artifacts carry ---------------------------------------------

def test_every_package_dir_is_a_package(source):
    """Directories of modules are regular packages, as upstream's are:
    without __init__.py one would still ship (find_namespace:) but import
    as a namespace package, which other projects' imports and tools such
    as pkgutil treat differently."""
    src, names = source
    dirs = {os.path.dirname(n) for n in package_files(names)
            if n.endswith('.py')}
    missing = sorted(d for d in dirs
                     if not (src / d / '__init__.py').exists())
    assert missing == []


def test_wheel_carries_every_package_file(source, dist):
    """Every tracked file under placement/ and placement_request/ (code,
    migrations, alembic.ini, script.py.mako, gabbits' YAML, the test
    fixtures other projects import) is in the wheel."""
    _src, names = source
    wheel, _sdist = dist
    with zipfile.ZipFile(wheel) as zf:
        inside = set(zf.namelist())
    missing = sorted(package_files(names) - inside)
    assert missing == []
    top = {n.split('/', 1)[0] for n in inside}
    assert {t for t in top if not t.endswith('.dist-info')} == {
        'placement', 'placement_request'}
    assert not [n for n in inside if '__pycache__' in n]


def test_sdist_carries_the_tree(source, dist):
    """Everything tracked but the CI and git dot-files, so the sdist builds
    the same wheel and still has etc/, tools/ and the docs."""
    _src, names = source
    _wheel, sdist = dist
    with tarfile.open(sdist) as tf:
        inside = {n.split('/', 1)[1] for n in tf.getnames() if '/' in n}
    wanted = {n for n in names if not n.startswith('.')}
    assert sorted(wanted - inside) == []
    assert not [n for n in inside if '__pycache__' in n or n.endswith('.pyc')]


def test_imports_from_the_virtualenv(venv, deploy_dir):
    """The service, the request builder and the fixtures nova imports
    come from site-packages, not from the checkout."""
    env = clean_env(venv)
    # The fixtures need the test extras to import; finding them is enough.
    probe = run([os.path.join(venv, 'bin', 'python'), '-c', textwrap.dedent('''
        import importlib.util
        for name in ('placement', 'placement_request',
                     'placement.db.migrations.versions',
                     'placement.tests.functional.fixtures'):
            print(importlib.util.find_spec(name).origin)
        ''')], env, str(deploy_dir))
    site = site_packages(venv, env, str(deploy_dir))
    for path in probe.stdout.split():
        assert path.startswith(site + os.sep), path


def test_sdist_installs_the_same_files(work, dist, venv, deploy_dir):
    """pip building from the sdist (as ``pip install <sdist>`` or an
    sdist-only mirror does) installs the wheel's files, and they work."""
    wheel, sdist = dist
    target = work / 'from-sdist'
    env = clean_env(venv)
    run([os.path.join(venv, 'bin', 'python'), '-m', 'pip', 'install', '-q',
         '--no-deps', '--no-compile', '--target', str(target), str(sdist)],
        env, str(deploy_dir))
    got = {str(p.relative_to(target)) for p in target.rglob('*')
           if p.is_file() and p.parts[len(target.parts)].startswith(
               ('placement', 'placement_request'))
           and '.dist-info' not in str(p) and '__pycache__' not in str(p)}
    with zipfile.ZipFile(wheel) as zf:
        want = {n for n in zf.namelist() if '.dist-info/' not in n}
    assert sorted(want ^ got) == []
    env['PYTHONPATH'] = str(target)
    conf = make_config(work / 'sdist-conf', 'sqlite:///%s' % (
        work / 'sdist.sqlite'))
    env['OS_PLACEMENT_CONFIG_DIR'] = str(conf)
    run(['placement-manage', 'db', 'sync'], env, str(deploy_dir))
    out = run(['placement-manage', 'db', 'version'], env, str(deploy_dir))
    assert out.stdout.split() == [HEAD]


# --- sample generators ----------------------------------------------------

def test_config_generator_namespace(venv, deploy_dir):
    out = run(['oslo-config-generator', '--namespace', 'placement.conf'],
              clean_env(venv), str(deploy_dir)).stdout
    for text in ('[placement_database]', '#connection = <None>',
                 '#sync_on_startup = false', '[api]', '#auth_strategy =',
                 '[placement]', '#max_allocation_candidates = -1'):
        assert text in out


def test_generators_from_shipped_config_files(work, source, venv, dist):
    """etc/placement/*-generator.conf from the sdist, run where a deployer
    unpacked it, write the two samples from the installed entry points."""
    _wheel, sdist = dist
    unpack = work / 'unpacked'
    with tarfile.open(sdist) as tf:
        kw = {'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}
        tf.extractall(unpack, **kw)
    top = next(unpack.iterdir())
    # Run from a copy of etc/ alone: the unpacked tree holds placement/.
    gen = work / 'gen'
    shutil.copytree(top / 'etc', gen / 'etc')
    env = clean_env(venv)
    run(['oslo-config-generator', '--config-file',
         'etc/placement/config-generator.conf'], env, str(gen))
    sample = (gen / 'etc/placement/placement.conf.sample').read_text()
    for text in ('[placement_database]', '[keystone_authtoken]',
                 '[oslo_policy]', '[cors]', '#debug = false'):
        assert text in sample
    run(['oslopolicy-sample-generator', '--config-file',
         'etc/placement/policy-generator.conf'], env, str(gen))
    policy = (gen / 'etc/placement/policy.yaml.sample').read_text()
    assert '"placement:resource_providers:list"' in policy
    out = run(['oslopolicy-sample-generator', '--namespace', 'placement'],
              env, str(gen)).stdout
    for rule in ('placement:allocation_candidates:list',
                 'placement:allocations:update', 'placement:traits:update',
                 'placement:reshaper:reshape', 'placement:usages'):
        assert '"%s"' % rule in out


# --- databases ------------------------------------------------------------

def make_config(path, url):
    """placement.conf as a deployer writes it; noauth2 comes from the
    environment (OS_API__AUTH_STRATEGY) so both sources are exercised."""
    path.mkdir(parents=True, exist_ok=True)
    (path / 'placement.conf').write_text(textwrap.dedent('''\
        [DEFAULT]
        state_path = {state}

        [placement_database]
        connection = {url}
        ''').format(state=path / 'state', url=url))
    return path


class Database:
    """A new empty database on a backend; ``drop()`` removes it."""

    def __init__(self, backend, tmp):
        self.backend = backend
        self.admin = None
        if backend == 'sqlite':
            self.url = 'sqlite:///%s' % (tmp / 'placement.sqlite')
            return
        server = os.environ.get(BACKEND_ENV[backend])
        if not server:
            msg = '%s is not set' % BACKEND_ENV[backend]
            if os.environ.get('CI') == 'true':
                pytest.fail(msg + ' (CI=true: every backend must run)')
            pytest.skip(msg)
        self.admin = make_url(server)
        self.name = 'pinst_' + uuid.uuid4().hex[:12]
        self._admin_exec('CREATE DATABASE %s' % self.name)
        self.url = self.admin.set(database=self.name).render_as_string(
            hide_password=False)

    def _admin_exec(self, sql):
        engine = sa.create_engine(self.admin, isolation_level='AUTOCOMMIT')
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(sql))
        finally:
            engine.dispose()

    def tables(self):
        engine = sa.create_engine(self.url)
        try:
            return set(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()

    def drop(self):
        if self.admin is not None:
            self._admin_exec('DROP DATABASE IF EXISTS %s' % self.name)


@pytest.fixture(scope='module', params=BACKENDS)
def synced(request, work, venv, deploy_dir):
    """A fresh database with ``placement-manage db sync`` run on it; the
    environment every command and server of that backend uses."""
    backend = request.param
    tmp = work / ('db-' + backend)
    tmp.mkdir()
    db = Database(backend, tmp)
    env = clean_env(venv)
    env['OS_PLACEMENT_CONFIG_DIR'] = str(make_config(tmp / 'etc', db.url))
    env['OS_API__AUTH_STRATEGY'] = 'noauth2'
    try:
        assert db.tables() == set()
        run(['placement-manage', 'db', 'sync'], env, str(deploy_dir))
        yield db, env
    finally:
        db.drop()


def test_db_sync_creates_the_schema(synced, deploy_dir):
    db, env = synced
    assert {'resource_providers', 'inventories', 'allocations', 'consumers',
            'consumer_types', 'traits', 'resource_provider_traits',
            'placement_aggregates', 'resource_provider_aggregates',
            'resource_classes', 'projects', 'users',
            'placement_change_slots', 'placement_changes',
            'alembic_version', 'placement_extra_version'} <= db.tables()
    out = run(['placement-manage', 'db', 'version'], env, str(deploy_dir))
    assert out.stdout.split() == [HEAD]
    out = run(['placement-manage', 'db', 'version', '--extra'], env,
              str(deploy_dir))
    assert out.stdout.split() == [EXTRA_HEAD]


def test_upgrade_check_passes(synced, deploy_dir):
    db, env = synced
    out = run(['placement-status', 'upgrade', 'check', '--json'], env,
              str(deploy_dir))
    checks = json.loads(out.stdout)['checks']
    assert [c['check'] for c in checks] == [
        'Missing Root Provider IDs', 'Incomplete Consumers',
        'Policy File JSON to YAML Migration', 'Candidates Change Log']
    assert [c['result'] for c in checks] == [0, 0, 0, 0], out.stdout


# --- serving --------------------------------------------------------------

def server_command(server, venv, port):
    app = 'placement.wsgi.api:application'
    if server == 'gunicorn':
        cmd = ['gunicorn', '-w', '2', '-b', '127.0.0.1:%d' % port]
        help_text = subprocess.run(
            [os.path.join(venv, 'bin', 'gunicorn'), '--help'],
            capture_output=True, text=True).stdout
        if '--no-control-socket' in help_text:
            cmd.append('--no-control-socket')
        return cmd + [app]
    if server == 'uwsgi':
        # http11: keep-alive done right; with --http-socket uwsgi closes
        # each connection unannounced and a client reusing it gets a reset.
        return ['uwsgi', '--http11-socket', '127.0.0.1:%d' % port,
                '--virtualenv', venv, '--master', '--processes', '2',
                '--module', app, '--need-app', '--die-on-term']
    return ['placement-api', '--port', str(port)]


class Server:
    def __init__(self, server, venv, env, cwd, log_path):
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.log_path = log_path
        self._log = open(log_path, 'w')
        self.proc = subprocess.Popen(
            server_command(server, venv, self.port), env=env, cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True)

    def log(self):
        self._log.flush()
        with open(self.log_path) as f:
            return f.read()[-6000:]

    def wait_ready(self, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail('server exited %s\n%s' % (self.proc.returncode,
                                                      self.log()))
            try:
                # The first request builds the app (policies, standard
                # traits): slow on a busy machine.
                requests.get(self.url + '/', timeout=timeout)
                return
            except requests.ConnectionError:
                time.sleep(0.3)
        pytest.fail('server did not answer in %ds\n%s' % (timeout,
                                                          self.log()))

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


class Client:
    """Requests as nova sends them: noauth2 admin token, a microversion."""

    def __init__(self, url):
        self.url = url
        self.session = requests.Session()

    def __call__(self, method, path, version='1.39', body=None):
        headers = {'x-auth-token': 'admin', 'accept': 'application/json',
                   'openstack-api-version': 'placement %s' % version}
        return self.session.request(method, self.url + path, json=body,
                                    headers=headers, timeout=30)

    def expect(self, status, method, path, **kw):
        resp = self(method, path, **kw)
        assert resp.status_code == status, (method, path, resp.status_code,
                                            resp.text)
        return resp.json() if resp.content else None


def smoke_walk(call):
    """A provider's life as nova drives it, with upstream's answers."""
    root = call.expect(200, 'GET', '/')
    assert root['versions'][0]['max_version'] == '1.39'
    assert root['versions'][0]['min_version'] == '1.0'
    # The web view's files come from site-packages, without a token.
    for path, text in (('/ui/', 'src="ui.js"'), ('/ui/ui.js', 'function init'),
                       ('/ui/session.js', 'x-auth-token'),
                       ('/ui/dom.js', 'function'),
                       ('/ui/trees.js', 'aggregateParts'),
                       ('/ui/ui.css', '--row')):
        page = requests.get(call.url + path, timeout=30)
        assert page.status_code == 200 and text in page.text, path

    rp, agg = str(uuid.uuid4()), str(uuid.uuid4())
    consumer, project, user = (str(uuid.uuid4()) for _ in range(3))
    trait = 'CUSTOM_INSTALLED_%s' % uuid.uuid4().hex[:8].upper()
    created = call.expect(200, 'POST', '/resource_providers',
                          body={'name': 'cn-' + rp, 'uuid': rp})
    assert created['uuid'] == rp and created['generation'] == 0
    assert created['root_provider_uuid'] == rp

    inv = call.expect(200, 'PUT', '/resource_providers/%s/inventories' % rp,
                      body={'resource_provider_generation': 0,
                            'inventories': {
                                'VCPU': {'total': 8, 'allocation_ratio': 2.0},
                                'MEMORY_MB': {'total': 4096}}})
    assert inv['resource_provider_generation'] == 1
    assert inv['inventories']['VCPU']['allocation_ratio'] == 2.0

    call.expect(201, 'PUT', '/traits/' + trait)
    call.expect(204, 'PUT', '/traits/' + trait)
    bad = call('PUT', '/traits/NOT_CUSTOM')
    assert bad.status_code == 400
    assert bad.json()['errors'][0]['status'] == 400
    traits = call.expect(200, 'PUT', '/resource_providers/%s/traits' % rp,
                         body={'resource_provider_generation': 1,
                               'traits': [trait, 'HW_CPU_X86_AVX2']})
    assert sorted(traits['traits']) == sorted([trait, 'HW_CPU_X86_AVX2'])
    assert traits['resource_provider_generation'] == 2

    aggs = call.expect(200, 'PUT', '/resource_providers/%s/aggregates' % rp,
                       body={'resource_provider_generation': 2,
                             'aggregates': [agg]})
    assert aggs['aggregates'] == [agg]

    cands = call.expect(
        200, 'GET', '/allocation_candidates?resources=VCPU:2,MEMORY_MB:512'
        '&required=%s&member_of=%s' % (trait, agg))
    assert cands['allocation_requests'] == [{
        'allocations': {rp: {'resources': {'VCPU': 2, 'MEMORY_MB': 512}}},
        'mappings': {'': [rp]}}]
    summary = cands['provider_summaries'][rp]
    assert summary['resources']['VCPU'] == {'capacity': 16, 'used': 0}
    assert sorted(summary['traits']) == sorted([trait, 'HW_CPU_X86_AVX2'])
    none = call.expect(
        200, 'GET', '/allocation_candidates?resources=VCPU:2'
        '&required=!%s&member_of=%s' % (trait, agg))
    assert none['allocation_requests'] == []

    claim = cands['allocation_requests'][0]
    claim.pop('mappings')
    claim.update(project_id=project, user_id=user, consumer_generation=None,
                 consumer_type='INSTANCE')
    call.expect(204, 'PUT', '/allocations/' + consumer, body=claim)
    allocs = call.expect(200, 'GET', '/allocations/' + consumer)
    assert allocs['consumer_type'] == 'INSTANCE'
    assert allocs['consumer_generation'] == 1
    assert allocs['allocations'][rp]['resources'] == {'VCPU': 2,
                                                      'MEMORY_MB': 512}
    stale = call('PUT', '/allocations/' + consumer, body=claim)
    assert stale.status_code == 409
    assert stale.json()['errors'][0]['code'] == 'placement.concurrent_update'

    usages = call.expect(200, 'GET', '/resource_providers/%s/usages' % rp)
    assert usages['usages'] == {'VCPU': 2, 'MEMORY_MB': 512}
    totals = call.expect(200, 'GET', '/usages?project_id=' + project)
    assert totals['usages'] == {'INSTANCE': {'consumer_count': 1, 'VCPU': 2,
                                             'MEMORY_MB': 512}}

    call.expect(204, 'DELETE', '/allocations/' + consumer)
    assert call.expect(200, 'GET', '/resource_providers/%s/usages' % rp)[
        'usages'] == {'VCPU': 0, 'MEMORY_MB': 0}
    call.expect(204, 'DELETE', '/resource_providers/' + rp)
    gone = call('GET', '/resource_providers/' + rp)
    assert gone.status_code == 404
    assert gone.json()['errors'][0]['code'] == 'placement.undefined_code'


@pytest.mark.parametrize('server', SERVERS)
def test_server_answers_the_smoke_walk(server, synced, venv, deploy_dir,
                                       work):
    db, env = synced
    srv = Server(server, venv, env, str(deploy_dir),
                 work / ('%s-%s.log' % (server, db.backend)))
    try:
        srv.wait_ready()
        try:
            smoke_walk(Client(srv.url))
        except Exception as exc:
            raise AssertionError('%s: %s\n--- server log\n%s' % (
                type(exc).__name__, exc, srv.log())) from exc
    finally:
        srv.stop()
