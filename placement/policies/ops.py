"""Rules of the operator extensions (not in upstream): metrics, the
capacity report and the explanation of allocation-candidates queries.
Admin by default; a deployer opens /metrics to a scraper with e.g.
``"placement:metrics:read": "role:metrics"`` or ``"@"`` (anyone, no token
needed) without opening the API."""
from placement.policies import base

METRICS_READ = 'placement:metrics:read'
CAPACITY_READ = 'placement:capacity:read'
# An upstream-style name: it explains an allocation_candidates query.
EXPLAIN = 'placement:allocation_candidates:explain'
UI_READ = 'placement:ui:read'

rules = [
    base.documented(METRICS_READ, base.RULE_ADMIN_API,
                    'Scrape the Prometheus metrics.', [('GET', '/metrics')]),
    base.documented(CAPACITY_READ, base.RULE_ADMIN_API,
                    'Report how many more requests of a kind fit.',
                    [('GET', '/ops/capacity')]),
    base.documented(EXPLAIN, base.RULE_ADMIN_API,
                    'Explain an allocation candidates query: which '
                    'providers each step kept, and why the others were '
                    'excluded (it shows every provider\'s usage).',
                    [('GET', '/ops/explain/allocation_candidates')]),
    base.documented(UI_READ, base.RULE_ADMIN_API,
                    'Read every provider with its inventories, usage, '
                    'traits and aggregates, changes since, and a '
                    'provider\'s consumers with project and user (the web '
                    'view\'s data).',
                    [('GET', '/ops/ui/providers'),
                     ('GET', '/ops/ui/providers/{uuid}/consumers')]),
]


def list_rules():
    return rules
