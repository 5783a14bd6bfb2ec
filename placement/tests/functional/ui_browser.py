"""What the browser tests of the web view share: the API client that
builds their worlds, the live server, headless Chromium and the page
fixture (any console error the page logged fails the test), and helpers
that read the page as a person would.
"""
import os

import pytest
import requests

from placement.tests.functional import browser
from placement.tests.functional import live_server

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select
from selenium.webdriver.support.ui import WebDriverWait

PROJECT = 'demo-project'
USER = 'demo-user'


class Api:
    def __init__(self, url):
        self.url = url
        self.session = requests.Session()
        self.session.headers.update(live_server.LiveServer.headers())

    def __call__(self, method, path, body=None, status=None):
        resp = self.session.request(method, self.url + path, json=body)
        assert resp.status_code < 400 or resp.status_code == status, (
            method, path, resp.status_code, resp.text)
        return resp.json() if resp.content else None

    def provider(self, name, parent=None, inventories=None, traits=(),
                 aggregates=()):
        body = {'name': name}
        if parent:
            body['parent_provider_uuid'] = parent
        rp = self('POST', '/resource_providers', body)
        if inventories:
            self('PUT', '/resource_providers/%s/inventories' % rp['uuid'],
                 {'resource_provider_generation': rp['generation'],
                  'inventories': inventories})
        if traits:
            gen = self('GET', '/resource_providers/%s' % rp['uuid'])
            self('PUT', '/resource_providers/%s/traits' % rp['uuid'],
                 {'resource_provider_generation': gen['generation'],
                  'traits': list(traits)})
        if aggregates:
            gen = self('GET', '/resource_providers/%s' % rp['uuid'])
            self('PUT', '/resource_providers/%s/aggregates' % rp['uuid'],
                 {'resource_provider_generation': gen['generation'],
                  'aggregates': list(aggregates)})
        return rp['uuid']

    def allocate(self, consumer, allocations, consumer_type='INSTANCE'):
        self('PUT', '/allocations/%s' % consumer, {
            'allocations': {rp: {'resources': res}
                            for rp, res in allocations.items()},
            'project_id': PROJECT, 'user_id': USER,
            'consumer_generation': None, 'consumer_type': consumer_type})


@pytest.fixture(scope='module')
def chromium():
    paths = browser.ensure_chromium()
    if paths is None:
        message = 'chromium and chromium-driver are not installed'
        if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
            pytest.fail(message)
        pytest.skip(message)
    return paths


@pytest.fixture(scope='module')
def server():
    with live_server.LiveServer(workers=2) as srv:
        yield srv


@pytest.fixture(scope='module')
def driver(chromium):
    drv = browser.new_driver(chromium)
    yield drv
    drv.quit()


@pytest.fixture
def page(driver, server, world):
    """The page, freshly loaded, without a token; after the test, any
    console error the page logged fails it."""
    driver.get(server.url + '/ui/')
    driver.execute_script('sessionStorage.clear()')
    driver.get(server.url + '/ui/')
    driver.get_log('browser')
    expected = []
    yield driver, expected
    errors = [e for e in driver.get_log('browser')
              if e['level'] in ('SEVERE', 'ERROR')
              and not any(x in e['message'] for x in expected)]
    driver.get('about:blank')
    assert errors == []


def wait(driver, condition, timeout=10):
    return WebDriverWait(driver, timeout).until(condition)


def connect(driver, token='admin'):
    box = driver.find_element(By.ID, 'token')
    box.clear()
    box.send_keys(token, Keys.ENTER)


def tree_rows(driver):
    return driver.find_elements(By.CSS_SELECTOR, '#tree .row')


# Rows are redrawn as scrolling and lazy usage fetches land, so they are
# read in one script (no element going stale between two calls).
def row_names(driver):
    return driver.execute_script(
        'return [...document.querySelectorAll("#tree .row .name")]'
        '.map((e) => e.textContent)')


def row_attr(driver, uuid, name):
    return driver.execute_script(
        'const r = document.getElementById("rp-" + arguments[0]);'
        'return r && r.getAttribute(arguments[1])', uuid, name)


def focused(driver, name='data-uuid'):
    return driver.execute_script(
        'return document.activeElement.getAttribute(arguments[0])', name)


def keys(driver, *keys_):
    """Type at whatever has the focus, as a person would."""
    ActionChains(driver).send_keys(*keys_).perform()


def click_row(driver, uuid, part=None):
    def attempt(d):
        try:
            el = d.find_element(By.ID, 'rp-' + uuid)
            if part:
                el = el.find_element(By.CLASS_NAME, part)
            el.click()
            return True
        except StaleElementReferenceException:
            return False
    wait(driver, attempt)


def connected(driver):
    connect(driver)
    wait(driver, lambda d: len(row_names(d)) >= 2)


def open_provider(driver, uuid):
    click_row(driver, uuid)
    wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % uuid)))


def used_of(driver, rc, where='#own-resources'):
    return driver.execute_script(
        'const b = document.querySelector(arguments[0] + '
        '" .res[data-rc=\\"" + arguments[1] + "\\"]");'
        'return b && Number(b.dataset.used)', where, rc)


def select(driver, id_, value):
    Select(driver.find_element(By.ID, id_)).select_by_value(value)
