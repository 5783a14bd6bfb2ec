"""The WSGI entry point deployers name: ``placement.wsgi.api:application``.

Config comes from ``$OS_PLACEMENT_CONFIG_DIR/placement.conf`` when that is
set, otherwise oslo.config's usual places; every option can be overridden
with ``OS_<GROUP>__<OPTION>`` environment variables.
"""
import gc
import threading

from placement.wsgi import turns

with turns.turn():
    from placement import conf as placement_conf
    from placement import deploy

_LOCK = threading.Lock()
_APP = None

# Allocations, less deallocations, of container objects between two young
# collections (CPython's default: 700). One flat allocation-candidates
# answer holds a few thousand small dicts alive while it is built, so the
# default collects two or three times per request, each time walking all of
# them and finding no garbage (0.2 ms per request). Requests free what they
# built by reference counting; cycles wait a little longer.
YOUNG_COLLECTION_THRESHOLD = 20000


def init_application():
    conf = placement_conf.build_conf(logging_setup=True)
    app = deploy.loadapp(conf)
    # What the app built at start-up (policies, schemas, trait lists, SQL
    # metadata) lives as long as the process: move it out of the cyclic
    # collector's sight, so collections during requests stay short (2-3 ms
    # less per large allocation-candidates answer).
    gc.freeze()
    tune_gc()
    return app


def tune_gc():
    """Collect the young generation less often; older ones keep their
    ratios to it."""
    _young, *older = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *older)


def _get_app():
    global _APP
    if _APP is None:
        with _LOCK:
            if _APP is None:
                _APP = init_application()
    return _APP


def application(environ, start_response):
    """Build the app on first use, so importing this module stays cheap.

    A database that is away while the app is built (a worker booting
    during an outage) answers 503, like any request during an outage, and
    the next request tries again.
    """
    try:
        app = _get_app()
    except Exception as exc:
        from placement import fault_wrap
        if not fault_wrap.is_db_unavailable(exc, starting=True):
            raise
        fault_wrap.LOG.warning('Database unavailable at start-up: %s', exc)
        return fault_wrap.unavailable_response()(environ, start_response)
    return app(environ, start_response)
