"""placement-manage explain, run as an operator runs it: a separate
process reading placement.conf, over a database of the backend under test
(``PLACEMENT_TEST_DB_URL``, else SQLite) holding a small world."""
import json
import os
import subprocess
import sys

import pytest

from placement.tests import db as test_db
from placement.tests.functional import candidate_worlds as cw

QUERY = 'resources=VCPU:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2'
AGG = 'aaaaaaaa-0000-0000-0000-000000000001'


@pytest.fixture(scope='module')
def conf_dir(tmp_path_factory):
    db = test_db.TestDatabase()
    w = cw.WorldBuilder()
    for i in range(4):
        name = 'cn%d' % i
        w.provider(name)
        w.inventory(name, 'VCPU', 8)
        w.inventory(name, 'MEMORY_MB', 8192, reserved=512)
    w.usage('cn1', 'MEMORY_MB', 7296)
    for name in ('cn1', 'cn2', 'cn3'):
        w.trait(name, 'HW_CPU_X86_AVX2')
    w.aggregate('cn3', AGG)
    w.write(db.engine)
    path = tmp_path_factory.mktemp('etc')
    (path / 'placement.conf').write_text(
        '[placement_database]\nconnection = %s\n' % db.url)
    yield path
    db.drop()


def explain(conf_dir, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['OS_PLACEMENT_CONFIG_DIR'] = str(conf_dir)
    return subprocess.run(
        [sys.executable, '-m', 'placement.cmd.manage', 'explain'] +
        list(args), env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=120)


def test_table_names_the_numbers(conf_dir):
    res = explain(conf_dir, QUERY, '--provider', 'cn1', '--provider',
                  'cn0', '--sample', '0')
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert 'Candidates: 2; providers kept: 2 of 4' in out
    assert '| unnumbered group | class present' in out
    assert ('MEMORY_MB 512 requested, 384 left of 8192 (reserved 512, '
            'ratio 1.0, used 7296)') in out
    assert 'lacks required trait HW_CPU_X86_AVX2' in out
    assert '2 more providers not shown' in out


def test_json_is_the_apis_body(conf_dir):
    res = explain(conf_dir, '/allocation_candidates?' + QUERY +
                  '&member_of=!' + AGG, '--json', '--microversion', '1.32',
                  '--provider', 'cn3', '--sample', '0')
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout)
    assert body['microversion'] == '1.32'
    assert body['candidates'] == 1
    assert body['reasons'] == {'capacity': 1, 'required': 1,
                               'forbidden_aggs': 1}
    assert body['explained'][0]['reason'] == (
        'cn3: in forbidden aggregate %s' % AGG)


def test_empty_answer_suggests(conf_dir):
    res = explain(conf_dir, QUERY.replace('512', '8000'))
    assert res.returncode == 0, res.stderr
    assert 'Candidates: 0' in res.stdout
    assert 'Nothing fits' in res.stdout
    assert ('at most MEMORY_MB:7680 would fit (8000 asked), on cn2'
            in res.stdout)


def test_bad_query_is_the_apis_error(conf_dir):
    res = explain(conf_dir, 'resources=VCPU:0')
    assert res.returncode == 1
    assert res.stderr.strip() == (
        'ERROR: Requested resource VCPU requires amount >= 1. Got: 0.')
    res = explain(conf_dir, 'resources=VCPU:1&limit=1', '--microversion',
                  '1.15')
    assert res.returncode == 1
    assert 'Invalid query string parameters' in res.stderr


@pytest.mark.parametrize('version', ['1.9', '2.0', 'soon'])
def test_bad_microversion(conf_dir, version):
    res = explain(conf_dir, QUERY, '--microversion', version)
    assert res.returncode == 1
    assert res.stderr.startswith('ERROR: ')
