"""Rules of the operator extensions (not in upstream): metrics and the
capacity report. Admin by default; a deployer opens /metrics to a scraper
with e.g. ``"placement:metrics:read": "role:metrics"`` or ``"@"``
(anyone, no token needed) without opening the API."""
from placement.policies import base

METRICS_READ = 'placement:metrics:read'
CAPACITY_READ = 'placement:capacity:read'

rules = [
    base.documented(METRICS_READ, base.RULE_ADMIN_API,
                    'Scrape the Prometheus metrics.', [('GET', '/metrics')]),
    base.documented(CAPACITY_READ, base.RULE_ADMIN_API,
                    'Report how many more requests of a kind fit.',
                    [('GET', '/ops/capacity')]),
]


def list_rules():
    return rules
