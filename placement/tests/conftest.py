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

if not os.environ.get('OS_CANDIDATES__WORLD_DIR'):
    _WORLD_DIR = tempfile.mkdtemp(prefix='placement-test-worlds-')
    os.environ['OS_CANDIDATES__WORLD_DIR'] = _WORLD_DIR
    atexit.register(shutil.rmtree, _WORLD_DIR, True)
