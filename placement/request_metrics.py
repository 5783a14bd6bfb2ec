"""Request metrics for /metrics: a latency histogram and a counter per
route template, method and status, and a counter of requests the database
failed. Added by deploy only when ``[metrics] enabled``.

Under several worker processes prometheus_client's multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR`` set in the environment before the workers
start) keeps the values in files the scrape adds up; without it each
process counts alone.
"""
import os
import time

import prometheus_client
from prometheus_client import multiprocess

# Environ keys: the route template the handler matched (a path that
# matches none is 'unmatched', see handler.route_template), and the kind
# of database failure the fault barrier turned into an answer.
ENV_ROUTE = 'placement.route'
ENV_DB_ERROR = 'placement.db_error'

REQUESTS = prometheus_client.Counter(
    'placement_http_requests', 'HTTP requests answered.',
    ['route', 'method', 'status'])
LATENCY = prometheus_client.Histogram(
    'placement_http_request_duration_seconds',
    'Time to answer an HTTP request, until the body is ready.',
    ['route', 'method'],
    buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5,
             10))
DB_ERRORS = prometheus_client.Counter(
    'placement_database_errors',
    'Requests that failed because of the database, by kind.', ['kind'])


def multiprocess_dir():
    return (os.environ.get('PROMETHEUS_MULTIPROC_DIR')
            or os.environ.get('prometheus_multiproc_dir'))


def collect_into(registry):
    """Add this service's request metrics (of all workers, in
    multiprocess mode) to a per-scrape ``registry``."""
    if multiprocess_dir():
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Process())


class _Process:
    """This process's metrics (the default registry: request metrics plus
    prometheus_client's process and Python collectors)."""

    def collect(self):
        return prometheus_client.REGISTRY.collect()


class RequestMetrics:
    """Outermost middleware: time and count every answer."""

    def __init__(self, application, route_of):
        self.application = application
        self.route_of = route_of

    def __call__(self, environ, start_response):
        start = time.perf_counter()
        status = []

        def recording_start_response(status_line, headers, exc_info=None):
            status.append(status_line[:3])
            return start_response(status_line, headers, exc_info)

        try:
            return self.application(environ, recording_start_response)
        finally:
            elapsed = time.perf_counter() - start
            route = environ.get(ENV_ROUTE) or self.route_of(environ)
            method = environ.get('REQUEST_METHOD', '')
            REQUESTS.labels(route, method,
                            status[0] if status else '500').inc()
            LATENCY.labels(route, method).observe(elapsed)
            kind = environ.get(ENV_DB_ERROR)
            if kind:
                DB_ERRORS.labels(kind).inc()
