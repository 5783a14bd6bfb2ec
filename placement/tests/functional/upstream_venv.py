"""The virtualenvs of upstream's code that comparisons run against.

``tools/bootstrap-upstream-venv`` builds them inside the repository
(``.upstream-venv/``: openstack-placement 16.0.0 with the database drivers
and gunicorn; ``.placeload-venv/``: placeload 0.3.0), gitignored like
``.venv``, so a fresh clone needs nothing but the network once. The
differential tests and the benchmark scripts all come through here.
"""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
BOOTSTRAP = os.path.join(ROOT, 'tools', 'bootstrap-upstream-venv')


class Unavailable(Exception):
    """The venv could not be built (no network, no python3-venv)."""


def path(name='upstream'):
    """Where the venv ``name`` lives (built or not)."""
    return os.path.join(ROOT, '.%s-venv' % name)


def executable(name, program='python'):
    return os.path.join(path(name), 'bin', program)


def ensure(name='upstream', show=False):
    """Build the venv ``name`` unless it is there already; its path.

    ``show`` lets the build's progress through to our stderr (benches);
    otherwise its tail goes into the exception."""
    try:
        proc = subprocess.run(
            [BOOTSTRAP, name], stdout=subprocess.PIPE,
            stderr=None if show else subprocess.PIPE, text=True)
    except OSError as e:
        raise Unavailable('cannot run %s: %s' % (BOOTSTRAP, e))
    if proc.returncode:
        tail = (proc.stderr or '').strip().splitlines()[-8:]
        raise Unavailable('tools/bootstrap-upstream-venv %s failed (exit %d)'
                          '%s' % (name, proc.returncode,
                                  ''.join('\n  ' + line for line in tail)))
    return proc.stdout.strip()


def in_ci():
    return os.environ.get('CI', '').lower() in ('1', 'true', 'yes')


def require(name='upstream'):
    """For tests: build the venv or stop the test. In CI a comparison that
    cannot run is a failure; elsewhere (say, offline) a skip that says
    why."""
    import pytest
    try:
        return ensure(name)
    except Unavailable as e:
        reason = 'upstream venv unavailable: %s' % e
        if in_ci():
            pytest.fail(reason + '\n(CI is set: the comparison with '
                        'upstream must run)', pytrace=False)
        pytest.skip(reason)
