"""Handlers for the resource_provider resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def list_resource_providers(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def create_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def get_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def update_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
