"""The web view (/ui/) as a person uses it: headless Chromium against a live
server over a world built through the API.

Each test fails on any JavaScript console error the page logged. Chromium
comes from apt (placement/tests/functional/browser.py installs it when
root); without it these tests skip, except under CI=true, where they fail.
Screenshots land in artifacts/ui/.
"""
import os
import re
import uuid

import pytest
import requests

from placement.tests.functional import browser
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional import live_server
from placement.tests.functional.ui_browser import (  # noqa: F401 (fixtures)
    Api, PROJECT, USER, chromium, click_row, connect, connected, driver,
    focused, keys, open_provider, page, row_attr, row_names, select, server,
    tree_rows, used_of, wait)

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC

pytestmark = pytest.mark.once(
    'the page in a browser: its endpoints have gabbi tests on every database')

AGG = str(uuid.uuid4())


def build_world(api):
    """Two compute nodes: compute-1 with two NUMA children, compute-2 flat;
    two instances and a migration."""
    api('PUT', '/traits/CUSTOM_GOLD')
    cn1 = api.provider('compute-1', inventories={
        'DISK_GB': {'total': 1000, 'reserved': 100}},
        traits=['HW_CPU_X86_AVX2', 'CUSTOM_GOLD'], aggregates=[AGG])
    numa = [api.provider('compute-1-numa%d' % i, parent=cn1, inventories={
        'VCPU': {'total': 16, 'allocation_ratio': 4.0},
        'MEMORY_MB': {'total': 32768, 'reserved': 512}}) for i in range(2)]
    cn2 = api.provider('compute-2', inventories={
        'VCPU': {'total': 32, 'reserved': 2, 'allocation_ratio': 4.0},
        'MEMORY_MB': {'total': 131072, 'reserved': 1024},
        'DISK_GB': {'total': 2000}}, aggregates=[AGG])
    vm1, vm2, mig = (str(uuid.uuid4()) for _ in range(3))
    api.allocate(vm1, {numa[0]: {'VCPU': 4, 'MEMORY_MB': 8192},
                       cn1: {'DISK_GB': 40}})
    api.allocate(vm2, {cn2: {'VCPU': 8, 'MEMORY_MB': 16384,
                             'DISK_GB': 80}})
    api.allocate(mig, {cn2: {'VCPU': 2, 'MEMORY_MB': 2048}},
                 consumer_type='MIGRATION')
    return {'cn1': cn1, 'numa': numa, 'cn2': cn2, 'vm1': vm1, 'vm2': vm2,
            'mig': mig}


@pytest.fixture(scope='module')
def world(server):
    api = Api(server.url)
    return api, build_world(api)


# --- the tests ----------------------------------------------------------------


def test_static_files_need_no_token_and_data_does(server):
    for path, kind in (('/ui/', 'text/html'), ('/ui/ui.js', 'text/javascript'),
                       ('/ui/session.js', 'text/javascript'),
                       ('/ui/dom.js', 'text/javascript'),
                       ('/ui/trees.js', 'text/javascript'),
                       ('/ui/ui.css', 'text/css')):
        resp = requests.get(server.url + path)
        assert resp.status_code == 200, path
        assert resp.headers['content-type'].startswith(kind)
        assert "default-src 'self'" in resp.headers[
            'content-security-policy']
    resp = requests.get(server.url + '/ui', allow_redirects=False)
    assert resp.status_code == 302
    assert resp.headers['location'] == server.url + '/ui/'
    assert requests.get(server.url + '/ui/secrets').status_code == 404
    assert requests.get(server.url + '/resource_providers').status_code == 401
    # Identity headers a client makes up count for nothing on /ui/ either.
    assert requests.post(server.url + '/ui/', headers={
        'x-roles': 'admin'}).status_code == 405


def test_token_and_tree_by_keyboard(page, world):
    driver, _ = page
    _api, w = world
    assert 'Enter a token' in driver.find_element(By.ID, 'status').text
    connected(driver)
    assert row_names(driver) == ['compute-1', 'compute-2']
    status = driver.find_element(By.ID, 'status').text
    assert status == '4 providers in 2 trees'
    assert row_attr(driver, w['cn1'], 'aria-expanded') == 'false'
    # Tab from the last filter reaches the tree's one focusable row.
    driver.execute_script('document.getElementById("sort").focus()')
    keys(driver, Keys.TAB)
    assert focused(driver) == w['cn1']
    keys(driver, Keys.ENTER)
    wait(driver, lambda d: len(row_names(d)) == 4)
    assert row_names(driver) == ['compute-1', 'compute-1-numa0',
                                 'compute-1-numa1', 'compute-2']
    assert row_attr(driver, w['cn1'], 'aria-expanded') == 'true'
    # Enter also opened compute-1's details.
    wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % w['cn1'])))
    keys(driver, Keys.ARROW_DOWN)
    assert focused(driver) == w['numa'][0]
    assert focused(driver, 'aria-level') == '2'
    # Left goes to the parent, Left again collapses it, Right expands.
    keys(driver, Keys.ARROW_LEFT)
    assert focused(driver) == w['cn1']
    keys(driver, Keys.ARROW_LEFT)
    wait(driver, lambda d: len(row_names(d)) == 2)
    assert focused(driver) == w['cn1']
    keys(driver, Keys.ARROW_RIGHT)
    wait(driver, lambda d: len(row_names(d)) == 4)
    # Space opens the focused provider's details.
    keys(driver, Keys.END, Keys.SPACE)
    assert focused(driver) == w['cn2']
    wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % w['cn2'])))
    assert row_attr(driver, w['cn2'], 'aria-selected') == 'true'
    browser.screenshot(driver, 'tree-keyboard')


