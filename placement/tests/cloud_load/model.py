"""What nova 34.0.0 asks of Placement, read from nova's own source.

One module holds the load model so that tools/bench-cloud replays exactly
what the benchmarks page's table shows: the table is rendered from these
rows (``render``) and a test compares it with the page.

A row is one call nova makes: the request (a ``KINDS`` key), how many
times per run of its flow (``'1'``, or per provider of the compute's tree
``'P'``, per consumer with allocations on it ``'C'``, per provider in an
aggregate ``'A'``, per provider whose inventory changed ``'I'``), when it
happens (``None``: always) and where nova makes it. A row whose kind
starts with ``@`` runs another flow there.
"""
import collections

# Nova's defaults: the periodic update_available_resource runs every
# 60 s ([DEFAULT] update_resources_interval = 0 means the periodic task's
# own spacing); a provider's associations are stale once
# [compute] resource_provider_association_refresh = 300 s have passed, which
# a 60 s periodic first sees on its 6th run after the refresh.
PERIODIC = 60
REFRESH = 300
REFRESH_EVERY = 6
# [scheduler] max_placement_results.
LIMIT = 1000
# The flavor the simulated boots ask for.
FLAVOR = {'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20}

Kind = collections.namedtuple('Kind', 'method path version body')

# The request shapes, named as nova's call sites name them. version None:
# nova sends no microversion header (the service answers at 1.0).
CANDIDATES_QUERY = (
    'limit=%d&resources=DISK_GB%%3A%d%%2CMEMORY_MB%%3A%d%%2CVCPU%%3A%d'
    '&root_required=%%21COMPUTE_STATUS_DISABLED' % (
        LIMIT, FLAVOR['DISK_GB'], FLAVOR['MEMORY_MB'], FLAVOR['VCPU']))
KINDS = {
    'in_tree': Kind('GET', '/resource_providers?in_tree={root}', '1.14',
                    None),
    'inventories': Kind('GET', '/resource_providers/{rp}/inventories', None,
                        None),
    'aggregates': Kind('GET', '/resource_providers/{rp}/aggregates', '1.19',
                       None),
    'traits': Kind('GET', '/resource_providers/{rp}/traits', '1.6', None),
    'sharing': Kind('GET', '/resource_providers?member_of=in:{aggs}'
                    '&required=MISC_SHARES_VIA_AGGREGATE', '1.18', None),
    'rp_allocations': Kind('GET', '/resource_providers/{rp}/allocations',
                           None, None),
    'consumer': Kind('GET', '/allocations/{consumer}', '1.28', None),
    'put_inventories': Kind(
        'PUT', '/resource_providers/{rp}/inventories', '1.26',
        '{resource_provider_generation, inventories: {RC: {total, '
        'reserved, ...}}}'),
    'usages_project': Kind('GET', '/usages?project_id={project}', '1.9',
                           None),
    'usages_user': Kind('GET', '/usages?project_id={project}'
                        '&user_id={user}', '1.9', None),
    'candidates': Kind('GET', '/allocation_candidates?' + CANDIDATES_QUERY,
                       '1.36', None),
    'claim': Kind('PUT', '/allocations/{consumer}', '1.36',
                  '{allocations: {RP: {resources}}, project_id, user_id, '
                  'consumer_generation: null}'),
    'move': Kind('POST', '/allocations', '1.28',
                 '{INSTANCE: {allocations: {}, consumer_generation, '
                 'project_id, user_id}, MIGRATION: {allocations: '
                 "INSTANCE's, consumer_generation: null, project_id, "
                 'user_id}}'),
    'clear': Kind('PUT', '/allocations/{consumer}', '1.28',
                  '{allocations: {}, consumer_generation, project_id, '
                  'user_id}'),
    'delete': Kind('DELETE', '/allocations/{consumer}', None, None),
    'list_providers': Kind('GET', '/resource_providers', None, None),
}

Step = collections.namedtuple('Step', 'kind times when target source')


def step(kind, source, times='1', when=None, target=None):
    """``target``: whose consumer a per-instance call names (``instance``,
    ``migration``) or whose tree a flow runs on (``dest``, ``source``)."""
    return Step(kind, times, when, target, source)


RT = 'compute/resource_tracker.py'
RC = 'scheduler/client/report.py'
# Steps several flows take alike: the scheduler's claim for the
# instance, and the conductor moving the instance's allocations to the
# migration consumer (after reading them, each flow from its own caller).
_CLAIM = [
        step('consumer', 'scheduler/utils.py claim_resources -> ' + RC +
             ' claim_resources', target='instance'),
        step('claim', RC + ' claim_resources -> _put_allocations',
             target='instance'),
]
_MOVE_TO_MIGRATION = [
        step('consumer', RC + ' move_allocations (source consumer)',
             target='instance'),
        step('consumer', RC + ' move_allocations (target consumer)',
             target='migration'),
        step('move', RC + ' move_allocations'),
]
# Flows: name -> (what starts it, [steps]).
FLOWS = collections.OrderedDict([
    ('periodic', ('every %d s per compute node' % PERIODIC, [
        step('rp_allocations', RT + ' _remove_deleted_instances_allocations'
             ' -> ' + RC + ' get_allocations_for_resource_provider'),
        step('@rt_update', RT + ' update_available_resource -> '
             '_update_available_resource -> _update'),
    ])),
    ('rt_update', ('the resource tracker pushes its view', [
        step('in_tree', RC + ' get_provider_subtree_and_ensure_root -> '
             '_ensure_resource_provider -> get_providers_in_tree',
             when='stale'),
        step('inventories', RC + ' _refresh_associations -> '
             '_refresh_and_get_inventory', times='P', when='stale'),
        step('aggregates', RC + ' _refresh_associations -> '
             '_get_provider_aggregates', times='P', when='stale'),
        step('traits', RC + ' _refresh_associations -> get_provider_traits',
             times='P', when='stale'),
        step('sharing', RC + ' _refresh_associations -> '
             '_get_sharing_providers', times='A', when='stale'),
        step('rp_allocations', RT + ' _update_to_placement -> ' + RC +
             ' get_allocations_for_provider_tree', times='P'),
        step('consumer', RC + ' get_allocations_for_provider_tree -> '
             'get_allocs_for_consumer', times='C'),
        step('put_inventories', RC + ' update_from_provider_tree -> '
             'set_inventory_for_provider', times='I', when='changed'),
    ])),
    ('boot', ('--boots per second (Poisson)', [
        step('usages_project', 'quota.py _cores_ram_count_placement -> ' +
             RC + ' get_usages_counts_for_quota (nova-api)'),
        step('usages_user', 'quota.py _cores_ram_count_placement -> ' + RC +
             ' get_usages_counts_for_quota (nova-api)'),
        step('candidates', 'scheduler/manager.py select_destinations -> ' +
             RC + ' get_allocation_candidates'),
        *_CLAIM,
        step('usages_project', 'conductor/manager.py _recheck_quota -> ' +
             RC + ' get_usages_counts_for_quota'),
        step('usages_user', 'conductor/manager.py _recheck_quota -> ' + RC +
             ' get_usages_counts_for_quota'),
        step('consumer', 'compute/manager.py _build_resources -> ' + RC +
             ' get_allocations_for_consumer', target='instance'),
        step('@rt_update', RT + ' instance_claim -> _update',
             target='dest'),
    ])),
    ('delete', ('as many per second as boots, of the instances booted', [
        step('@rt_update', 'compute/manager.py _complete_deletion -> ' + RT +
             ' update_usage -> _update', target='source'),
        step('delete', 'compute/manager.py _complete_deletion -> ' + RC +
             ' delete_allocation_for_instance (force: '
             'reclaim_instance_interval = 0)', target='instance'),
    ])),
    ('cold_migration', ('--cold-migrations per boot', [
        step('consumer', 'conductor/tasks/migrate.py '
             'replace_allocation_with_migration -> ' + RC +
             ' get_allocs_for_consumer', target='instance'),
        *_MOVE_TO_MIGRATION,
        step('candidates', 'scheduler/manager.py select_destinations -> ' +
             RC + ' get_allocation_candidates'),
        *_CLAIM,
        step('@rt_update', RT + ' resize_claim -> _move_claim -> _update',
             target='dest'),
        step('consumer', 'compute/manager.py _confirm_resize -> '
             '_delete_allocation_after_move -> ' + RC +
             ' delete_allocation_for_instance', target='migration'),
        step('clear', RC + ' delete_allocation_for_instance (force=False)',
             target='migration'),
        step('@rt_update', RT + ' drop_move_claim_at_source -> '
             '_drop_move_claim -> _update', target='source'),
    ])),
    ('live_migration', ('--live-migrations per boot', [
        step('consumer', 'conductor/tasks/live_migrate.py _execute -> '
             'migrate.py replace_allocation_with_migration -> ' + RC +
             ' get_allocs_for_consumer', target='instance'),
        *_MOVE_TO_MIGRATION,
        step('candidates', 'conductor/tasks/live_migrate.py '
             '_find_destination -> select_destinations -> ' + RC +
             ' get_allocation_candidates'),
        *_CLAIM,
        step('consumer', 'compute/manager.py _post_live_migration -> '
             '_delete_allocation_after_move -> ' + RC +
             ' delete_allocation_for_instance', target='migration'),
        step('clear', RC + ' delete_allocation_for_instance (force=False)',
             target='migration'),
        step('@periodic', 'compute/manager.py _post_live_migration -> '
             'update_available_resource', target='source'),
    ])),
    ('operator', ('--operator-lists per minute', [
        step('list_providers', 'osc-placement: openstack resource provider '
             'list (not nova)'),
    ])),
])

WHEN = {
    None: 'always',
    'stale': 'cache cold (restart) or root refreshed > %d s ago: every '
             '%dth periodic' % (REFRESH, REFRESH_EVERY),
    'changed': 'the driver reports a changed inventory (``--changes``)',
}


def kinds_of(flow, seen=None):
    """Every request kind a flow can issue, sub-flows included."""
    seen = set() if seen is None else seen
    for s in FLOWS[flow][1]:
        if s.kind.startswith('@'):
            kinds_of(s.kind[1:], seen)
        else:
            seen.add(s.kind)
    return seen


def per_compute_hour(providers, in_aggregate, consumers):
    """Requests one idle compute node makes an hour in steady state (no
    inventory change), per kind."""
    runs = 3600 / PERIODIC
    out = collections.Counter()
    out['rp_allocations'] += runs * (1 + providers)
    out['consumer'] += runs * consumers
    refreshes = runs / REFRESH_EVERY
    out['in_tree'] += refreshes
    for kind in ('inventories', 'aggregates', 'traits'):
        out[kind] += refreshes * providers
    out['sharing'] += refreshes * in_aggregate
    return out


def _kind_cell(kind):
    if kind.startswith('@'):
        return 'runs flow ``%s``' % kind[1:]
    k = KINDS[kind]
    return '``%s %s``' % (k.method, k.path)


def render():
    """The benchmarks page's table (RST list-table) of every flow."""
    lines = ['.. list-table::', '   :header-rows: 1',
             '   :widths: 12 4 40 6 14 24', '',
             '   * - flow (trigger)', '     - times', '     - request',
             '     - microversion', '     - when', '     - nova 34.0.0 source']
    for name, (trigger, steps) in FLOWS.items():
        for i, s in enumerate(steps):
            k = KINDS.get(s.kind)
            request = _kind_cell(s.kind)
            if k and k.body:
                request += ' body ``%s``' % k.body
            if s.target:
                request += ' (%s)' % s.target
            lines += ['   * - %s' % ('**%s** (%s)' % (name, trigger)
                                     if i == 0 else ''),
                      '     - %s' % s.times,
                      '     - %s' % request,
                      '     - %s' % ((k.version or 'none (1.0)') if k
                                     else ''),
                      '     - %s' % WHEN[s.when],
                      '     - %s' % s.source]
    return '\n'.join(line.rstrip() for line in lines) + '\n'
