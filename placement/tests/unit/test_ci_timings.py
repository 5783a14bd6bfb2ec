"""tools/ci-timings, the table .ci/run ends with: every part with its time
and outcome, the slowest tests of all the parts' JUnit files, and a
WARNING line only past the budget."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'tools',
                      'ci-timings')

JUNIT = '''<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="placement.tests.functional.test_a" name="test_slow"
          time="301.5"/>
<testcase classname="placement.tests.functional.test_a" name="test_quick"
          time="0.2"/>
%s
</testsuite></testsuites>
'''


def _run(tmp_path, *args):
    return subprocess.run([sys.executable, SCRIPT, str(tmp_path)] +
                          list(args), capture_output=True, text=True,
                          check=True).stdout


def _write(tmp_path):
    (tmp_path / 'parts.tsv').write_text(
        'SQLite\t600\t0\nPostgreSQL\t450\t1\nclusters\t225\t0\n')
    (tmp_path / 'SQLite.xml').write_text(JUNIT % '')
    (tmp_path / 'PostgreSQL.xml').write_text(JUNIT % (
        '<testcase classname="placement.tests.unit.test_b" name="test_c" '
        'time="12.0"/>'))


def test_parts_the_whole_run_and_the_slowest_tests(tmp_path):
    _write(tmp_path)
    out = _run(tmp_path, '--total', '1300', '--slowest', '3')
    lines = out.splitlines()
    assert lines[1].split() == ['SQLite', '10:00', 'ok']
    assert lines[2].split() == ['PostgreSQL', '7:30', 'exit', '1']
    assert lines[4].split() == ['whole', 'run', '21:40']
    slowest = lines[lines.index(
        'the 3 slowest tests (setup and teardown included):') + 1:]
    assert [line.split()[:2] for line in slowest] == [
        ['301.5s', 'SQLite'], ['301.5s', 'PostgreSQL'],
        ['12.0s', 'PostgreSQL']]
    assert 'WARNING' not in out


def test_a_run_past_the_budget_is_warned_of(tmp_path):
    _write(tmp_path)
    out = _run(tmp_path, '--total', str(41 * 60))
    assert out.splitlines()[-1].startswith(
        'WARNING: the run took 41:00, over its budget of 40 minutes')
    # Without --total, the parts' sum (21:15) is under the budget.
    assert 'WARNING' not in _run(tmp_path)