def test_bars_traits_aggregates_match_the_api(page, world):
    driver, _ = page
    api, w = world
    connected(driver)
    click_row(driver, w['cn1'], 'toggle')
    wait(driver, lambda d: len(row_names(d)) == 4)
    for rp in (w['cn2'], w['numa'][0], w['cn1']):
        open_provider(driver, rp)
        inventories = api('GET', '/resource_providers/%s/inventories'
                          % rp)['inventories']
        usages = api('GET', '/resource_providers/%s/usages' % rp)['usages']
        bars = driver.find_elements(By.CSS_SELECTOR, '#own-resources .res')
        seen = {}
        for bar in bars:
            rc = bar.get_attribute('data-rc')
            seen[rc] = bar
            inv = inventories[rc]
            cap = (inv['total'] - inv['reserved']) * inv['allocation_ratio']
            assert float(bar.get_attribute('data-capacity')) == cap
            assert int(bar.get_attribute('data-used')) == usages[rc]
            assert int(bar.get_attribute('data-reserved')) == inv['reserved']
            text = bar.find_element(By.CLASS_NAME, 'numbers').text
            assert text.startswith('{:,} used of {:,}'.format(
                usages[rc], int(cap))), text
            assert 'reserved {:,}'.format(inv['reserved']) in text
            # The bar spans total x ratio: used from the left, reserved
            # at the right end.
            used_w, held_w = driver.execute_script(
                'const b = arguments[0].querySelector(".bar");'
                'const w = b.getBoundingClientRect().width;'
                'return [".used", ".reserved"].map((s) =>'
                ' b.querySelector(s).getBoundingClientRect().width / w)', bar)
            whole = inv['total'] * inv['allocation_ratio']
            assert used_w == pytest.approx(usages[rc] / whole, abs=0.01)
            assert held_w == pytest.approx(inv['reserved'] / inv['total'],
                                           abs=0.01)
        assert sorted(seen) == sorted(inventories)
        traits = api('GET', '/resource_providers/%s/traits' % rp)['traits']
        shown = [e.text for e in driver.find_elements(
            By.CSS_SELECTOR, '#traits li')]
        assert shown == sorted(traits)
        aggs = api('GET', '/resource_providers/%s/aggregates'
                   % rp)['aggregates']
        shown = [e.text for e in driver.find_elements(
            By.CSS_SELECTOR, '#aggregates li')]
        assert shown == sorted(aggs)
    # The tree's mini bars came from the same numbers, for visible rows.
    minis = driver.find_elements(
        By.CSS_SELECTOR, '#rp-%s .mini' % w['cn2'])
    assert len(minis) == 3
    browser.screenshot(driver, 'provider')


def test_follow_a_consumer_to_its_project(page, world):
    driver, _ = page
    api, w = world
    connected(driver)
    open_provider(driver, w['cn2'])
    links = driver.find_elements(By.CSS_SELECTOR, '#consumers td.consumer a')
    assert sorted(a.text for a in links) == sorted([w['vm2'], w['mig']])
    next(a for a in links if a.text == w['mig']).click()
    wait(driver, EC.presence_of_element_located((By.ID, 'consumer-detail')))
    mine = api('GET', '/allocations/%s' % w['mig'])
    assert driver.find_element(By.ID, 'consumer-project').text == PROJECT
    assert driver.find_element(By.ID, 'consumer-user').text == USER
    assert driver.find_element(By.ID, 'consumer-type').text == 'MIGRATION'
    rows = driver.find_elements(By.CSS_SELECTOR,
                                '#consumer-allocations tbody tr')
    assert [r.get_attribute('data-uuid') for r in rows] == list(
        mine['allocations'])
    assert rows[0].text == 'compute-2 MEMORY_MB: 2,048, VCPU: 2'
    browser.screenshot(driver, 'consumer')
    # On to the project's usages, per consumer type.
    driver.find_element(By.CSS_SELECTOR, '#consumer-project a').click()
    wait(driver, EC.presence_of_element_located((By.ID, 'usages-table')))
    usages = api('GET', '/usages?project_id=%s' % PROJECT)['usages']
    for ctype, numbers in usages.items():
        row = driver.find_element(
            By.CSS_SELECTOR, '#usages-table tr[data-type="%s"]' % ctype)
        for rc, n in numbers.items():
            if rc == 'consumer_count':
                continue
            cell = row.find_element(By.CSS_SELECTOR, 'td[data-rc="%s"]' % rc)
            assert cell.text == '{:,}'.format(n)
    instance = driver.find_element(
        By.CSS_SELECTOR, '#usages-table tr[data-type="INSTANCE"]')
    assert instance.text.split()[:2] == ['INSTANCE', '2']
    # And back to a provider from the consumer view.
    driver.back()
    wait(driver, EC.presence_of_element_located((By.ID, 'consumer-detail')))
    driver.find_element(By.CSS_SELECTOR, '#consumer-allocations a').click()
    wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % w['cn2'])))


def _run(driver, form_input, query):
    box = driver.find_element(By.ID, form_input)
    box.clear()
    box.send_keys(query, Keys.ENTER)


def test_candidates_and_why_none(page, world):
    driver, _ = page
    api, w = world
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Allocation candidates').click()
    query = 'resources=VCPU:2,MEMORY_MB:1024&member_of=%s' % AGG
    _run(driver, 'candidates-query', query)
    wait(driver, EC.presence_of_element_located((By.ID, 'candidates-table')))
    expect = api('GET', '/allocation_candidates?' + query)
    count = driver.find_element(By.ID, 'candidates-count').text
    assert count.startswith('%d candidates' % len(
        expect['allocation_requests']))
    rows = driver.find_elements(By.CSS_SELECTOR, '#candidates-table tbody tr')
    assert len(rows) == len(expect['allocation_requests']) > 1
    # Too few: the explanation on demand.
    driver.find_element(By.ID, 'explain-button').click()
    wait(driver, EC.presence_of_element_located((By.ID, 'explanation')))
    # Nothing fits: explained at once, with what would change that.
    query = 'resources=VCPU:2,MEMORY_MB:1024&required=CUSTOM_GOLD'
    _run(driver, 'candidates-query', query)
    wait(driver, EC.presence_of_element_located((By.ID, 'explain-suggestions')))
    assert driver.find_element(By.ID, 'candidates-count').text.startswith(
        '0 candidates')
    explained = api('GET', '/ops/explain/allocation_candidates?' + query)
    shown = [li.text for li in driver.find_elements(
        By.CSS_SELECTOR, '#explain-suggestions li')]
    assert shown == explained['suggestions'] and shown
    reasons = [li.text for li in driver.find_elements(
        By.CSS_SELECTOR, '#explain-reasons li')]
    assert reasons == [e['reason'] for e in explained['explained']]
    steps = driver.find_elements(By.CSS_SELECTOR, '#explain-steps tbody tr')
    assert len(steps) == sum(len(g['steps']) for g in explained['groups']) \
        + len(explained['combination']['steps']) + 1
    assert steps[-1].text.endswith('kept (in a candidate) %d %d 0' % (
        explained['combination']['kept'], explained['combination']['kept']))
    assert 'null' not in driver.find_element(
        By.ID, 'candidates-result').text
    browser.screenshot(driver, 'explain')


