"""/metrics from gunicorn with two workers in prometheus_client's
multiprocess mode: request counters add up over both workers, and the
placement gauges equal what the API reports. Also: the [metrics] options
(environment, sample) and the database error counter."""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

from oslo_db import exception as db_exc
import prometheus_client
from prometheus_client import parser
import requests
import webob

from placement import conf as placement_conf
from placement import fault_wrap
from placement import request_metrics
from placement.tests.functional import live_server

ROUTE = '/resource_providers/{uuid}'
GETS = 40


def _families(text):
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def _sample(families, family, name, **labels):
    for sample in families[family].samples:
        if sample.name == name and all(
                sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


def _world(server, session):
    """Three providers with inventory; allocations on two of them."""
    h = server.headers()
    rps = []
    for i in range(3):
        rp = str(uuid.uuid4())
        r = session.post(server.url + '/resource_providers', headers=h,
                         json={'name': 'cn%d' % i, 'uuid': rp})
        assert r.status_code == 200, r.text
        r = session.put(
            server.url + '/resource_providers/%s/inventories' % rp,
            headers=h, json={
                'resource_provider_generation': 0,
                'inventories': {
                    'VCPU': {'total': 8 + i, 'reserved': i,
                             'allocation_ratio': 2.0},
                    'MEMORY_MB': {'total': 4096, 'allocation_ratio': 1.5}}})
        assert r.status_code == 200, r.text
        rps.append(rp)
    for i, rp in enumerate(rps[:2]):
        r = session.put(
            server.url + '/allocations/%s' % uuid.uuid4(), headers=h,
            json={'allocations': {rp: {'resources': {'VCPU': 1 + i,
                                                     'MEMORY_MB': 256}}},
                  'project_id': 'p', 'user_id': 'u',
                  'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        assert r.status_code == 204, r.text
    return rps


def _pids(mpdir):
    return {name.rsplit('_', 1)[1] for name in os.listdir(mpdir)
            if name.startswith('counter_')}


def test_counters_add_up_across_workers_and_gauges_match_api():
    mpdir = tempfile.mkdtemp(prefix='placement-prom-')
    try:
        with live_server.LiveServer(
                workers=2, conf={'metrics': {'enabled': True}},
                env={'PROMETHEUS_MULTIPROC_DIR': mpdir}) as server:
            session = requests.Session()
            rps = _world(server, session)
            gets = 0
            while gets < GETS or (len(_pids(mpdir)) < 2 and gets < 1000):
                # A new connection each time, so both workers answer
                # (on a busy machine one may take many in a row).
                r = requests.get(
                    server.url + '/resource_providers/' + rps[gets % 3],
                    headers=server.headers())
                assert r.status_code == 200
                gets += 1
            # Both workers wrote their own counters.
            assert len(_pids(mpdir)) == 2, os.listdir(mpdir)
            for _ in range(4):
                text = requests.get(server.url + '/metrics',
                                    headers=server.headers()).text
                fams = _families(text)
                assert _sample(
                    fams, 'placement_http_requests',
                    'placement_http_requests_total', route=ROUTE,
                    method='GET', status='200') == gets
                assert _sample(
                    fams, 'placement_http_request_duration_seconds',
                    'placement_http_request_duration_seconds_count',
                    route=ROUTE, method='GET') == gets
                assert _sample(
                    fams, 'placement_http_requests',
                    'placement_http_requests_total',
                    route='/resource_providers', method='POST',
                    status='200') == 3
                assert _sample(fams, 'openstack_placement_up',
                               'openstack_placement_up') == 1
            assert rps[0] not in text
            _check_gauges(server, session, fams)
            _check_gzip(server, fams)
            _check_capacity_and_audit(server, session)
    finally:
        shutil.rmtree(mpdir, ignore_errors=True)


def _gauges(fams):
    return {name: fam.samples for name, fam in fams.items()
            if name.startswith('openstack_placement_resource_')}


def _check_gzip(server, fams):
    """A scraper that accepts gzip (Prometheus does) gets the same
    metrics gzipped; one that does not gets plain text."""
    h = dict(server.headers(), **{'Accept-Encoding': 'gzip'})
    r = requests.get(server.url + '/metrics', headers=h, stream=True)
    assert r.headers['Content-Encoding'] == 'gzip'
    assert 'Accept-Encoding' in r.headers['Vary']
    text = gzip.decompress(r.raw.read(decode_content=False)).decode()
    assert _gauges(_families(text)) == _gauges(fams)
    assert len(_gauges(fams)) == 4
    h['Accept-Encoding'] = 'identity'
    r = requests.get(server.url + '/metrics', headers=h, stream=True)
    assert 'Content-Encoding' not in r.headers
    text = r.raw.read(decode_content=False).decode()
    assert _gauges(_families(text)) == _gauges(fams)


def _check_capacity_and_audit(server, session):
    """The other operator extensions against the same live server."""
    r = session.get(server.url + '/ops/capacity?resources=VCPU:1',
                    headers=server.headers())
    assert r.status_code == 200, r.text
    # (8 - 0) * 2 - 1, (9 - 1) * 2 - 2, (10 - 2) * 2 - 0
    assert sorted(t['fits'] for t in r.json()['trees']) == [14, 15, 16]
    assert r.json()['total'] == 45
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['OS_PLACEMENT_CONFIG_DIR'] = server.config_dir
    audit = subprocess.run(
        [sys.executable, '-m', 'placement.cmd.manage', 'audit', '--json'],
        env=env, capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads(audit.stdout) == {'findings': [], 'fixed': []}


def _check_gauges(server, session, fams):
    h = server.headers()
    providers = session.get(server.url + '/resource_providers',
                            headers=h).json()['resource_providers']
    expected = {}
    for prov in providers:
        base = server.url + '/resource_providers/' + prov['uuid']
        inv = session.get(base + '/inventories', headers=h).json()
        use = session.get(base + '/usages', headers=h).json()['usages']
        for rc, item in inv['inventories'].items():
            key = (prov['name'], rc)
            expected[('resource_total',) + key] = item['total']
            expected[('resource_reserved',) + key] = item['reserved']
            expected[('resource_allocation_ratio',) + key] = (
                item['allocation_ratio'])
            expected[('resource_usage',) + key] = use[rc]
    got = {}
    for suffix in ('resource_total', 'resource_reserved',
                   'resource_allocation_ratio', 'resource_usage'):
        for s in fams['openstack_placement_' + suffix].samples:
            got[(suffix, s.labels['hostname'], s.labels['resourcetype'])] = (
                s.value)
    assert got == expected
    assert len(expected) == 3 * 2 * 4


def test_metrics_enabled_from_the_environment(monkeypatch):
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    assert conf.metrics.enabled is False
    monkeypatch.setenv('OS_METRICS__ENABLED', 'true')
    conf = placement_conf.build_conf(args=[], default_config_files=[])
    assert conf.metrics.enabled is True


def test_metrics_group_is_in_the_config_sample(tmp_path):
    out = tmp_path / 'placement.conf.sample'
    generator = os.path.join(os.path.dirname(sys.executable),
                             'oslo-config-generator')
    result = subprocess.run(
        [generator, '--config-file',
         os.path.join(live_server.REPO_ROOT, 'etc', 'placement',
                      'config-generator.conf'),
         '--output-file', str(out)], capture_output=True, text=True,
        cwd=live_server.REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert '[metrics]' in text
    assert '#enabled = false' in text


def test_a_lost_database_is_counted():
    def lost(environ, start_response):
        raise db_exc.DBConnectionError('connection refused')

    app = request_metrics.RequestMetrics(fault_wrap.FaultWrapper(lost),
                                         lambda environ: 'unmatched')
    before = request_metrics.DB_ERRORS.labels('unavailable')._value.get()
    resp = webob.Request.blank('/resource_providers').get_response(app)
    assert resp.status_int == 503
    after = request_metrics.DB_ERRORS.labels('unavailable')._value.get()
    assert after == before + 1
    assert request_metrics.REQUESTS.labels(
        'unmatched', 'GET', '503')._value.get() >= 1


def test_gauges_render_as_the_library_renders_them():
    """The fast renderer writes exactly prometheus_client's bytes."""
    import decimal

    from prometheus_client import exposition
    from prometheus_client import metrics_core

    from placement.handlers import metrics as metrics_handler

    rows = [
        ('cn1', 'VCPU', 16, 2, 4.0, decimal.Decimal(3)),
        ('odd "name" \\ with\nnewline', 'MEMORY_MB', 2048, 0, 1.5, 0),
        ('ünïcode-höst', 'CUSTOM_X', 2 ** 31 - 1, 0, 1e-05, 12345678901),
        (None, 'DISK_GB', 0, 0, 16.0, 7),
    ]

    class Reference:
        def collect(self):
            for name, text, index in metrics_handler.GAUGES:
                family = metrics_core.GaugeMetricFamily(
                    name, text, labels=['hostname', 'resourcetype'])
                for row in rows:
                    family.add_metric((row[0] or '', row[1]), row[index])
                yield family

    registry = prometheus_client.CollectorRegistry()
    registry.register(Reference())
    assert metrics_handler.render_gauges(rows) == (
        exposition.generate_latest(registry))


def test_triggers_not_firing_are_said(caplog):
    """Triggers disabled (PostgreSQL) or dropped: /metrics says the
    database does not count its changes, the WARNING says where and what
    mends it."""
    import logging

    from placement.db import change_triggers
    from placement.objects import changes
    from placement.tests.functional import candidate_worlds as cw
    from placement.tests.functional.fixtures import gabbits

    def scrape(app):
        resp = webob.Request.blank('/metrics', headers={
            'x-auth-token': 'admin', 'accept': 'text/plain'}).get_response(
                app)
        assert resp.status_int == 200
        return _families(resp.text)

    name = 'placement_chg_inventories_update'
    with gabbits.app_and_engine_over_world(
            cw.WorldBuilder(), {('metrics', 'enabled'): True}) as (app,
                                                                   engine):
        pg = engine.dialect.name == 'postgresql'
        changes.forget_counted()
        assert _sample(scrape(app), 'placement_candidates_world_counted',
                       'placement_candidates_world_counted') == 1
        with engine.begin() as conn:
            if pg:
                conn.exec_driver_sql(
                    'ALTER TABLE inventories DISABLE TRIGGER USER')
            else:
                change_triggers.drop_one(conn, name)
        changes.forget_counted()
        try:
            with caplog.at_level(logging.WARNING):
                fams = scrape(app)
        finally:
            with engine.begin() as conn:
                if pg:
                    conn.exec_driver_sql(
                        'ALTER TABLE inventories ENABLE TRIGGER USER')
                else:
                    change_triggers.install_one(conn, name)
            changes.forget_counted()
    assert _sample(fams, 'placement_candidates_world_counted',
                   'placement_candidates_world_counted') == 0
    said = [r.getMessage() for r in caplog.records
            if 'does not count its changes' in r.getMessage()]
    assert len(said) == 1
    disabled = len([n for n, table, _ in change_triggers.made('postgresql')
                    if table == 'inventories'])
    assert ('triggers not firing on inventories (%s)' % (
        '%d disabled' % disabled if pg else '1 missing')) in said[0]
    assert 'placement-manage db sync' in said[0]
