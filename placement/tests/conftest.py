# gabbi's pytest plugin starts and stops each YAML file's fixtures around
# its tests; it must be registered before collection.
pytest_plugins = ['gabbi.pytester']

# The tests behind a live Keystone (placement/tests/keystone) need
# Keystone installed and running: minutes of set-up, and nothing in them
# depends on the database, so the per-database runs leave them out.
# tools/run-keystone-tests runs them.
import os  # noqa: E402

collect_ignore = []
if not os.environ.get('PLACEMENT_KEYSTONE_TESTS'):
    collect_ignore.append('keystone')

# The tests on database clusters (placement/tests/cluster) bring up their
# own Galera cluster or PostgreSQL replica: tools/run-cluster-tests runs
# them, not the per-database runs.
if not os.environ.get('PLACEMENT_CLUSTER_TESTS'):
    collect_ignore.append('cluster')

# Large worlds are shared by a node's processes through a file
# (candidates/snapshot.py): the tests' servers, in process or not, write
# theirs into a directory of the run's, gone when it ends.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

if not os.environ.get('OS_CANDIDATES__WORLD_DIR'):
    _WORLD_DIR = tempfile.mkdtemp(prefix='placement-test-worlds-')
    os.environ['OS_CANDIDATES__WORLD_DIR'] = _WORLD_DIR
    atexit.register(shutil.rmtree, _WORLD_DIR, True)


@pytest.fixture(autouse=True)
def world_files_written_in_process(monkeypatch):
    """In the tests' own process a worker's node file is written in a
    thread of it, where a test's patches of the reads apply, whatever the
    world's size (test_world_shared.py has it written by a process of
    its own)."""
    from placement.objects.candidates.world import settings
    monkeypatch.setattr(settings, 'WRITE_IN_A_PROCESS_FROM', None)


# Some tests run once, in the SQLite run, not again on PostgreSQL and
# MariaDB: those that reach no database (every test under unit/, held to
# it by unit/conftest.py) and those whose module says
# ``pytestmark = pytest.mark.once('why')`` (the browser tests, whose
# endpoints have gabbi tests on every database; tools run on SQLite
# whatever the run's database). The server runs deselect them.
def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'once(why): run in the SQLite run only (the test '
        'reaches no database, or reaches it the same whatever its kind)')


_UNIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'unit')

# The longest modules start first: under pytest-xdist (tools/run-tests
# runs a worker per CPU, a module's tests kept together on one) a long
# one started last would leave the other workers idle at the end.
LONGEST_FIRST = ('test_world_freshness.py', 'test_ui.py',
                 'test_candidates_differential.py', 'test_commands.py',
                 'test_rolling_upgrade.py')


def pytest_collection_modifyitems(config, items):
    from placement.tests import db as test_db
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        if str(item.path).startswith(_UNIT + os.sep):
            item.add_marker(pytest.mark.once('reaches no database'))
    if test_db.backend() == 'sqlite':
        return
    once = [item for item in items if item.get_closest_marker('once')]
    if once:
        config.hook.pytest_deselected(items=once)
        items[:] = [item for item in items
                    if not item.get_closest_marker('once')]
