"""Handlers for the inventory resource (not yet built)."""
import webob.exc

from placement import util


@util.wsgify
def get_inventories(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def create_inventory(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def set_inventories(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_inventories(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def get_inventory(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def update_inventory(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)


@util.wsgify
def delete_inventory(req):
    raise util.http_error(webob.exc.HTTPNotImplemented)
