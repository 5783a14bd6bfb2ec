"""GET /ops/explain/allocation_candidates: why a query answers what it
does (an operator extension, outside upstream's URL space).

The query string is GET /allocation_candidates' own, with the same
schema, microversion rules and error answers (the parsing is that
handler's), plus two keys of this resource:

* ``explain_provider`` (repeatable): a provider uuid or name to explain
  whatever its fate;
* ``explain_sample``: how many other excluded providers to explain
  (default 10).
"""
import types
import urllib.parse

import webob.exc
import webob.multidict

from placement import exception
from placement.handlers import allocation_candidate as ac_handler
from placement.objects.candidates import explain as explain_obj
from placement.policies import ops as policies
from placement import util

PROVIDER_KEY = 'explain_provider'
SAMPLE_KEY = 'explain_sample'
DEFAULT_SAMPLE = 10
MAX_SAMPLE = 100000


def split_params(params):
    """(the candidates query's MultiDict, provider names, sample size)."""
    query = webob.multidict.MultiDict()
    names = []
    sample = None
    for key, value in params.items():
        if key == PROVIDER_KEY:
            names.append(value.strip())
        elif key == SAMPLE_KEY:
            sample = value
        else:
            query.add(key, value)
    if sample is None:
        sample = DEFAULT_SAMPLE
    else:
        try:
            sample = int(sample)
            if not 0 <= sample <= MAX_SAMPLE:
                raise ValueError(sample)
        except ValueError:
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'Invalid query string parameters: %s must be an integer '
                'from 0 to %d, got %r.' % (SAMPLE_KEY, MAX_SAMPLE, sample))
    if any(not name for name in names):
        raise util.http_error(
            webob.exc.HTTPBadRequest,
            'Invalid query string parameters: %s must name a provider '
            '(uuid or name).' % PROVIDER_KEY)
    return query, names, sample


def explain_query(context, query, want, names=(), sample=DEFAULT_SAMPLE):
    """The explanation body for ``query`` (a MultiDict of GET
    /allocation_candidates keys) at microversion ``want``; bad input
    raises what GET /allocation_candidates raises."""
    groups, wide = ac_handler.parse_query(
        types.SimpleNamespace(GET=query), want)
    conf = context.config.placement
    engine = explain_obj.Engine(
        context, nested_aware=want.matches(ac_handler.NESTED_AWARE),
        max_candidates=conf.max_allocation_candidates,
        strategy=conf.allocation_candidates_generation_strategy,
        randomize=conf.randomize_allocation_candidates)
    body = {'query': urllib.parse.urlencode(list(query.items()),
                                            safe=':,!'),
            'microversion': str(want)}
    try:
        body.update(explain_obj.explain(engine, groups, wide, names=names,
                                        sample=sample))
    except (exception.ResourceClassNotFound,
            exception.TraitNotFound) as exc:
        raise ac_handler.unknown_name(exc)
    return body


@util.wsgify
@util.check_accept('application/json')
def explain_allocation_candidates(req):
    """200 with the explanation of the query."""
    want = util.want_version(req)
    if not want.matches(ac_handler.INTRODUCED):
        raise util.http_error(webob.exc.HTTPNotFound)
    context = req.environ['placement.context']
    context.can(policies.EXPLAIN)
    query, names, sample = split_params(req.GET)
    body = explain_query(context, query, want, names, sample)
    return util.json_response(req, body)
