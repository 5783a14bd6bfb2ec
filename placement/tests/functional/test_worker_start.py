"""What a WSGI worker imports to start. Neither alembic (the migrations:
only a worker that syncs the schema at start needs it) nor
keystonemiddleware (only the Keystone auth strategy does): each adds
about 0.3 s of CPU to every worker's start, and a node of four workers on
two CPUs answers its first request once they are through."""
import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from placement.db import migration

_BOOT = '''
import json, sys
import webob
from placement.wsgi import api
app = api.init_application()
resp = webob.Request.blank('/').get_response(app)
print(json.dumps([resp.status_int] + sorted(
    name for name in ('alembic', 'keystonemiddleware') if name in sys.modules)))
'''


def _boot(tmp_path, conf):
    (tmp_path / 'placement.conf').write_text(conf)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('OS_', 'PLACEMENT_'))}
    env['OS_PLACEMENT_CONFIG_DIR'] = str(tmp_path)
    result = subprocess.run([sys.executable, '-c', _BOOT], env=env,
                            cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def database(tmp_path):
    """A database with the schema, as a server's is before the workers
    start (an SQLite file named in the configuration stands for it)."""
    url = 'sqlite:///%s' % (tmp_path / 'placement.sqlite')
    engine = sa.create_engine(url)
    migration.upgrade('head', engine=engine)
    engine.dispose()
    return url


@pytest.mark.parametrize('sync, auth, imported', [
    ('False', 'noauth2', []),
    ('True', 'noauth2', ['alembic']),
    ('False', 'keystone', ['keystonemiddleware']),
])
def test_a_worker_imports_what_its_configuration_uses(
        tmp_path, database, sync, auth, imported):
    conf = ('[placement_database]\nconnection = %s\nsync_on_startup = %s\n'
            '[api]\nauth_strategy = %s\n' % (database, sync, auth))
    assert _boot(tmp_path, conf) == [200] + imported
