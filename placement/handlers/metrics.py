"""GET /metrics: Prometheus exposition (an extension; upstream has none).

The placement gauges carry openstack-exporter's names and labels
(``openstack_placement_resource_*{hostname, resourcetype}`` and
``openstack_placement_up``), so dashboards and alert rules written for it
keep working; they are read from the database at each scrape. The
service's own request metrics follow (see placement.request_metrics).
"""
from oslo_log import log as logging
import prometheus_client
from prometheus_client import exposition
from prometheus_client import metrics_core
import webob
import webob.exc

from placement import exception
from placement.objects import metrics as metrics_obj
from placement.policies import ops as policies
from placement import request_metrics
from placement import util

LOG = logging.getLogger(__name__)

_LABELS = ['hostname', 'resourcetype']
# (family suffix, help, index of the value in an inventory_usage row)
_GAUGES = [
    ('resource_total', 'Total of the resource class on the provider.', 2),
    ('resource_usage', 'Amount of the resource class allocated.', 5),
    ('resource_reserved', 'Reserved amount of the resource class.', 3),
    ('resource_allocation_ratio', 'Allocation ratio of the resource '
     'class.', 4),
]


class _Placement:
    """The openstack_placement_* families from one read of the database;
    ``rows`` is None when that read failed (up = 0)."""

    def __init__(self, rows):
        self.rows = rows

    def collect(self):
        up = metrics_core.GaugeMetricFamily(
            'openstack_placement_up',
            'Whether the placement database could be read.',
            value=0 if self.rows is None else 1)
        yield up
        if self.rows is None:
            return
        for suffix, text, index in _GAUGES:
            family = metrics_core.GaugeMetricFamily(
                'openstack_placement_' + suffix, text, labels=_LABELS)
            for row in self.rows:
                # A provider without a name is labelled by nothing better.
                family.add_metric((row[0] or '', row[1]), row[index])
            yield family


def _read(context):
    try:
        return metrics_obj.inventory_usage(context)
    except Exception as exc:  # noqa: BLE001 - reported as up = 0
        LOG.warning('Metrics: the database could not be read: %s', exc)
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
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(_Placement(_read(context)))
    request_metrics.collect_into(registry)
    encoder, content_type = exposition.choose_encoder(
        req.headers.get('accept'))
    return webob.Response(body=encoder(registry),
                          content_type=None,
                          headerlist=[('Content-Type', content_type)])
