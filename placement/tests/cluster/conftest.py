"""Shared by the tests on database clusters (run by tools/run-cluster-tests).

Each test module brings up its own cluster with its own script in tools/
(a module-scoped fixture around ``script_cluster``) and tears it down
again, so a new kind of cluster is one more module and one more script.
``report(line)`` keeps a line of figures for the end of the run: pytest
prints them after its summary (counts of writes, retries, latencies).
"""
import contextlib
import os
import subprocess

from placement.tests.functional import live_server

REPO = live_server.REPO_ROOT
_REPORT = []


def report(line):
    """Print ``line`` in the terminal summary of this run."""
    _REPORT.append(line)


def report_server_errors(servers, first=3):
    """Keep the first ``first`` distinct errors each server logged (the
    ERROR line and its traceback), so that a 500 in a cluster run says
    why in the run's own output."""
    for server in servers:
        seen = []
        block = None
        for line in server.log_text().splitlines():
            if ' ERROR ' in line or line.startswith('Traceback'):
                block = [line]
                seen.append(block)
            elif block is not None and (line.startswith((' ', '\t'))
                                        or 'Error' in line.split(':')[0]):
                block.append(line)
            else:
                block = None
        distinct = {}
        for b in seen:
            distinct.setdefault(b[-1], b)
        for b in list(distinct.values())[:first]:
            report('errors logged by API node %s (%d in all):'
                   % (server.url, len(seen)))
            for line in b[-25:]:
                report('    ' + line)


def pytest_terminal_summary(terminalreporter):
    if _REPORT:
        terminalreporter.section('cluster test figures')
        for line in _REPORT:
            terminalreporter.write_line(line)


def run_script(script, *args, timeout=600):
    """Run tools/``script`` with ``args``; its stdout's ``KEY=VALUE``
    lines as a dict. Fails with the script's output when it fails."""
    out = subprocess.run([os.path.join(REPO, 'tools', script)] + list(args),
                         capture_output=True, text=True, timeout=timeout,
                         stdin=subprocess.DEVNULL)
    if out.returncode:
        raise RuntimeError('tools/%s %s: exit %s\n%s%s' % (
            script, ' '.join(args), out.returncode, out.stdout, out.stderr))
    values = {}
    for line in out.stdout.splitlines():
        key, sep, value = line.partition('=')
        if sep:
            values[key.strip()] = value.strip()
    return values


@contextlib.contextmanager
def script_cluster(script, up=('up',), down=('down',)):
    """A cluster that tools/``script`` brings up and tears down; yields
    what ``up`` printed as ``KEY=VALUE`` lines."""
    try:
        yield run_script(script, *up)
    finally:
        run_script(script, *down)
