"""Run the gabbi YAML files in gabbits_prefix/ against an app mounted under
/placement (SCRIPT_NAME, as devstack mounts it): links and Location
headers must carry the prefix."""
import os

from gabbi import driver
from gabbi.driver import test_pytest  # noqa: F401 - pytest collects it

from placement.tests.functional.fixtures import gabbits

TESTS_DIR = 'gabbits_prefix'
PREFIX = '/placement'


def _mounted_app():
    """gabbi's intercept, as a server mounting the app at PREFIX would call
    it: httpx's WSGI transport sets SCRIPT_NAME but leaves the prefix at the
    front of PATH_INFO too, where a real server (mod_wsgi, uwsgi) moves
    it out."""
    app = gabbits.setup_app()

    def mounted(environ, start_response):
        script, path = environ.get('SCRIPT_NAME', ''), environ['PATH_INFO']
        if script and path.startswith(script + '/'):
            environ['PATH_INFO'] = path[len(script):]
        return app(environ, start_response)
    return mounted


def pytest_generate_tests(metafunc):
    test_dir = os.path.join(os.path.dirname(__file__), TESTS_DIR)
    driver.py_test_generator(
        test_dir, intercept=_mounted_app, prefix=PREFIX,
        test_loader_name=__name__, fixture_module=gabbits,
        metafunc=metafunc)
