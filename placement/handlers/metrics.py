"""GET /metrics: Prometheus exposition (an extension; upstream has none).

The placement gauges carry openstack-exporter's names and labels
(``openstack_placement_resource_*{hostname, resourcetype}`` and
``openstack_placement_up``), so dashboards and alert rules written for it
keep working; they are read from the database at each scrape. The
service's own request metrics follow (see placement.request_metrics).

The answer is the Prometheus text format 0.0.4, which every Prometheus
accepts. Everything but the four per-inventory families goes through
prometheus_client's own exposition; those four hold four samples per
inventory (240,000 lines for 20,000 compute nodes) and the library's
generic per-sample formatting would hold a worker for seconds, so they
are rendered here, with the library's float formatting, into the very
bytes the library would write (a test compares them).

The body is streamed a family at a time (at 20,000 nodes it is 20 MB,
which would otherwise sit in the worker two or three times over), and
gzipped when the scraper accepts it, as Prometheus does: 26 times
smaller. prometheus_client compresses at level 9; level 1 is barely
larger and costs a sixth of the time (0.03 s against 0.2 s at 20 MB).
The request histogram therefore times /metrics up to the database read,
not the rendering.
"""
import itertools
import zlib

from oslo_log import log as logging
import prometheus_client
from prometheus_client import exposition
from prometheus_client import metrics_core
from prometheus_client import utils as prom_utils
import webob
import webob.exc

from placement import exception
from placement.objects import metrics as metrics_obj
from placement.policies import ops as policies
from placement import request_metrics
from placement import util

LOG = logging.getLogger(__name__)

CONTENT_TYPE = exposition.CONTENT_TYPE_PLAIN_0_0_4
# (family, help, index of the value in an inventory_usage row)
GAUGES = [
    ('openstack_placement_resource_total',
     'Total of the resource class on the provider.', 2),
    ('openstack_placement_resource_usage',
     'Amount of the resource class allocated.', 5),
    ('openstack_placement_resource_reserved',
     'Reserved amount of the resource class.', 3),
    ('openstack_placement_resource_allocation_ratio',
     'Allocation ratio of the resource class.', 4),
]


def _label(value):
    if '\\' in value or '\n' in value or '"' in value:
        return (value.replace('\\', r'\\').replace('\n', r'\n')
                .replace('"', r'\"'))
    return value


class _Numbers(dict):
    """Value -> the library's rendering, computed once per value."""

    def __missing__(self, value):
        text = self[value] = ' %s\n' % prom_utils.floatToGoString(value)
        return text


def gauge_chunks(rows):
    """The four families in text format 0.0.4, as bytes, one family per
    chunk."""
    # Label sets once per inventory, values once per distinct number.
    labels = ['{hostname="%s",resourcetype="%s"}' % (
        _label(row[0] or ''), _label(row[1])) for row in rows]
    numbers = _Numbers()
    for name, text, index in GAUGES:
        head = '# HELP %s %s\n# TYPE %s gauge\n' % (name, text, name)
        if rows:
            # Each line but the first starts with the name after the
            # previous line's newline: one join per family.
            head += name + name.join([label + numbers[row[index]]
                                      for row, label in zip(rows, labels)])
        yield head.encode('utf-8')


def render_gauges(rows):
    """The four families as one bytes object."""
    return b''.join(gauge_chunks(rows))


def _gzipped(chunks):
    packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for chunk in chunks:
        packed = packer.compress(chunk)
        if packed:
            yield packed
    yield packer.flush()


class _Gauge:
    def __init__(self, name, text, value):
        self.name, self.text, self.value = name, text, value

    def collect(self):
        yield metrics_core.GaugeMetricFamily(self.name, self.text,
                                             value=self.value)


def _up_gauge(up):
    return _Gauge('openstack_placement_up',
                  'Whether the placement database could be read.', up)


def _counted_gauge(counted):
    """0 while the database's change triggers are missing or disabled
    (candidates answered from SQL; the WARNING says where)."""
    return _Gauge('placement_candidates_world_counted',
                  'Whether the database counts its changes, so that '
                  'allocation candidates are answered from memory.',
                  1 if counted else 0)


def _read(context):
    try:
        return metrics_obj.inventory_usage(context)
    except Exception as exc:  # noqa: BLE001 - reported as up = 0
        LOG.warning('Metrics: the database could not be read: %s', exc)
        return None


def _counted(context):
    try:
        return metrics_obj.counts_changes(context)
    except Exception as exc:  # noqa: BLE001 - the family is left out
        LOG.warning('Metrics: whether the database counts its changes '
                    'could not be read: %s', exc)
        return None


@util.wsgify
def scrape(req):
    """200 with the metrics; 401 for an anonymous scraper the policy
    refuses, 403 for a token it refuses."""
    context = req.environ['placement.context']
    try:
        context.can(policies.METRICS_READ, target={})
    except exception.PolicyNotAuthorized:
        if context.user_id is None:
            raise util.http_error(webob.exc.HTTPUnauthorized)
        raise
    rows = _read(context)
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(_up_gauge(0 if rows is None else 1))
    counted = None if rows is None else _counted(context)
    if counted is not None:
        registry.register(_counted_gauge(counted))
    request_metrics.collect_into(registry)
    chunks = [exposition.generate_latest(registry)]
    if rows is not None:
        chunks = itertools.chain(gauge_chunks(rows), chunks)
    headers = [('Content-Type', CONTENT_TYPE), ('Vary', 'Accept-Encoding')]
    if exposition.gzip_accepted(req.headers.get('Accept-Encoding')):
        chunks = _gzipped(chunks)
        headers.append(('Content-Encoding', 'gzip'))
    return webob.Response(app_iter=chunks, content_type=None,
                          headerlist=headers)
