"""Run a tools/ script with the project's .venv, from any shell.

The Python scripts of tools/ start with ``#!/usr/bin/env python``, which
is whatever Python the caller's PATH names; they need the packages of
.venv. ``ensure()`` (standard library only) re-runs the script with
.venv's interpreter when it is not the one running, after
tools/bootstrap-venv has made .venv if it is missing.
"""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def ensure():
    venv = os.path.join(REPO, '.venv')
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    subprocess.run(['bash', '-c', '. tools/bootstrap-venv >&2'], cwd=REPO,
                   check=True, stdin=subprocess.DEVNULL)
    script = os.path.abspath(sys.argv[0])
    python = os.path.join(venv, 'bin', 'python')
    os.execv(python, [python, script] + sys.argv[1:])
