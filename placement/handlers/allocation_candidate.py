"""GET /allocation_candidates: the ways a request could be allocated.

Parse and validate the query (schemas + lib_query), find the
candidates (candidates.engine.find), then write the answer for the
microversion asked (allocation_candidate_json).
"""
import webob.exc

from placement import exception
from placement.handlers import allocation_candidate_json as as_json
from placement import lib_query
from placement.objects.candidates import engine
from placement.policies import allocation_candidate as policies
from placement.schemas import allocation_candidate as schema
from placement import util

INTRODUCED = (1, 10)
NESTED_AWARE = (1, 29)        # also: parent/root uuids in summaries
# The answer's shape by microversion: allocation_candidate_json.


def parse_query(req, want):
    """(groups, wide) from ``req.GET`` (anything with a ``GET``
    MultiDict): schema, then request groups; bad input raises the errors
    this resource answers with. Shared with the explain extension."""
    util.validate_query_params(req, schema.get_schema(want))
    wide = lib_query.parse_wide(req.GET)
    groups = lib_query.parse_groups(req.GET, want, wide)
    lib_query.check_group_policy(groups, wide)
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
    # What the summaries show, as as_json.NODE_SHAPE says it.
    shown = (as_json.summaries_shape(groups, want), nested_aware)
    try:
        cands, providers, has_trees = engine.find(
            context, groups, wide, nested_aware=nested_aware,
            max_candidates=conf.max_allocation_candidates,
            strategy=conf.allocation_candidates_generation_strategy,
            randomize=conf.randomize_allocation_candidates,
            rendered_as=(as_json.NODE_KEY if shown == as_json.NODE_SHAPE
                         else None))
    except (exception.ResourceClassNotFound,
            exception.TraitNotFound) as exc:
        raise unknown_name(exc)

    requests = as_json.allocation_requests(cands, providers, want,
                                           wide.group_policy == 'isolate')
    body = {
        'allocation_requests': (requests if type(requests) is list
                                else util.RawJSON(requests)),
        'provider_summaries': util.RawJSON(as_json.provider_summaries(
            cands, providers, shown,
            whole_trees=nested_aware or not has_trees)),
    }
    return util.json_response(req, body, large=True)