def test_bad_query_shows_the_api_error(page, world):
    driver, expected = page
    expected.append('status of 400')
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Allocation candidates').click()
    _run(driver, 'candidates-query', 'resources=VCPU:x')
    alert = wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#candidates-result [role=alert]')))
    assert alert.text.startswith('Request failed: 400: ')
    assert 'Requested resource VCPU expected positive integer' in alert.text


def test_capacity_report(page, world):
    driver, _ = page
    api, w = world
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Capacity').click()
    query = 'resources=VCPU:2,MEMORY_MB:4096'
    _run(driver, 'capacity-query', query)
    wait(driver, EC.presence_of_element_located((By.ID, 'capacity-report')))
    report = api('GET', '/ops/capacity?' + query)
    assert driver.find_element(By.ID, 'capacity-total').text.startswith(
        'Total: %d more fit' % report['total'])
    cell = driver.find_element(
        By.CSS_SELECTOR, '#capacity-aggregates tr[data-aggregate="%s"] td.num'
        % AGG)
    assert int(cell.text) == report['aggregates'][AGG] > 0
    trees = driver.find_elements(By.CSS_SELECTOR, '#capacity-trees tbody tr')
    assert [t.text for t in trees] == [
        '%s %d' % ('compute-1' if t['root_provider_uuid'] == w['cn1']
                   else 'compute-2', t['fits']) for t in report['trees']]
    browser.screenshot(driver, 'capacity')


def test_search_by_name_and_uuid(page, world):
    driver, _ = page
    _api, w = world
    connected(driver)
    search = driver.find_element(By.ID, 'search')
    search.send_keys('NUMA1')
    wait(driver, lambda d: row_names(d) == ['compute-1', 'compute-1-numa1'])
    assert driver.find_element(By.ID, 'tree-count').text == (
        '1 of 4 providers match, in 1 tree')
    search.clear()
    search.send_keys(w['cn2'][:8])
    wait(driver, lambda d: row_names(d) == ['compute-2'])
    search.send_keys(Keys.BACKSPACE * 8)
    wait(driver, lambda d: row_names(d) == ['compute-1', 'compute-2'])


def test_wrong_token_is_refused_by_the_api(page, world):
    driver, expected = page
    expected.append('status of 403')
    connect(driver, 'nobody')
    wait(driver, lambda d: 'refused' in d.find_element(By.ID, 'status').text)
    status = driver.find_element(By.ID, 'status').text
    assert status.startswith('Token refused (403'), status
    assert tree_rows(driver) == []


def _luminance(rgb):
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _rgb(css):
    return [int(v) for v in re.findall(r'\d+', css)[:3]]


def test_text_contrast_is_readable(page, world):
    """Every visible text element against its background: WCAG AA (4.5:1)."""
    driver, _ = page
    connected(driver)
    open_provider(driver, world[1]['cn2'])
    pairs = driver.execute_script('''
        const out = [];
        const bg = (el) => {
          for (; el; el = el.parentElement) {
            const c = getComputedStyle(el).backgroundColor;
            if (c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c;
          }
          return 'rgb(255, 255, 255)';
        };
        for (const el of document.querySelectorAll('body *')) {
          const own = [...el.childNodes].some(
            (n) => n.nodeType === 3 && n.textContent.trim());
          if (!own || !el.getClientRects().length) continue;
          out.push([el.tagName + '.' + el.className,
                    getComputedStyle(el).color, bg(el)]);
        }
        return out;''')
    assert len(pairs) > 20
    low = []
    for what, fg, back in pairs:
        lf, lb = _luminance(_rgb(fg)), _luminance(_rgb(back))
        ratio = (max(lf, lb) + 0.05) / (min(lf, lb) + 0.05)
        if ratio < 4.5:
            low.append((what, fg, back, round(ratio, 2)))
    assert low == []


def test_a_thousand_providers_render_only_what_is_in_view(
        driver, chromium):
    """1,000 providers (written straight to the database, to be quick):
    the tree holds only the rows in view, their bars drawn from the one
    answer that brought every provider."""
    with live_server.LiveServer(workers=2) as srv:
        w = cw.WorldBuilder()
        for i in range(1000):
            w.provider('cn%04d' % i)
            w.inventory('cn%04d' % i, 'VCPU', 32)
        w.write(srv.db.engine)
        driver.get(srv.url + '/ui/')
        driver.execute_script(
            'sessionStorage.setItem("placement-ui-token", "admin")')
        driver.get(srv.url + '/ui/')
        driver.get_log('browser')
        wait(driver, lambda d: len(row_names(d)) > 5)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR,
                                               '#tree .mini'))
        rows = len(tree_rows(driver))
        assert 10 < rows < 60
        # Every row's bars came with the one answer; no request per row.
        assert len(driver.find_elements(
            By.CSS_SELECTOR, '#tree .mini')) == rows
        assert driver.execute_script(
            'return performance.getEntriesByType("resource").filter('
            '(e) => e.name.includes("/resource_providers/")).length') == 0
        painted = driver.execute_script(
            'return window.placementUI.stats.treePaintedMs')
        print('\n1,000 providers: tree painted %.0f ms after navigation, '
              '%d rows in the DOM' % (painted, rows))
        # The last provider is reachable by keyboard (End) and by search.
        tree_rows(driver)[0].click()
        keys(driver, Keys.END)
        wait(driver, lambda d: d.execute_script(
            'return document.activeElement.textContent').startswith(
            'cn0999'))
        driver.find_element(By.ID, 'search').send_keys('cn0999')
        wait(driver, lambda d: row_names(d) == ['cn0999'])
        errors = [e for e in driver.get_log('browser')
                  if e['level'] == 'SEVERE']
        # Leave the page before its server goes (its fetches would fail).
        driver.get('about:blank')
        assert errors == []


