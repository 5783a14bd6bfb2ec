"""A real Keystone on loopback for tests and for trying things by hand.

Run through ``tools/keystone-server``; stdlib only, so the system python3
can run it before any virtualenv exists.

    start    install Keystone into .keystone-venv/ (once per pinned version),
             build its state (SQLite database, fernet and credential keys,
             bootstrap) once, serve it with gunicorn, create the personas;
             prints KEYSTONE_URL=... and PERSONAS=... (a JSON file)
    stop     stop the server (state is kept: tokens issued before stay valid
             after the next start)
    status   exit 0 when it answers
    reset    stop and forget the state
    endpoint URL      catalog entry for placement (type placement) at URL
    expired-token USER_ID PROJECT_ID
             a fernet token for that user and project that expired an hour
             ago, made with the server's own keys (Keystone will not issue
             one, and waiting for a real one to expire takes too long)

Every user's password is ``pw-<name>``.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

KEYSTONE_VERSION = os.environ.get('KEYSTONE_VERSION', '30.0.0')
# The clients tested against it live in the same venv.
CLIENTS = ['python-openstackclient', 'osc-placement==4.9.1']
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VENV = os.path.join(REPO, '.keystone-venv')
STATE = os.path.join(VENV, 'state')
PORT = int(os.environ.get('KEYSTONE_PORT', '35357'))
URL = 'http://127.0.0.1:%d' % PORT
PERSONAS_FILE = os.path.join(STATE, 'personas.json')
ADMIN_PASSWORD = 'pw-admin'

# name -> (scope, role). Scope is a project name or 'system'. Role
# implications are Keystone's own (admin -> manager -> member -> reader).
PERSONAS = {
    'project-admin': ('demo', 'admin'),
    'project-member': ('demo', 'member'),
    'project-reader': ('demo', 'reader'),
    'other-member': ('alt', 'member'),
    'system-admin': ('system', 'admin'),
    'system-reader': ('system', 'reader'),
    # nova's user for placement: the service role in the service project
    # (deployment guides often add admin too, which passes every rule; the
    # service role alone is what placement's policies name).
    'nova': ('service', 'service'),
    # keystonemiddleware's own user in placement.conf, as the install
    # guide makes it: admin in the service project.
    'placement': ('service', 'admin'),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def venv_bin(name):
    return os.path.join(VENV, 'bin', name)


def ensure_venv():
    stamp = os.path.join(VENV, '.ready-keystone-%s' % KEYSTONE_VERSION)
    if os.path.exists(stamp):
        return
    log('installing keystone==%s and the clients into %s'
        % (KEYSTONE_VERSION, VENV))
    if os.path.exists(VENV):
        shutil.rmtree(VENV)
    subprocess.run([sys.executable, '-m', 'venv', VENV], check=True)
    pip('install', '--upgrade', 'pip')
    pip('install', 'keystone==%s' % KEYSTONE_VERSION, 'gunicorn', *CLIENTS)
    open(stamp, 'w').close()


def pip(*args):
    """pip, quiet but for errors (and without the index warnings some
    machines' pip configuration prints for every package)."""
    out = subprocess.run([venv_bin('pip'), '-q'] + list(args),
                         capture_output=True, text=True)
    for line in out.stderr.splitlines():
        if not line.startswith('WARNING: Location'):
            log(line)
    if out.returncode:
        sys.exit('pip %s failed (exit %s)' % (args[0], out.returncode))


def write_conf():
    conf = """\
[DEFAULT]
log_file = {state}/keystone.log
[database]
connection = sqlite:///{state}/keystone.db
[token]
provider = fernet
[identity]
# Test users only: bcrypt's default cost makes each login take ~0.3 s.
password_hash_rounds = 4
[fernet_tokens]
key_repository = {state}/fernet-keys
[fernet_receipts]
key_repository = {state}/fernet-keys
[credential]
key_repository = {state}/credential-keys
"""
    with open(os.path.join(STATE, 'keystone.conf'), 'w') as f:
        f.write(conf.format(state=STATE))


def manage(*args):
    out = subprocess.run([venv_bin('keystone-manage'), '--config-file',
                          os.path.join(STATE, 'keystone.conf')] + list(args),
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit('keystone-manage %s failed (exit %s):\n%s'
                 % (args[0], out.returncode, out.stderr[-3000:]))


def ensure_state():
    stamp = os.path.join(STATE, '.bootstrapped')
    if os.path.exists(stamp):
        return
    log('building keystone state in %s' % STATE)
    shutil.rmtree(STATE, ignore_errors=True)
    os.makedirs(STATE)
    write_conf()
    manage('db_sync')
    user = ['--keystone-user', 'root', '--keystone-group', 'root'] \
        if os.geteuid() == 0 else \
        ['--keystone-user', str(os.geteuid()),
         '--keystone-group', str(os.getegid())]
    manage('fernet_setup', *user)
    manage('credential_setup', *user)
    manage('bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
           '--bootstrap-admin-url', URL + '/v3',
           '--bootstrap-public-url', URL + '/v3',
           '--bootstrap-internal-url', URL + '/v3',
           '--bootstrap-region-id', 'RegionOne')
    open(stamp, 'w').close()


def pid():
    try:
        with open(os.path.join(STATE, 'keystone.pid')) as f:
            value = int(f.read().strip())
        os.kill(value, 0)
        return value
    except (OSError, ValueError):
        return None


def answers():
    try:
        with urllib.request.urlopen(URL + '/v3', timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def serve():
    env = dict(os.environ, OS_KEYSTONE_CONFIG_DIR=STATE)
    logf = open(os.path.join(STATE, 'gunicorn.log'), 'ab')
    proc = subprocess.Popen(
        [venv_bin('gunicorn'), '-w', '2', '-b', '127.0.0.1:%d' % PORT,
         '--pythonpath', os.path.dirname(os.path.abspath(__file__)),
         '--timeout', '120', '--no-control-socket', 'wsgi:application'],
        env=env, stdout=logf, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)
    with open(os.path.join(STATE, 'keystone.pid'), 'w') as f:
        f.write(str(proc.pid))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit('keystone exited with %s; see %s/gunicorn.log'
                     % (proc.returncode, STATE))
        if answers():
            return
        time.sleep(0.3)
    sys.exit('keystone did not answer on %s within 120s' % URL)


class Api:
    """Just enough of the identity v3 API to create the personas."""

    def __init__(self):
        self.token = None
        body = {'auth': {
            'identity': {'methods': ['password'], 'password': {'user': {
                'name': 'admin', 'domain': {'id': 'default'},
                'password': ADMIN_PASSWORD}}},
            'scope': {'system': {'all': True}}}}
        _status, headers, _ = self.call('POST', '/v3/auth/tokens', body)
        self.token = headers['X-Subject-Token']

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(URL + path, data=data, method=method)
        req.add_header('Content-Type', 'application/json')
        if self.token:
            req.add_header('X-Auth-Token', self.token)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
                return r.status, r.headers, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            if e.code == 409:
                return e.code, e.headers, None
            raise RuntimeError('%s %s: %s %s' % (method, path, e.code, raw))

    def find(self, collection, name, create_body):
        _, _, found = self.call('GET', '/v3/%s?name=%s' % (collection, name))
        if found[collection]:
            return found[collection][0]['id']
        key = collection[:-1]
        _, _, made = self.call('POST', '/v3/%s' % collection,
                               {key: create_body})
        return made[key]['id']


def ensure_personas():
    if os.path.exists(PERSONAS_FILE):
        return
    api = Api()
    projects = {name: api.find('projects', name,
                               {'name': name, 'domain_id': 'default'})
                for name in ('demo', 'alt', 'service')}
    roles = {name: api.find('roles', name, {'name': name})
             for name in ('admin', 'member', 'reader', 'service')}
    out = {'auth_url': URL + '/v3', 'projects': projects, 'users': {}}
    for name, (scope, role) in PERSONAS.items():
        password = 'pw-' + name
        user_id = api.find('users', name, {
            'name': name, 'domain_id': 'default', 'password': password})
        if scope == 'system':
            api.call('PUT', '/v3/system/users/%s/roles/%s'
                     % (user_id, roles[role]))
        else:
            api.call('PUT', '/v3/projects/%s/users/%s/roles/%s'
                     % (projects[scope], user_id, roles[role]))
        out['users'][name] = {
            'id': user_id, 'password': password, 'role': role,
            'project': None if scope == 'system' else scope,
            'project_id': projects.get(scope), 'system': scope == 'system'}
    tmp = PERSONAS_FILE + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(out, f, indent=2, sort_keys=True)
    os.rename(tmp, PERSONAS_FILE)


def start():
    ensure_venv()
    ensure_state()
    if not (pid() and answers()):
        stop(quiet=True)
        serve()
    ensure_personas()
    print('KEYSTONE_URL=%s/v3' % URL)
    print('PERSONAS=%s' % PERSONAS_FILE)


def stop(quiet=False):
    value = pid()
    if value is None:
        if not quiet:
            log('keystone is not running')
        return
    try:
        os.killpg(value, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.killpg(value, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(value, signal.SIGKILL)
    # Until the port is closed, a quick restart could not bind it.
    while answers():
        time.sleep(0.1)


def endpoint(url):
    """The one placement endpoint (each interface) in the catalog."""
    api = Api()
    service = api.find('services', 'placement',
                       {'name': 'placement', 'type': 'placement'})
    _, _, found = api.call('GET', '/v3/endpoints?service_id=%s' % service)
    for ep in found['endpoints']:
        api.call('DELETE', '/v3/endpoints/%s' % ep['id'])
    for interface in ('public', 'internal', 'admin'):
        api.call('POST', '/v3/endpoints', {'endpoint': {
            'service_id': service, 'interface': interface, 'url': url,
            'region_id': 'RegionOne'}})


_EXPIRED_TOKEN = r"""
import datetime, sys
from keystone.common import utils
from keystone.token import provider
import keystone.conf
from keystone.token import token_formatters as tf
CONF = keystone.conf.CONF
keystone.conf.configure()
CONF([], project='keystone', default_config_files=[sys.argv[1]])
when = datetime.datetime.utcnow() - datetime.timedelta(hours=1)
token = tf.TokenFormatter().create_token(
    sys.argv[2], utils.isotime(when, subsecond=True),
    [provider.random_urlsafe_str()], tf.ProjectScopedPayload,
    methods=['password'], project_id=sys.argv[3])
print(token)
"""


def expired_token(user_id, project_id):
    out = subprocess.run(
        [venv_bin('python'), '-c', _EXPIRED_TOKEN,
         os.path.join(STATE, 'keystone.conf'), user_id, project_id],
        capture_output=True, text=True)
    if out.returncode:
        sys.exit('could not make the token:\n' + out.stderr[-3000:])
    print(out.stdout.strip())


def main(argv):
    if not argv:
        sys.exit(__doc__)
    cmd, args = argv[0], argv[1:]
    if cmd == 'start':
        start()
    elif cmd == 'stop':
        stop()
    elif cmd == 'status':
        sys.exit(0 if (pid() and answers()) else 1)
    elif cmd == 'reset':
        stop(quiet=True)
        shutil.rmtree(STATE, ignore_errors=True)
    elif cmd == 'endpoint' and len(args) == 1:
        endpoint(args[0])
    elif cmd == 'expired-token' and len(args) == 2:
        expired_token(*args)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])
