"""The WSGI entry point deployers name: ``placement.wsgi.api:application``.

Config comes from ``$OS_PLACEMENT_CONFIG_DIR/placement.conf`` when that is
set, otherwise oslo.config's usual places; every option can be overridden
with ``OS_<GROUP>__<OPTION>`` environment variables.
"""
import threading

from placement import conf as placement_conf
from placement import deploy

_LOCK = threading.Lock()
_APP = None


def init_application():
    conf = placement_conf.build_conf(logging_setup=True)
    return deploy.loadapp(conf)


def _get_app():
    global _APP
    if _APP is None:
        with _LOCK:
            if _APP is None:
                _APP = init_application()
    return _APP


def application(environ, start_response):
    """Build the app on first use, so importing this module stays cheap."""
    return _get_app()(environ, start_response)
