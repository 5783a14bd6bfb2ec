"""GET /ops/capacity: how many more requests like the query fit (an
operator extension; read-only). The query is GET /allocation_candidates'
at the newest microversion whatever the request's version, parsed and
validated by the same schema and parser."""
import webob
import webob.exc

from placement import exception
from placement import lib_query
from placement import microversion
from placement.objects import capacity as capacity_obj
from placement.policies import ops as policies
from placement.schemas import allocation_candidate as schema
from placement import util

NEWEST = microversion.parse(microversion.max_version_string())


def parse_request(req):
    """(groups, wide) from ``req``'s query string; 400 when invalid."""
    util.validate_query_params(req, schema.get_schema(NEWEST))
    try:
        wide = lib_query.parse_wide(req.GET)
        groups = lib_query.parse_groups(req.GET, NEWEST, wide)
        lib_query.check_group_policy(groups, wide)
    except exception.BadRequest as exc:
        raise util.http_error(webob.exc.HTTPBadRequest,
                              exc.format_message(),
                              code=getattr(exc, 'code', None))
    return groups, wide


def compute(context, req):
    """The report for ``req``'s query; 400 for unknown names."""
    groups, wide = parse_request(req)
    try:
        return capacity_obj.report(context, groups, wide)
    except exception.ResourceClassNotFound as exc:
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid resource class in resources parameter: %s'
            % exc.format_message())
    except (exception.TraitNotFound, exception.BadRequest) as exc:
        raise util.http_error(webob.exc.HTTPBadRequest,
                              exc.format_message())


def report_for_query(context, query):
    """compute() for a query string (placement-manage capacity)."""
    return compute(context, webob.Request.blank('/?' + query))


@util.wsgify
@util.check_accept('application/json')
def get_capacity(req):
    context = req.environ['placement.context']
    context.can(policies.CAPACITY_READ, target={})
    return util.json_response(req, compute(context, req))
