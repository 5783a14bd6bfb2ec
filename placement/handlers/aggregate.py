"""Handlers for the aggregate resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def get_aggregates(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def set_aggregates(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
