"""Debian's headless Chromium driven by Selenium, for the web view's tests
and tools/bench-ui.

Chromium and its driver come from apt (packages ``chromium`` and
``chromium-driver``), installed here when missing and we are root; never
downloaded by Selenium itself (the driver's path is given, so Selenium
Manager has nothing to fetch).
"""
import os
import shutil
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
ARTIFACTS = os.path.join(REPO_ROOT, 'artifacts', 'ui')
PACKAGES = ('chromium', 'chromium-driver')


def _found():
    chromium = shutil.which('chromium')
    driver = shutil.which('chromedriver')
    return (chromium, driver) if chromium and driver else None


def _apt_install():
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    cmd = ['apt-get', 'install', '-y', '-q'] + list(PACKAGES)
    if subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL).returncode:
        subprocess.run(['apt-get', 'update', '-q'], env=env,
                       stdin=subprocess.DEVNULL)
        subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL)


def ensure_chromium():
    """(chromium, chromedriver) paths, installing them with apt-get when
    missing and root; None when they cannot be had."""
    found = _found()
    if found is None and hasattr(os, 'geteuid') and os.geteuid() == 0 \
            and shutil.which('apt-get'):
        _apt_install()
        found = _found()
    return found


def new_driver(paths, width=1400, height=900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    chromium, driver = paths
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage',
                '--disable-gpu', '--disable-extensions',
                '--window-size=%d,%d' % (width, height)):
        options.add_argument(arg)
    # Console messages of every level, read back with get_log('browser').
    options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    return webdriver.Chrome(service=Service(executable_path=driver),
                            options=options)


def screenshot(driver, name):
    """Save a PNG under artifacts/ui/ and return its path."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name + '.png')
    driver.save_screenshot(path)
    return path