def test_demo_world_script(driver, chromium):
    """tools/demo-world loads its world through the API of a running
    service; the page shows it (doc/source/ui/providers.png, the README's
    screenshot, is a copy of its demo.png)."""
    import subprocess
    import sys
    with live_server.LiveServer(workers=1) as srv:
        tool = os.path.join(browser.REPO_ROOT, 'tools', 'demo-world')
        out = subprocess.run([sys.executable, tool, '--url', srv.url],
                             capture_output=True, text=True, check=True)
        assert out.stdout.startswith('Loaded 9 providers. Open %s/ui/'
                                     % srv.url)
        again = subprocess.run([sys.executable, tool, '--url', srv.url],
                               capture_output=True, text=True)
        assert again.returncode == 1 and 'loaded' in again.stderr
        driver.get(srv.url + '/ui/')
        driver.execute_script('sessionStorage.clear()')
        driver.get(srv.url + '/ui/')
        driver.get_log('browser')
        connect(driver)
        wait(driver, lambda d: row_names(d) == [
            'compute-1', 'compute-2', 'compute-3', 'shared-storage'])
        rps = {rp['name']: rp['uuid'] for rp in requests.get(
            srv.url + '/resource_providers',
            headers=srv.headers()).json()['resource_providers']}
        click_row(driver, rps['compute-1'], 'toggle')
        click_row(driver, rps['compute-3'], 'toggle')
        wait(driver, lambda d: len(row_names(d)) == 7)
        open_provider(driver, rps['compute-3'])
        wait(driver, lambda d: d.execute_script(
            'return [...document.querySelectorAll("#tree .row")]'
            '.every((r) => r.querySelector(".mini"))'))
        browser.screenshot(driver, 'demo')
        errors = [e for e in driver.get_log('browser')
                  if e['level'] == 'SEVERE']
        driver.get('about:blank')
        assert errors == []


# --- issue 31: each bug an operator hit, then the live view ------------------


def test_claim_elsewhere_shows_without_reload(page, world):
    """A claim made by another client shows in the open provider, its
    bars, generation and consumers, within seconds: no Connect again."""
    driver, _ = page
    api, w = world
    connected(driver)
    open_provider(driver, w['cn2'])
    before = used_of(driver, 'VCPU')
    assert driver.find_element(By.ID, 'freshness').text.startswith('as of ')
    vm = str(uuid.uuid4())
    api.allocate(vm, {w['cn2']: {'VCPU': 5, 'MEMORY_MB': 100}})
    try:
        wait(driver, lambda d: used_of(d, 'VCPU') == before + 5)
        wait(driver, lambda d: d.find_elements(
            By.CSS_SELECTOR, '#consumers tr[data-consumer="%s"]' % vm))
        gen = api('GET', '/resource_providers/%s' % w['cn2'])['generation']
        assert driver.find_element(
            By.ID, 'provider-detail').get_attribute('data-generation') == str(
            gen)
    finally:
        api('DELETE', '/allocations/%s' % vm)
    wait(driver, lambda d: used_of(d, 'VCPU') == before)


