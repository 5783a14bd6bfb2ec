"""GET /allocation_candidates: the ways a request could be allocated.

Parse and validate the query (schemas + candidates.request), gather and
combine (candidates.gather, candidates.combine), then shape the answer for
the microversion asked.
"""
import operator

import webob.exc

from placement import exception
from placement.objects.candidates import combine
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


def _allocation_requests(cands, providers, want):
    """The allocation_requests list. A wide request renders tens of
    thousands of these: the amounts dicts and one-provider mapping lists
    that combine shares between candidates are rendered once each (keyed
    by identity: they live as long as ``cands``) and never mutated."""
    uuid_of = {rp: prov.uuid for rp, prov in providers.items()}
    out = []
    if not want.matches(DICT_ALLOCATIONS):
        for cand in cands:
            out.append({'allocations': [
                {'resource_provider': {'uuid': uuid_of[rp]},
                 'resources': res}
                for rp, res in cand.allocations.items()]})
        return out
    with_mappings = want.matches(MAPPINGS)
    sole = [cand.sole for cand in cands]
    if cands and None not in sole:
        return _sole_provider_requests(cands[0].groups[0], sole, uuid_of,
                                       with_mappings)
    rendered = {}      # id() of a shared amounts dict or rp list -> JSON
    fast = _DistinctNumbered(cands, uuid_of, with_mappings)
    for cand in cands:
        body = fast.render(cand)
        if body is not None:
            out.append(body)
            continue
        allocs = {}
        for rp, res in cand.allocations.items():
            key = (rp, id(res))
            entry = rendered.get(key)
            if entry is None:
                entry = rendered[key] = (uuid_of[rp], {'resources': res})
            allocs[entry[0]] = entry[1]
        body = {'allocations': allocs}
        if with_mappings:
            maps = {}
            for suffix, rps in cand.mappings.items():
                lst = rendered.get(id(rps))
                if lst is None:
                    lst = [uuid_of[rp] for rp in rps]
                    if len(rps) == 1:
                        rendered[id(rps)] = lst
                maps[suffix] = lst
            body['mappings'] = maps
        out.append(body)
    return out


def _sole_provider_requests(group, sole, uuid_of, with_mappings):
    """Candidates that are each one provider serving the one group (a
    flat world's): one shared resources part, a comprehension each."""
    part = {'resources': group.amounts}
    uuids = [uuid_of[rp] for rp in sole]
    if with_mappings:
        suffix = group.suffix
        return [{'allocations': {u: part}, 'mappings': {suffix: [u]}}
                for u in uuids]
    return [{'allocations': {u: part}} for u in uuids]


class _DistinctNumbered:
    """Render, at C speed, candidates made only of numbered groups on
    distinct providers (a wide isolate request: tens of thousands of
    them): each (group, provider) part is built once and a candidate is
    two dict() calls over its picks."""

    def __init__(self, cands, uuid_of, with_mappings):
        self.ok = False
        if not cands:
            return
        groups = cands[0].groups
        if not all(g.same_provider for g in groups):
            return
        self.ok = True
        self.n = len(groups)
        self.with_mappings = with_mappings
        with_res = [i for i, g in enumerate(groups) if g.resources]
        self.alloc_parts = [self._alloc_part(groups[i], uuid_of)
                            for i in with_res]
        self.pick_res = (operator.itemgetter(*with_res) if len(with_res) > 1
                         else (lambda picks, i=with_res[0]: (picks[i],))
                         if with_res else (lambda picks: ()))
        self.map_parts = [
            combine.OnFirstUse(lambda rp, s=g.suffix: (s, [uuid_of[rp]]))
            for g in groups]

    @staticmethod
    def _alloc_part(group, uuid_of):
        return combine.OnFirstUse(
            lambda rp: (uuid_of[rp], {'resources': group.amounts}))

    def render(self, cand):
        if not self.ok:
            return None
        picks = cand.picks
        if len(set(picks)) != self.n:
            return None
        body = {'allocations': dict(map(operator.getitem, self.alloc_parts,
                                        self.pick_res(picks)))}
        if self.with_mappings:
            body['mappings'] = dict(map(operator.getitem, self.map_parts,
                                        picks))
        return body


def _provider_summaries(cands, providers, groups, want, whole_trees):
    """Summaries of every provider in the trees the candidates use (only
    the providers used, for old microversions on nested worlds)."""
    used = combine.allocated_providers(cands)
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
    # Providers alike share one list of traits (in trait id order, see
    # combine.Traits), and one capacity/used dict per equal inventory
    # (read-only, like every part of the body): hashing the inventory's
    # tuple costs less than a dict.
    amounts = {}
    for prov in shown:
        resources = {}
        for rc, inv in prov.inventory.items():
            if all_classes or rc in requested:
                part = amounts.get(inv)
                if part is None:
                    part = amounts[inv] = {'capacity': inv[0],
                                           'used': inv[1]}
                resources[rc] = part
        summary = {'resources': resources}
        if with_traits:
            summary['traits'] = prov.traits.listed
        if nested:
            parent = providers.get(prov.parent_id)
            summary['parent_provider_uuid'] = parent.uuid if parent else None
            summary['root_provider_uuid'] = providers[prov.root_id].uuid
        out[prov.uuid] = summary
    return out


def parse_query(req, want):
    """(groups, wide) from ``req.GET`` (anything with a ``GET``
    MultiDict): schema, then request groups; bad input raises the errors
    this resource answers with. Shared with the explain extension."""
    util.validate_query_params(req, schema.get_schema(want))
    wide = ac_request.parse_wide(req.GET)
    groups = ac_request.parse_groups(req.GET, want, wide)
    ac_request.check_group_policy(groups, wide)
    return groups, wide


def unknown_name(exc):
    """The 400 for a resource class or trait the query names that does
    not exist."""
    if isinstance(exc, exception.ResourceClassNotFound):
        return util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid resource class in resources parameter: %s'
            % exc.format_message())
    return util.http_error(webob.exc.HTTPBadRequest, exc.format_message())


@util.wsgify
@util.check_accept('application/json')
def list_allocation_candidates(req):
    """200 with allocation_requests and provider_summaries."""
    want = util.want_version(req)
    if not want.matches(INTRODUCED):
        raise util.http_error(webob.exc.HTTPNotFound)
    context = req.environ['placement.context']
    context.can(policies.LIST)
    groups, wide = parse_query(req, want)

    conf = context.config.placement
    nested_aware = want.matches(NESTED_AWARE)
    try:
        cands, providers, has_trees = gather.find(
            context, groups, wide, nested_aware=nested_aware,
            max_candidates=conf.max_allocation_candidates,
            strategy=conf.allocation_candidates_generation_strategy,
            randomize=conf.randomize_allocation_candidates)
    except (exception.ResourceClassNotFound,
            exception.TraitNotFound) as exc:
        raise unknown_name(exc)

    body = {
        'allocation_requests': _allocation_requests(cands, providers, want),
        'provider_summaries': _provider_summaries(
            cands, providers, groups, want,
            whole_trees=nested_aware or not has_trees),
    }
    return util.json_response(req, body, large=True)
