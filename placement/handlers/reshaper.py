"""Handlers for the reshaper resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def reshape(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
