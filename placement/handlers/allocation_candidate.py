"""Handlers for the allocation_candidate resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def list_allocation_candidates(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
