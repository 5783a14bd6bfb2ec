"""Handlers for the usage resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def list_usages(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def get_total_usages(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