def test_project_id_with_a_slash(page, world):
    driver, _ = page
    api, w = world
    vm = str(uuid.uuid4())
    api('PUT', '/allocations/%s' % vm, {
        'allocations': {w['cn2']: {'resources': {'VCPU': 1}}},
        'project_id': 'dept/team-a', 'user_id': 'bob',
        'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    try:
        connected(driver)
        driver.get(driver.current_url.split('#')[0] + '#consumer/' + vm)
        wait(driver, EC.presence_of_element_located(
            (By.ID, 'consumer-detail')))
        assert driver.find_element(By.ID, 'consumer-project').text == (
            'dept/team-a')
        driver.find_element(By.CSS_SELECTOR, '#consumer-project a').click()
        wait(driver, EC.presence_of_element_located((By.ID, 'usages-table')))
        assert driver.find_element(By.ID, 'usages-who').text == 'dept/team-a'
        assert driver.find_element(By.ID, 'usages-user').get_attribute(
            'value') == ''
        # The next project typed is that project alone (no stale user).
        _run(driver, 'usages-project', PROJECT)
        wait(driver, lambda d: d.find_element(
            By.ID, 'usages-who').text == PROJECT)
        assert driver.find_element(
            By.CSS_SELECTOR, '#usages-table tr[data-type="INSTANCE"]')
    finally:
        api('DELETE', '/allocations/%s' % vm)


def test_percent_in_the_consumer_box(page, world):
    driver, _ = page
    _api, w = world
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Consumer').click()
    _run(driver, 'consumer-id', w['vm2'])
    wait(driver, EC.presence_of_element_located((By.ID, 'consumer-detail')))
    _run(driver, 'consumer-id', '50%')
    wait(driver, EC.presence_of_element_located((By.ID, 'consumer-none')))
    assert driver.find_element(By.ID, 'consumer-none').text == (
        'Consumer 50% has no allocations.')
    assert driver.find_elements(By.ID, 'consumer-detail') == []


def test_switching_tokens_and_disconnect(page, world):
    """A token refused after an admin's: nothing the admin saw stays."""
    driver, expected = page
    expected.append('status of 403')
    _api, w = world
    connected(driver)
    open_provider(driver, w['cn2'])
    connect(driver, 'user:project')
    wait(driver, lambda d: 'refused' in d.find_element(By.ID, 'status').text)
    assert tree_rows(driver) == []
    assert driver.find_elements(By.ID, 'provider-detail') == []
    assert not driver.find_element(By.ID, 'disconnect').is_displayed()
    # Back as admin, then Disconnect: the data and the token are gone.
    connected(driver)
    open_provider(driver, w['cn2'])
    driver.find_element(By.ID, 'disconnect').click()
    assert driver.find_element(By.ID, 'status').text == 'Disconnected.'
    assert tree_rows(driver) == []
    assert driver.find_elements(By.ID, 'provider-detail') == []
    assert driver.find_element(By.ID, 'token').get_attribute('value') == ''
    assert driver.execute_script(
        'return sessionStorage.getItem("placement-ui-token")') is None
    assert focused(driver, 'id') == 'token'


def test_filters_go_with_the_session(page, world):
    """A search and filters typed in one session do not narrow the next
    one's tree (the boxes are cleared, and so is what they filtered)."""
    driver, _ = page
    connected(driver)
    driver.find_element(By.ID, 'search').send_keys('compute-2')
    select(driver, 'filter-agg', AGG)
    driver.find_element(By.ID, 'filter-pct').send_keys('1')
    wait(driver, lambda d: row_names(d) == ['compute-2'])
    driver.find_element(By.ID, 'disconnect').click()
    for id_ in ('search', 'filter-pct', 'filter-agg'):
        assert driver.find_element(By.ID, id_).get_attribute('value') == ''
    connected(driver)
    wait(driver, lambda d: row_names(d) == ['compute-1', 'compute-2'])
    assert driver.find_element(By.ID, 'tree-count').text == (
        '4 providers, 2 trees')


def freshness(driver):
    return driver.find_element(By.ID, 'freshness').text


def test_live_across_api_nodes_and_server_gone(driver, chromium, server,
                                               world):
    """The page on a second API node over the same database: a write made
    on the first shows within seconds; the second node stopping makes the
    page say its data is stale, and it recovers when the node is back."""
    api, w = world
    with live_server.LiveServer(workers=1, db_url=server.db_url
                                or server.db.url) as node2:
        port = node2.port
        driver.get(node2.url + '/ui/')
        driver.execute_script(
            'sessionStorage.setItem("placement-ui-token", "admin")')
        driver.get(node2.url + '/ui/#provider/' + w['cn2'])
        driver.refresh()
        wait(driver, EC.presence_of_element_located(
            (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % w['cn2'])))
        before = used_of(driver, 'VCPU')
        vm = str(uuid.uuid4())
        api.allocate(vm, {w['cn2']: {'VCPU': 3}})
        try:
            wait(driver, lambda d: used_of(d, 'VCPU') == before + 3)
        finally:
            api('DELETE', '/allocations/%s' % vm)
        node2.stop()
        wait(driver, lambda d: 'unreachable' in freshness(d))
        assert 'data as of' in freshness(driver)
        assert 'stale' in freshness(driver)
        browser.screenshot(driver, 'stale')
        # The write made while it was away shows once it is back.
        node2.port = port
        node2.db_url = server.db_url or server.db.url
        node2.start()
        wait(driver, lambda d: freshness(d).startswith('as of '), timeout=20)
        wait(driver, lambda d: used_of(d, 'VCPU') == before)
    driver.get('about:blank')


def test_why_not_more_is_shown_where_asked(page, world):
    driver, _ = page
    api, _w = world
    connected(driver)
    driver.set_window_size(1400, 420)
    try:
        driver.find_element(By.LINK_TEXT, 'Allocation candidates').click()
        query = 'resources=VCPU:1&member_of=%s' % AGG
        _run(driver, 'candidates-query', query)
        wait(driver, EC.presence_of_element_located(
            (By.ID, 'candidates-table')))
        driver.find_element(By.ID, 'explain-button').click()
        wait(driver, EC.presence_of_element_located((By.ID, 'explanation')))
        assert focused(driver, 'id') == 'explanation-heading'
        top = driver.execute_script(
            'return document.getElementById("explanation")'
            '.getBoundingClientRect().top')
        assert 0 <= top < 420
        explained = api('GET', '/ops/explain/allocation_candidates?' + query)
        reasons = [li.text for li in driver.find_elements(
            By.CSS_SELECTOR, '#explain-reasons li')]
        assert reasons == [e['reason'] for e in explained['explained']
                           if not e['kept']]
        assert not any(r.endswith(': kept') for r in reasons)
    finally:
        driver.set_window_size(1400, 900)


def test_click_on_a_name_expands(page, world):
    driver, _ = page
    _api, w = world
    connected(driver)
    click_row(driver, w['cn1'], 'name')
    wait(driver, lambda d: len(row_names(d)) == 4)
    assert row_attr(driver, w['cn1'], 'aria-expanded') == 'true'
    wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % w['cn1'])))


def test_names_readable_at_800_pixels(page, world):
    driver, _ = page
    _api, w = world
    driver.set_window_size(800, 900)
    try:
        connected(driver)
        click_row(driver, w['cn1'], 'toggle')
        wait(driver, lambda d: len(row_names(d)) == 4)
        cut = driver.execute_script(
            'return [...document.querySelectorAll("#tree .row .name")]'
            '.filter((e) => e.scrollWidth > e.clientWidth)'
            '.map((e) => e.textContent)')
        assert cut == []
        browser.screenshot(driver, 'narrow')
    finally:
        driver.set_window_size(1400, 900)


def test_small_bars_turn_red_when_nearly_full(page, world):
    driver, _ = page
    api, w = world
    vm = str(uuid.uuid4())
    # compute-2: (32 - 2) x 4 = 120 VCPU, 10 in use; 103 more is 94%.
    api.allocate(vm, {w['cn2']: {'VCPU': 103}})
    try:
        connected(driver)
        open_provider(driver, w['cn2'])
        colours = driver.execute_script('''
            const row = document.getElementById("rp-" + arguments[0]);
            const mini = [...row.querySelectorAll('.mini-wrap')].find(
                (m) => m.title.startsWith('VCPU ')).querySelector(
                '.mini > span');
            const big = document.querySelector(
                '#provider-detail .res[data-rc="VCPU"] .used');
            return [getComputedStyle(mini).backgroundColor,
                    getComputedStyle(big).backgroundColor];''', w['cn2'])
        assert colours[0] == colours[1] == 'rgb(179, 38, 30)'
    finally:
        api('DELETE', '/allocations/%s' % vm)


