"""GET /allocation_candidates: the ways a request could be allocated.

Parse and validate the query (schemas + candidates.request), gather and
combine (candidates.gather, candidates.combine), then shape the answer for
the microversion asked.
"""
import webob.exc

from placement import exception
from placement.objects.candidates import gather
from placement.objects.candidates import request as ac_request
from placement.policies import allocation_candidate as policies
from placement.schemas import allocation_candidate as schema
from placement import util

INTRODUCED = (1, 10)
DICT_ALLOCATIONS = (1, 12)
TRAITS_IN_SUMMARIES = (1, 17)
ALL_RESOURCES_IN_SUMMARIES = (1, 27)
NESTED_AWARE = (1, 29)        # also: parent/root uuids in summaries
MAPPINGS = (1, 34)


def _resources(group_resources):
    return dict(group_resources)


def _allocation_requests(cands, providers, want):
    out = []
    dict_form = want.matches(DICT_ALLOCATIONS)
    with_mappings = want.matches(MAPPINGS)
    for cand in cands:
        allocs = cand.allocations
        if dict_form:
            body = {'allocations': {
                providers[rp].uuid: {'resources': dict(res)}
                for rp, res in allocs.items()}}
            if with_mappings:
                body['mappings'] = {
                    suffix: [providers[rp].uuid for rp in rps]
                    for suffix, rps in cand.mappings.items()}
        else:
            body = {'allocations': [
                {'resource_provider': {'uuid': providers[rp].uuid},
                 'resources': dict(res)}
                for rp, res in allocs.items()]}
        out.append(body)
    return out


def _provider_summaries(cands, providers, groups, want, whole_trees):
    """Summaries of every provider in the trees the candidates use (only
    the providers used, for old microversions on nested worlds)."""
    used = set()
    for cand in cands:
        used.update(cand.allocations)
    if whole_trees:
        roots = {providers[rp].root_id for rp in used}
        shown = [p for p in providers.values() if p.root_id in roots]
    else:
        shown = [providers[rp] for rp in used]
    requested = set()
    for g in groups.values():
        requested.update(g.resources)
    all_classes = want.matches(ALL_RESOURCES_IN_SUMMARIES)
    with_traits = want.matches(TRAITS_IN_SUMMARIES)
    nested = want.matches(NESTED_AWARE)
    out = {}
    for prov in shown:
        summary = {'resources': {
            rc: {'capacity': cap, 'used': used_amt}
            for rc, (cap, used_amt, _max) in prov.inventory.items()
            if all_classes or rc in requested}}
        if with_traits:
            summary['traits'] = sorted(prov.traits)
        if nested:
            parent = providers.get(prov.parent_id)
            summary['parent_provider_uuid'] = parent.uuid if parent else None
            summary['root_provider_uuid'] = providers[prov.root_id].uuid
        out[prov.uuid] = summary
    return out


@util.wsgify
@util.check_accept('application/json')
def list_allocation_candidates(req):
    """200 with allocation_requests and provider_summaries."""
    want = util.want_version(req)
    if not want.matches(INTRODUCED):
        raise util.http_error(webob.exc.HTTPNotFound)
    context = req.environ['placement.context']
    context.can(policies.LIST)
    util.validate_query_params(req, schema.get_schema(want))

    wide = ac_request.parse_wide(req.GET)
    groups = ac_request.parse_groups(req.GET, want, wide)
    ac_request.check_group_policy(groups, wide)

    conf = context.config.placement
    nested_aware = want.matches(NESTED_AWARE)
    try:
        cands, providers, has_trees = gather.find(
            context, groups, wide, nested_aware=nested_aware,
            max_candidates=conf.max_allocation_candidates,
            strategy=conf.allocation_candidates_generation_strategy,
            randomize=conf.randomize_allocation_candidates)
    except exception.ResourceClassNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid resource class in resources parameter: %s'
            % exc.format_message())
    except exception.TraitNotFound as exc:
        raise util.http_error(webob.exc.HTTPBadRequest,
                              exc.format_message())

    body = {
        'allocation_requests': _allocation_requests(cands, providers, want),
        'provider_summaries': _provider_summaries(
            cands, providers, groups, want,
            whole_trees=nested_aware or not has_trees),
    }
    return util.json_response(req, body)
