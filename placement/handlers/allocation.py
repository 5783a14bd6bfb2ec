"""Handlers for the allocation resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def list_for_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def set_allocations(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def list_for_consumer(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def set_allocations_for_consumer(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_allocations(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