def test_noauth2_hint_only_under_noauth2(page, server, world):
    driver, _ = page
    wait(driver, lambda d: 'noauth2' in d.find_element(
        By.TAG_NAME, 'header').text)
    with live_server.LiveServer(workers=1, db_url=server.db_url
                                or server.db.url,
                                conf={'api': {'auth_strategy': 'keystone'}}
                                ) as other:
        driver.get(other.url + '/ui/')
        wait(driver, lambda d: d.find_element(By.ID, 'status').text)
        assert 'noauth2' not in driver.find_element(By.TAG_NAME, 'body').text
        driver.get('about:blank')


def test_right_to_left_override_is_isolated(page, world):
    """A name with U+202E reorders nothing after it."""
    driver, _ = page
    api, _w = world
    api('PUT', '/traits/CUSTOM_RLO')
    rp = api.provider('rlo-\u202eevil', inventories={
        'VCPU': {'total': 4}}, traits=['CUSTOM_RLO'])
    try:
        connected(driver)
        driver.find_element(By.LINK_TEXT, 'Allocation candidates').click()
        _run(driver, 'candidates-query',
             'resources=VCPU:1&required=CUSTOM_RLO')
        wait(driver, EC.presence_of_element_located(
            (By.ID, 'candidates-table')))
        v, u = driver.execute_script('''
            const cell = document.querySelector(
                '#candidates-table tbody td:nth-child(2) div');
            const text = [...cell.childNodes].find((n) => n.nodeType === 3);
            const r = document.createRange();
            const left = (i) => { r.setStart(text, i); r.setEnd(text, i + 1);
                                  return r.getBoundingClientRect().left; };
            return [left(1), left(4)];''')
        assert v < u    # " VCPU: 1" reads left to right
    finally:
        api('DELETE', '/resource_providers/%s' % rp)


# --- finding capacity --------------------------------------------------------


def test_filters_sort_and_tree_rollups(page, world):
    driver, _ = page
    api, w = world
    connected(driver)
    # compute-1 has only DISK_GB of its own; collapsed, its row shows what
    # its tree holds (the NUMA children's VCPU and memory too).
    wait(driver, lambda d: d.execute_script(
        'return [...document.querySelectorAll("#rp-" + arguments[0] + '
        '" .mini-wrap")].map((m) => m.dataset.rc)', w['cn1']) == [
        'DISK_GB', 'MEMORY_MB', 'VCPU'])
    open_provider(driver, w['cn1'])
    numa_used = sum(api('GET', '/resource_providers/%s/usages' % n)[
        'usages']['VCPU'] for n in w['numa'])
    assert used_of(driver, 'VCPU', '#tree-resources') == numa_used
    # A root's trait and aggregates hold for its tree (as required and
    # member_of read it): compute-1's NUMA cells match too.
    select(driver, 'filter-trait', 'CUSTOM_GOLD')
    wait(driver, lambda d: row_names(d) == [
        'compute-1', 'compute-1-numa0', 'compute-1-numa1'])
    select(driver, 'filter-trait', '')
    select(driver, 'filter-agg', AGG)
    wait(driver, lambda d: row_names(d) == [
        'compute-1', 'compute-1-numa0', 'compute-1-numa1', 'compute-2'])
    select(driver, 'filter-agg', '')
    select(driver, 'filter-rc', 'VCPU')
    wait(driver, lambda d: row_names(d) == [
        'compute-1', 'compute-1-numa0', 'compute-1-numa1', 'compute-2'])
    assert driver.find_element(By.ID, 'tree-count').text == (
        '3 of 4 providers match, in 2 trees')
    # numa0: 4 of 64 VCPU; compute-2: 8 + 2 of 120; numa1: none.
    box = driver.find_element(By.ID, 'filter-pct')
    box.send_keys('6')
    wait(driver, lambda d: row_names(d) == ['compute-1', 'compute-1-numa0',
                                            'compute-2'])
    box.send_keys(Keys.BACKSPACE, '7')
    wait(driver, lambda d: row_names(d) == ['compute-2'])
    box.send_keys(Keys.BACKSPACE)
    select(driver, 'filter-rc', '')
    # By usage: a tree is as full as its fullest provider: compute-1's
    # numa0 (memory 8,192 of 32,256, 25%) over compute-2 (memory 18,432
    # of 130,048, 14%); over VCPU alone, compute-2 (10 of 120, 8%) over
    # compute-1's numa0 (4 of 64, 6%).
    select(driver, 'sort', 'usage')
    # (compute-1 is open: clicked above.)
    wait(driver, lambda d: row_names(d) == [
        'compute-1', 'compute-1-numa0', 'compute-1-numa1', 'compute-2'])
    select(driver, 'filter-rc', 'VCPU')
    wait(driver, lambda d: row_names(d) == [
        'compute-2', 'compute-1', 'compute-1-numa0', 'compute-1-numa1'])
    select(driver, 'filter-rc', '')
    select(driver, 'sort', 'name')
    wait(driver, lambda d: row_names(d) == [
        'compute-1', 'compute-1-numa0', 'compute-1-numa1', 'compute-2'])
    browser.screenshot(driver, 'providers')


