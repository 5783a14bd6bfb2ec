"""The web view on nested trees, as an operator planning capacity reads it:
hosts carry the traits and aggregates, their NUMA cells the VCPU and
memory, GPUs and FPGAs sit deeper, a ceph pool shares DISK_GB in the
zone. Filters, roll-ups, an aggregate's capacity and "fullest" follow
Placement's tree semantics (placement/ui/static/trees.js).
"""
import uuid

import pytest

from placement.tests.functional import browser
from placement.tests.functional.ui_browser import (  # noqa: F401 (fixtures)
    Api, chromium, connected, driver, page, row_names, select,
    server, wait)

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

pytestmark = pytest.mark.once(
    'the page in a browser: its endpoints have gabbi tests on every database')

AZ1 = str(uuid.uuid4())
AZ2 = str(uuid.uuid4())
AVX = 'HW_CPU_X86_AVX512F'
HOT = 'CUSTOM_RACK_HOT'


def numa(api, host, name, **more):
    return api.provider(name, parent=host, inventories=dict({
        'VCPU': {'total': 16, 'allocation_ratio': 4.0},
        'MEMORY_MB': {'total': 32768}}, **more))


@pytest.fixture(scope='module')
def world(server):
    """host-a and host-b in AZ1 with the ceph pool, host-c and flat-1 in
    AZ2; host-a's numa0 92% used (59 of 64 VCPU), host-b's FPGA full, flat-1
    (VCPU of its own) 62% used."""
    api = Api(server.url)
    api('PUT', '/traits/' + HOT)
    w = {}
    w['host-a'] = api.provider('host-a', traits=[AVX, HOT], aggregates=[AZ1])
    w['host-b'] = api.provider('host-b', traits=[AVX], aggregates=[AZ1])
    w['host-c'] = api.provider('host-c', aggregates=[AZ2])
    for host in ('host-a', 'host-b', 'host-c'):
        for i in range(2):
            name = '%s-numa%d' % (host, i)
            w[name] = numa(api, w[host], name)
    w['gpu'] = api.provider('host-a-numa0-gpu0', parent=w['host-a-numa0'],
                            inventories={'VGPU': {'total': 4}})
    w['fpga'] = api.provider('host-b-numa1-fpga0', parent=w['host-b-numa1'],
                             inventories={'FPGA': {'total': 1}})
    w['ceph'] = api.provider('ceph', inventories={
        'DISK_GB': {'total': 10000}},
        traits=['MISC_SHARES_VIA_AGGREGATE'], aggregates=[AZ1])
    w['flat-1'] = api.provider('flat-1', inventories={
        'VCPU': {'total': 32}, 'MEMORY_MB': {'total': 65536}},
        aggregates=[AZ2])
    api.allocate(str(uuid.uuid4()), {
        w['host-a-numa0']: {'VCPU': 59, 'MEMORY_MB': 4096},
        w['ceph']: {'DISK_GB': 500}})
    api.allocate(str(uuid.uuid4()), {
        w['host-b-numa0']: {'VCPU': 2, 'MEMORY_MB': 1024},
        w['fpga']: {'FPGA': 1}})
    api.allocate(str(uuid.uuid4()), {w['flat-1']: {'VCPU': 20}})
    return api, w


def count_text(driver):
    return driver.find_element(By.ID, 'tree-count').text


def test_filters_hold_on_nested_trees(page, world):
    """Bug 1: a trait or aggregate sits on the host, the class on its NUMA
    cells; combined, they match the cells (not nothing)."""
    driver, _ = page
    _, w = world
    connected(driver)
    cells = ['host-a', 'host-a-numa0', 'host-a-numa1',
             'host-b', 'host-b-numa0', 'host-b-numa1']
    select(driver, 'filter-agg', AZ1)
    select(driver, 'filter-rc', 'VCPU')
    wait(driver, lambda d: row_names(d) == cells)
    assert count_text(driver).startswith('4 of 13 providers match, in 2 trees')
    # host-a has no VCPU: it shows only to place its cells, and says so.
    assert driver.execute_script(
        'return [arguments[0], arguments[1]].map((u) => document'
        '.getElementById("rp-" + u).classList.contains("context"))',
        w['host-a'], w['host-a-numa0']) == [True, False]
    browser.screenshot(driver, 'providers-nested')
    select(driver, 'filter-agg', AZ2)
    wait(driver, lambda d: row_names(d) == [
        'flat-1', 'host-c', 'host-c-numa0', 'host-c-numa1'])
    select(driver, 'filter-agg', '')
    select(driver, 'filter-trait', AVX)
    wait(driver, lambda d: row_names(d) == cells)
    # Used over 5%, on the provider's own VCPU: only host-a's numa0.
    select(driver, 'filter-trait', HOT)
    driver.find_element(By.ID, 'filter-pct').send_keys('5')
    wait(driver, lambda d: row_names(d) == ['host-a', 'host-a-numa0'])
    assert count_text(driver) == '1 of 13 providers match, in 1 tree'
    # The page says which semantics each filter uses.
    help_text = driver.find_element(By.ID, 'filter-help').text
    assert 'its own or its root' in help_text


def capacity_sums(api, roots):
    """Per class, capacity and usage over every provider of the trees of
    ``roots``, from the API."""
    sums = {}
    for root in roots:
        for rp in api('GET', '/resource_providers?in_tree=%s'
                      % root)['resource_providers']:
            base = '/resource_providers/%s' % rp['uuid']
            usages = api('GET', base + '/usages')['usages']
            for rc, inv in api('GET', base + '/inventories')[
                    'inventories'].items():
                s = sums.setdefault(rc, [0, 0])
                s[0] += int((inv['total'] - inv['reserved'])
                            * inv['allocation_ratio'])
                s[1] += usages[rc]
    return sums


