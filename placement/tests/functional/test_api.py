"""Run every gabbi YAML file in gabbits/ against an in-process app."""
import os

from gabbi import driver
from gabbi.driver import test_pytest  # noqa: F401 - pytest collects it

from placement.tests.functional.fixtures import gabbits

TESTS_DIR = 'gabbits'


def pytest_generate_tests(metafunc):
    test_dir = os.path.join(os.path.dirname(__file__), TESTS_DIR)
    driver.py_test_generator(
        test_dir, intercept=gabbits.setup_app,
        test_loader_name=__name__, fixture_module=gabbits,
        metafunc=metafunc)
