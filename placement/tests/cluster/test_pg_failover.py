"""A failover to a standby that lagged (tools/pg-replica), under gunicorn.

The service reaches the database through libpq's list of hosts
(``host=primary&host=standby&target_session_attrs=read-write``), as
deployments fail over without a proxy: when the primary dies, its
workers reconnect to whichever host takes writes. The standby stops
receiving before the last write, so once promoted it lacks it; new writes
then count the same counters up to the values the workers saw. Every
worker must answer as the promoted database stands (the counters' marks,
placement/objects/changes.py), not from the world it kept.
"""
import glob
import os
import subprocess
import time

import pytest
import requests
import sqlalchemy as sa

from placement.tests.cluster import conftest
from placement.tests import db as test_db
from placement.tests.functional import live_server

BASE = os.environ.get('PG_REPLICA_DIR', '/tmp/replica')
PRIMARY_PORT = int(os.environ.get('PG_PRIMARY_PORT', 5433))
STANDBY_PORT = int(os.environ.get('PG_STANDBY_PORT', 5434))
PORT = 8783
SLOTS = 64
FITS_8 = '/allocation_candidates?resources=VCPU:8'


@pytest.fixture(scope='module')
def cluster():
    with conftest.script_cluster('pg-replica') as urls:
        yield urls


def _as_postgres(port, sql):
    """``sql`` as the superuser on the server at ``port``."""
    as_pg = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
    out = subprocess.run(
        as_pg + ['psql', '-X', '-q', '-At', '-h', os.path.join(BASE, 'sock'),
                 '-p', str(port), '-U', 'postgres', '-d', 'postgres', '-c',
                 sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _stop_primary():
    """The primary gone at once, as a crash of its host."""
    pg_ctl = sorted(glob.glob('/usr/lib/postgresql/*/bin/pg_ctl'))[-1]
    as_pg = ['runuser', '-u', 'postgres', '--'] if os.geteuid() == 0 else []
    subprocess.run(as_pg + [pg_ctl, '-D', os.path.join(BASE, 'primary'),
                            '-m', 'immediate', 'stop'],
                   check=True, capture_output=True)


def _both_hosts(url):
    """``url`` naming the primary then the standby, writes wanted."""
    url = sa.engine.make_url(url)
    return url.set(host=None, port=None, query={
        'host': ['127.0.0.1:%d' % PRIMARY_PORT,
                 '127.0.0.1:%d' % STANDBY_PORT],
        'target_session_attrs': 'read-write'}).render_as_string(
            hide_password=False)


def _wait(what, check, seconds=60, log=lambda: ''):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError('timed out waiting for %s\n%s' % (what, log()))


class Client:
    def __init__(self, url):
        self.url = url
        self.headers = live_server.LiveServer.headers()

    def call(self, method, path, body=None, expect=200):
        resp = requests.request(method, self.url + path, json=body,
                                headers=self.headers, timeout=30)
        assert resp.status_code == expect, (method, path, resp.text)
        return resp.json() if resp.content else None

    def total(self, rp, vcpu):
        gen = self.call('GET', '/resource_providers/%s' % rp)['generation']
        self.call('PUT', '/resource_providers/%s/inventories/VCPU' % rp,
                  {'resource_provider_generation': gen, 'total': vcpu})

    def fitting(self):
        """The providers offered for 8 VCPU (asked of every worker)."""
        return {tuple(sorted(self.call('GET', FITS_8)['provider_summaries']))
                for _ in range(6)}


def test_failover_to_a_lagging_standby(cluster):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(test_db.ENV_VAR, cluster['PRIMARY_URL'])
        db = test_db.TestDatabase(migrate=True)
    server = live_server.LiveServer(
        workers=2, port=PORT, db_url=_both_hosts(db.url),
        conf={'placement_database': {'max_retries': 5,
                                     'retry_interval': 1}})
    try:
        with server:
            client = Client(server.url)
            # A and B share a slot of the change counters.
            uuids = []
            for i in range(SLOTS + 1):
                rp = client.call('POST', '/resource_providers',
                                 {'name': 'cn%d' % i})['uuid']
                client.call('PUT', '/resource_providers/%s/inventories' % rp,
                            {'resource_provider_generation': 0,
                             'inventories': {'VCPU': {'total': 8}}})
                uuids.append(rp)
            a, b = uuids[0], uuids[SLOTS]
            assert client.fitting() == {tuple(sorted(uuids))}
            lsn = _as_postgres(PRIMARY_PORT, 'SELECT pg_current_wal_lsn()')
            _wait('the standby to replay it all', lambda: _as_postgres(
                STANDBY_PORT, "SELECT pg_last_wal_replay_lsn() >= '%s'"
                % lsn) == 't')
            # The standby stops receiving: it lags from here on.
            _as_postgres(STANDBY_PORT, "ALTER SYSTEM SET primary_conninfo "
                                       "= ''")
            _as_postgres(STANDBY_PORT, 'SELECT pg_reload_conf()')
            _wait('the standby to stop receiving', lambda: _as_postgres(
                STANDBY_PORT, 'SELECT count(*) FROM pg_stat_wal_receiver')
                == '0')
            client.total(a, 1)
            assert client.fitting() == {tuple(sorted(set(uuids) - {a}))}
            _stop_primary()
            _as_postgres(STANDBY_PORT, 'SELECT pg_promote()')
            # A's write is lost with the primary; B's (the same slot,
            # the same count) lands on the promoted standby.
            last = []

            def answers():
                last[:] = [requests.get(
                    server.url + '/resource_providers/%s' % b,
                    headers=client.headers, timeout=30)]
                return last[0].status_code == 200
            _wait('the service on the promoted standby', answers,
                  log=lambda: '%s %s\n%s' % (
                      last[0].status_code, last[0].text,
                      server.log_text()[-2000:]))
            client.total(b, 1)
            assert client.fitting() == {tuple(sorted(set(uuids) - {b}))}
    finally:
        server.db = None
        db.engine.dispose()