def test_totals_and_aggregates(page, world):
    driver, _ = page
    api, w = world
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Totals').click()
    wait(driver, EC.presence_of_element_located((By.ID, 'totals-table')))
    sums = {}
    for rp in api('GET', '/resource_providers')['resource_providers']:
        invs = api('GET', '/resource_providers/%s/inventories'
                   % rp['uuid'])['inventories']
        usages = api('GET', '/resource_providers/%s/usages'
                     % rp['uuid'])['usages']
        for rc, inv in invs.items():
            s = sums.setdefault(rc, dict(total=0, reserved=0, capacity=0,
                                         used=0))
            s['total'] += inv['total']
            s['reserved'] += inv['reserved']
            s['capacity'] += (inv['total'] - inv['reserved']) * inv[
                'allocation_ratio']
            s['used'] += usages[rc]
    for rc, s in sums.items():
        for k, v in s.items():
            cell = driver.find_element(
                By.CSS_SELECTOR, '#totals-table tr[data-rc="%s"] '
                'td[data-k="%s"]' % (rc, k))
            assert cell.text == '{:,}'.format(int(v)), (rc, k)
    browser.screenshot(driver, 'totals')
    driver.find_element(By.LINK_TEXT, 'Aggregates').click()
    row = wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#aggregates-table tr[data-aggregate="%s"]'
         % AGG)))
    assert row.find_element(By.CSS_SELECTOR, 'td.num').text == '2'
    row.find_element(By.TAG_NAME, 'a').click()
    wait(driver, EC.presence_of_element_located(
        (By.ID, 'aggregate-members')))
    members = [r.get_attribute('data-uuid') for r in driver.find_elements(
        By.CSS_SELECTOR, '#aggregate-members tbody tr')]
    assert members == [w['cn1'], w['cn2']]
    disk = driver.find_element(
        By.CSS_SELECTOR, '#aggregate-totals tr[data-rc="DISK_GB"] '
        'td[data-k="capacity"]').text
    assert disk == '{:,}'.format(900 + 2000)
    browser.screenshot(driver, 'aggregate')


# --- issue 49: answers of an ended session, and smaller bugs -----------------


def delay_answers(driver, pattern, ms):
    """Hold each answer whose URL matches ``pattern`` (a regular
    expression) ``ms`` before the page reads it: a slow server, made in the
    test's browser alone (the page's fetch wrapped), the product untouched.
    ``window.heldAnswers`` counts the answers let through."""
    driver.execute_script('''
        const re = new RegExp(arguments[0]), ms = arguments[1];
        const real = window.fetch;
        window.heldAnswers = 0;
        window.fetch = (input, init) => real(input, init).then((resp) =>
          !re.test(String(input)) ? resp : new Promise((ok) => setTimeout(
            () => { window.heldAnswers += 1; ok(resp); }, ms)));''',
                          pattern, ms)


def fail_fetches(driver, pattern):
    """Requests whose URL matches ``pattern`` fail as they do when the
    server is down (a network error), in this page only."""
    driver.execute_script('''
        const re = new RegExp(arguments[0]), real = window.fetch;
        window.fetch = (input, init) => re.test(String(input))
          ? Promise.reject(new TypeError('Failed to fetch'))
          : real(input, init);''', pattern)


def text_of(driver, id_):
    return driver.execute_script(
        'return document.getElementById(arguments[0]).textContent', id_)


def value_of(driver, id_):
    return driver.find_element(By.ID, id_).get_attribute('value')


def test_nothing_answered_after_disconnect_or_another_token_is_drawn(
        page, world):
    """Lookups in flight when Disconnect is pressed, or another token
    connects: their answers are dropped, whatever view asked."""
    driver, expected = page
    expected.append('status of 403')
    _api, w = world
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Allocation candidates').click()
    query = 'resources=VCPU:1&member_of=%s' % AGG
    _run(driver, 'candidates-query', query)
    wait(driver, EC.presence_of_element_located((By.ID, 'explain-button')))
    delay_answers(driver, r'/allocations/|/usages\?|/allocation_candidates\?'
                  r'|/ops/explain/|/ops/capacity\?', 1500)
    # Explain, then a consumer, usages, capacity and candidates in flight.
    driver.execute_script(
        'window.explainBox = document.getElementById("explain-result");')
    driver.find_element(By.ID, 'explain-button').click()
    for hash_, box in (('consumer/' + w['vm2'], 'consumer-result'),
                       ('usages/%s/%s' % (PROJECT, USER), 'usages-result'),
                       ('capacity?resources=VCPU:1', 'capacity-result'),
                       ('candidates?resources=VCPU:2', 'candidates-result')):
        driver.execute_script('location.hash = arguments[0]', hash_)
        wait(driver, lambda d, box=box: text_of(d, box).endswith('…'))
    driver.find_element(By.ID, 'disconnect').click()
    wait(driver, lambda d: d.execute_script(
        'return window.heldAnswers') == 5)
    driver.execute_script('return 1')
    drawn = {box: text_of(driver, box) for box in (
        'consumer-result', 'usages-result', 'capacity-result',
        'candidates-result')}
    assert drawn == dict.fromkeys(drawn, '')
    assert driver.find_elements(By.ID, 'provider-detail') == []
    assert driver.execute_script('return window.explainBox.textContent') \
        == 'Explaining…'
    assert driver.find_element(By.ID, 'status').text == 'Disconnected.'
    # Nor do the boxes and the address keep the last session's ids.
    for box in ('consumer-id', 'usages-project', 'usages-user'):
        assert value_of(driver, box) == '', box
    assert driver.execute_script('return location.hash') == ''
    # Another token (refused) while a consumer's answer is on its way.
    connected(driver)
    delay_answers(driver, r'/allocations/', 1500)
    driver.execute_script('location.hash = arguments[0]',
                          'consumer/' + w['vm2'])
    wait(driver, lambda d: text_of(d, 'consumer-result') == 'Loading…')
    connect(driver, 'nobody')
    wait(driver, lambda d: 'refused' in d.find_element(By.ID, 'status').text)
    wait(driver, lambda d: d.execute_script(
        'return window.heldAnswers') == 1)
    driver.execute_script('return 1')
    assert text_of(driver, 'consumer-result') == ''


def test_usages_heading_names_the_user(page, world):
    driver, _ = page
    connected(driver)
    driver.get(driver.current_url.split('#')[0] + '#usages/%s/%s' % (
        PROJECT, USER))
    wait(driver, EC.presence_of_element_located((By.ID, 'usages-table')))
    assert driver.find_element(By.CSS_SELECTOR, '#usages-result h2').text \
        == 'Usages of project %s (user %s)' % (PROJECT, USER)


def test_connected_page_does_not_ask_for_a_token(page, world):
    driver, _ = page
    assert 'Connect with a token' in text_of(driver, 'detail')
    connected(driver)
    assert text_of(driver, 'detail') == 'Pick a provider.'