def aggregate_totals(driver):
    return driver.execute_script(
        'return Object.fromEntries([...document.querySelectorAll('
        '"#aggregate-totals tbody tr")].map((r) => [r.dataset.rc, ['
        'r.querySelector("[data-k=capacity]").textContent,'
        'r.querySelector("[data-k=used]").textContent]]))')


def fmt(sums):
    return {rc: ['{:,}'.format(cap), '{:,}'.format(used)]
            for rc, (cap, used) in sums.items()}


def test_an_aggregate_counts_its_members_trees(page, world):
    """Bug 2: AZ1 holds its hosts' whole trees (NUMA cells, GPU, FPGA)
    and the ceph pool, each provider once; its members sort by their
    fullest provider."""
    driver, _ = page
    api, w = world
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Aggregates').click()
    row = wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#aggregates-table tr[data-aggregate="%s"]' % AZ1)))
    assert row.find_element(By.CSS_SELECTOR, '[data-k=members]').text == '3'
    assert row.find_element(By.CSS_SELECTOR, '[data-k=providers]').text == '9'
    row.find_element(By.TAG_NAME, 'a').click()
    wait(driver, EC.presence_of_element_located((By.ID, 'aggregate-members')))
    expected = fmt(capacity_sums(api, [w['host-a'], w['host-b'], w['ceph']]))
    assert set(expected) == {'VCPU', 'MEMORY_MB', 'DISK_GB', 'VGPU', 'FPGA'}
    assert aggregate_totals(driver) == expected
    members = driver.execute_script(
        'return [...document.querySelectorAll("#aggregate-members tbody tr")]'
        '.map((r) => [r.dataset.uuid, r.querySelector(".peak").textContent,'
        ' r.lastChild.textContent])')
    assert [m[0] for m in members] == [w['ceph'], w['host-a'], w['host-b']]
    assert all(m[2] for m in members), members
    assert members[1][1] == 'host-a-numa0 92%'
    assert 'Σ VCPU: 59 of 128' in members[1][2]
    select(driver, 'aggregate-sort', 'fullest')
    wait(driver, lambda d: d.execute_script(
        'return [...document.querySelectorAll("#aggregate-members tbody tr")]'
        '.map((r) => r.dataset.uuid)') == [w['host-b'], w['host-a'],
                                           w['ceph']])
    browser.screenshot(driver, 'aggregate-nested')


def tree_bar(driver, uuid, rc):
    return driver.execute_script(
        'const m = document.querySelector("#rp-" + arguments[0] + '
        '" .mini-wrap[data-rc=\\"" + arguments[1] + "\\"]");'
        'return m && m.title', uuid, rc)


def test_tree_sums_follow_a_write_on_a_collapsed_child(page, world):
    """Bug 3: with host-a collapsed, a claim on its numa1 and its delete
    show in host-a's Σ bars and in AZ1's totals within a refresh."""
    driver, _ = page
    api, w = world
    connected(driver)
    wait(driver, lambda d: tree_bar(d, w['host-a'], 'VCPU')
         == 'tree VCPU 59 of 128')
    vm = str(uuid.uuid4())
    api.allocate(vm, {w['host-a-numa1']: {'VCPU': 4}})
    try:
        wait(driver, lambda d: tree_bar(d, w['host-a'], 'VCPU')
             == 'tree VCPU 63 of 128')
    finally:
        api('DELETE', '/allocations/%s' % vm)
    wait(driver, lambda d: tree_bar(d, w['host-a'], 'VCPU')
         == 'tree VCPU 59 of 128')
    # The aggregate's totals follow too.
    driver.get(driver.current_url.split('#')[0] + '#aggregate/' + AZ1)
    wait(driver, EC.presence_of_element_located((By.ID, 'aggregate-totals')))
    before = aggregate_totals(driver)['VCPU']
    api.allocate(vm, {w['host-b-numa1']: {'VCPU': 8}})
    try:
        wait(driver, lambda d: aggregate_totals(d)['VCPU'] == [
            before[0], '{:,}'.format(int(before[1].replace(',', '')) + 8)])
    finally:
        api('DELETE', '/allocations/%s' % vm)
    wait(driver, lambda d: aggregate_totals(d)['VCPU'] == before)


def test_sort_ranks_a_host_by_its_fullest_provider(page, world):
    """Bug 4: host-a, whose numa0 is 92% full (its tree 46%), ranks above
    flat-1 (62%); with no class chosen, host-b's full FPGA first."""
    driver, _ = page
    connected(driver)
    select(driver, 'sort', 'usage')
    wait(driver, lambda d: row_names(d) == [
        'host-b', 'host-a', 'flat-1', 'ceph', 'host-c'])
    select(driver, 'filter-rc', 'VCPU')
    wait(driver, lambda d: row_names(d) == [
        'host-a', 'host-a-numa0', 'host-a-numa1', 'flat-1',
        'host-b', 'host-b-numa0', 'host-b-numa1',
        'host-c', 'host-c-numa0', 'host-c-numa1'])
    driver.find_element(By.ID, 'filter-pct').send_keys('50')
    wait(driver, lambda d: row_names(d) == [
        'host-a', 'host-a-numa0', 'flat-1'])
