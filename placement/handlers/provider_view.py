"""GET /ops/ui/providers: every provider with its inventories, usage,
traits and aggregates in one answer, then (``?since=<token>``) only the
providers changed since; GET /ops/ui/providers/{uuid}/consumers: who uses
a provider, with project and user. The web view's data (an operator
extension, outside upstream's URL space; /ui/ itself is only static
files). See placement/objects/provider_view.py."""
import webob.exc

from placement.objects import provider_view
from placement.policies import ops as policies
from placement import util


@util.wsgify
@util.check_accept('application/json')
def list_providers(req):
    context = req.environ['placement.context']
    context.can(policies.UI_READ, target={})
    since = req.GET.get('since')
    if since is not None:
        try:
            since = provider_view.decode_token(since)
        except provider_view.BadToken:
            raise util.http_error(
                webob.exc.HTTPBadRequest,
                'Invalid since: not a token this service gave.')
    body = provider_view.providers(context, since)
    return util.json_response(req, body, large=True)


@util.wsgify
@util.check_accept('application/json')
def list_consumers(req):
    context = req.environ['placement.context']
    context.can(policies.UI_READ, target={})
    uuid = util.wsgi_path_item(req.environ, 'uuid')
    consumers = provider_view.consumers_of(context, uuid)
    if consumers is None:
        raise util.http_error(
            webob.exc.HTTPNotFound,
            'No resource provider with uuid %s found' % uuid)
    return util.json_response(req, {'consumers': consumers})