def test_rows_with_many_classes_keep_uuid_and_sigma(page, world):
    """Six classes in a tree do not fit a row at 1,000 pixels: bars that
    do not fit are left out whole; the uuid and the Σ stay."""
    driver, _ = page
    api, _w = world
    classes = ['VCPU', 'MEMORY_MB', 'DISK_GB', 'SRIOV_NET_VF', 'PCI_DEVICE',
               'IPV4_ADDRESS']
    root = api.provider('wide', inventories={
        rc: {'total': 8} for rc in classes[:4]})
    kid = api.provider('wide-child', parent=root, inventories={
        rc: {'total': 8} for rc in classes[4:]})
    driver.set_window_size(1000, 900)
    try:
        connected(driver)
        wait(driver, lambda d: row_attr(d, root, 'data-uuid'))
        seen = driver.execute_script('''
            const row = document.getElementById("rp-" + arguments[0]);
            const box = (el) => el.getBoundingClientRect();
            const within = (a, b) => a.width > 0 && a.left >= b.left - 0.5
              && a.right <= b.right + 0.5 && a.top >= b.top - 0.5
              && a.bottom <= b.bottom + 0.5;
            const apart = (a, b) => a.right <= b.left || a.left >= b.right
              || a.bottom <= b.top || a.top >= b.bottom;
            const r = box(row), m = box(row.querySelector('.minis'));
            const uuid = row.querySelector('.uuid');
            const sigma = row.querySelector('.sigma');
            const bars = [...row.querySelectorAll('.mini-wrap')].map(box);
            return {
              uuid: within(box(uuid), r) &&
                uuid.scrollWidth <= uuid.clientWidth,
              sigma: within(box(sigma), m) && within(m, r),
              shown: bars.filter((b) => within(b, m)).length,
              cut: bars.filter((b) => !within(b, m) && !apart(b, m)).length,
              all: bars.length,
            };''', root)
        assert seen['uuid'] and seen['sigma'], seen
        assert seen['all'] == 6 and 0 < seen['shown'] < 6, seen
        assert seen['cut'] == 0, seen
        browser.screenshot(driver, 'many-classes')
    finally:
        driver.set_window_size(1400, 900)
        api('DELETE', '/resource_providers/%s' % kid)
        api('DELETE', '/resource_providers/%s' % root)


def test_details_kept_when_their_refresh_fails(page, world):
    """The server gone while a provider is picked: its details stay, from
    memory, with a note that the refresh failed."""
    driver, _ = page
    _api, w = world
    connected(driver)
    open_provider(driver, w['cn2'])
    fail_fetches(driver, '/consumers')
    click_row(driver, w['cn2'])
    note = wait(driver, EC.presence_of_element_located(
        (By.ID, 'detail-refresh-failed')))
    assert note.text.startswith('Refresh failed'), note.text
    assert driver.find_element(By.ID, 'provider-detail').get_attribute(
        'data-uuid') == w['cn2']
    links = driver.find_elements(By.CSS_SELECTOR, '#consumers td.consumer a')
    assert sorted(a.text for a in links) == sorted([w['vm2'], w['mig']])
    # Another provider: what memory holds of it; its consumers unknown.
    click_row(driver, w['cn1'])
    wait(driver, EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#provider-detail[data-uuid="%s"]' % w['cn1'])))
    assert driver.find_elements(By.ID, 'detail-refresh-failed')
    assert driver.find_elements(By.CSS_SELECTOR, '#own-resources .res')
    assert 'Request failed' not in text_of(driver, 'detail')


def test_consumer_id_with_a_slash_has_no_allocations(page, world):
    driver, expected = page
    expected.append('status of 404')
    connected(driver)
    driver.find_element(By.LINK_TEXT, 'Consumer').click()
    _run(driver, 'consumer-id', 'a/b')
    wait(driver, lambda d: text_of(d, 'consumer-result') not in (
        '', 'Loading…'))
    assert text_of(driver, 'consumer-result') == (
        'Consumer a/b has no allocations.')


def test_aggregate_links_are_percent_encoded(page, server, world):
    """An aggregate id with "/", "#", "?" and "%" in it (written straight
    to the database: the API takes uuids only) links to itself."""
    import sqlalchemy as sa
    from placement.db import models
    _api, w = world
    driver, _ = page
    odd = 'grp/a#b?c%d'
    engine = server.db.engine
    with engine.begin() as conn:
        conn.execute(models.AGG.insert(), [{'uuid': odd}])
        agg_id = conn.execute(sa.select(models.AGG.c.id).where(
            models.AGG.c.uuid == odd)).scalar()
        rp_id = conn.execute(sa.select(models.RP.c.id).where(
            models.RP.c.uuid == w['cn2'])).scalar()
        conn.execute(models.RPA.insert(), [
            {'resource_provider_id': rp_id, 'aggregate_id': agg_id}])
    try:
        connected(driver)
        open_provider(driver, w['cn2'])
        link = next(a for a in driver.find_elements(
            By.CSS_SELECTOR, '#aggregates a') if a.text == odd)
        link.click()
        wait(driver, EC.presence_of_element_located(
            (By.ID, 'aggregate-members')))
        assert driver.find_element(
            By.CSS_SELECTOR, '#aggregate-detail h2').text == (
            'Aggregate ' + odd)
        members = [r.get_attribute('data-uuid') for r in driver.find_elements(
            By.CSS_SELECTOR, '#aggregate-members tbody tr')]
        assert members == [w['cn2']]
        driver.find_element(By.LINK_TEXT, 'All aggregates').click()
        row = wait(driver, EC.presence_of_element_located(
            (By.CSS_SELECTOR, '#aggregates-table tr[data-aggregate="%s"]'
             % odd)))
        assert row.find_element(By.TAG_NAME, 'a').get_attribute(
            'href').endswith('#aggregate/grp%2Fa%23b%3Fc%25d')
    finally:
        with engine.begin() as conn:
            conn.execute(models.RPA.delete().where(
                models.RPA.c.aggregate_id == agg_id))
            conn.execute(models.AGG.delete().where(
                models.AGG.c.id == agg_id))
