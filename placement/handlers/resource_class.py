"""Handlers for the resource_class resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def list_resource_classes(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def create_resource_class(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def get_resource_class(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def update_resource_class(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_resource_class(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
