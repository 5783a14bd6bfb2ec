"""Handlers for the trait resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def list_traits_for_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def update_traits_for_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_traits_for_resource_provider(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def list_traits(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def get_trait(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def put_trait(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_trait(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
