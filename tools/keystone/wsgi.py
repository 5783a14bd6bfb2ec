"""Keystone's WSGI application for gunicorn.

``keystone.wsgi.api`` parses ``sys.argv`` as oslo.config command-line
arguments when imported, and gunicorn's own arguments are no keystone
options; so the import happens with an empty command line. The config file
comes from ``OS_KEYSTONE_CONFIG_DIR`` (tools/keystone/server.py sets it).
"""
import sys

_argv = sys.argv
sys.argv = [_argv[0]]
try:
    from keystone.wsgi.api import application  # noqa: F401
finally:
    sys.argv = _argv
