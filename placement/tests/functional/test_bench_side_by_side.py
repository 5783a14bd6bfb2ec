"""tools/bench-candidates-side-by-side in its smoke mode, so that it
cannot rot between the runs that give issue 18's figures: every scenario
on tiny worlds built through the API (SQLite, ours only), its table
complete, the answers the right size, the race without a violation."""
import os
import re
import subprocess
import sys

import pytest

from placement.tests.functional import live_server

pytestmark = pytest.mark.once('the tool runs on SQLite whatever the run')

SCRIPT = os.path.join(live_server.REPO_ROOT, 'tools',
                      'bench-candidates-side-by-side')
# case -> candidates ours must answer (--quick: 20 then 40 flat
# providers, 5 nested trees of 2 candidates each, the wide tree at 4
# groups: 8*7*6*5 placements).
EXPECTED = {
    '1 flat 20: full': 20, '1 flat 20: limit=5': 5,
    '2 flat 20: limit=5': 5, '2 flat 20: limit=1000': 20,
    '2 flat 40: limit=5': 5, '2 flat 40: limit=1000': 40,
    '3 nested 5: full': 10, '3 nested 5: limit=5': 5,
    '3 wide G=4: complete': 1680, '3 wide G=4: limit=1': 1,
    '4 PUT /allocations, 2 workers': None,
}


def test_quick_run_prints_every_figure():
    env = {k: v for k, v in os.environ.items()
           if k not in ('PLACEMENT_TEST_DB_URL', 'PYTHONPATH')}
    proc = subprocess.run(
        [sys.executable, SCRIPT, '--quick', '--skip-upstream',
         '--db', 'sqlite'], capture_output=True, text=True, timeout=300,
        env=env, cwd=live_server.REPO_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        if re.match(r'\d ', line) and '|' in line:
            case = line[:34].strip()
            cells = [c.split() for c in line[34:].split('|')]
            rows[case] = cells
    assert set(rows) == set(EXPECTED), proc.stdout
    for case, cands in EXPECTED.items():
        reqs, median, app, db, answer, rps = rows[case]
        assert reqs[0] == '3/-' or reqs[0] == '10/-', (case, reqs)
        assert float(median[0]) > 0 and float(app[0]) > 0, (case, rows)
        assert median[1] == '-', 'upstream was skipped'
        assert answer[0] == ('-' if cands is None else str(cands)), (
            case, answer)
    assert float(rows['1 flat 20: full'][5][0]) > 0   # 10 clients' req/s

    race = re.search(r'^ours +8 +2 \| +80 +[\d.]+ \| +(\d+) +(\d+) \| +(\d+)'
                     r' +(\d+) \| ([\d.]+) / ([\d.]+) / ([\d.]+)$',
                     proc.stdout, re.M)
    assert race, proc.stdout
    acked, refused, other, over = map(int, race.groups()[:4])
    assert acked + refused == 80 and other == 0 and over == 0
    app, _db, client = map(float, race.groups()[4:])
    assert app > 0 and client > 0   # CPU per write (no backends on SQLite)

    # Every flat provider was built and can be sampled.
    spread = re.findall(r'^ +(20|40) +40 \| +(\d+) ', proc.stdout, re.M)
    assert len(spread) == 2, proc.stdout
    for size, distinct in spread:
        assert int(distinct) >= int(size) - 2, spread
