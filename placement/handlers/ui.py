"""GET /ui/: the web view of providers, consumers and candidates (an
extension, outside upstream's URL space).

Only static files are served here, and without a token: the page holds no
data. Every number it shows comes from the JSON API, called by the page
with the visitor's own token, so authentication and policy are the API's.
"""
import json
import os

import webob.dec
import webob.exc
import webob.static

from placement import util

STATIC_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    'ui', 'static')

# The only files served, so no path a visitor writes reaches the disk.
FILES = {
    'index.html': 'text/html',
    'ui.js': 'text/javascript',
    'session.js': 'text/javascript',
    'dom.js': 'text/javascript',
    'trees.js': 'text/javascript',
    'ui.css': 'text/css',
}

# Made per request, from the configuration.
SETTINGS = 'settings.json'

# The page loads nothing but its own files and talks only to this origin.
SECURITY_HEADERS = {
    'Content-Security-Policy': ("default-src 'self'; img-src 'self' data:; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
}


def _file(req, name):
    content_type = FILES.get(name)
    if content_type is None:
        raise util.http_error(webob.exc.HTTPNotFound)
    app = webob.static.FileApp(os.path.join(STATIC_DIR, name),
                               content_type=content_type, charset='utf-8')
    resp = req.get_response(app)
    resp.headers.update(SECURITY_HEADERS)
    # Revalidated on each load: an upgraded service serves its new page.
    resp.cache_control = 'no-cache'
    return resp


@webob.dec.wsgify
def redirect(req):
    """/ui -> /ui/, so the page's relative URLs resolve under it."""
    return webob.exc.HTTPFound(location=req.application_url + '/ui/')


@webob.dec.wsgify
def index(req):
    return _file(req, 'index.html')


def settings(req):
    """What the page needs to know before it has a token: only whether
    the service uses noauth2 (then the token names a user, and ``admin``
    is an admin), so the page hints at that there and nowhere else.
    Anyone may be anyone under noauth2, so saying so reveals nothing."""
    conf = req.environ['placement.context'].config
    noauth = bool(conf is not None and conf.api.auth_strategy == 'noauth2')
    resp = webob.Response(json.dumps({'noauth2': noauth}),
                          content_type='application/json', charset='utf-8')
    resp.headers.update(SECURITY_HEADERS)
    resp.cache_control = 'no-cache'
    return resp


@webob.dec.wsgify
def static_file(req):
    name = util.wsgi_path_item(req.environ, 'filename')
    if name == SETTINGS:
        return settings(req)
    return _file(req, name)
