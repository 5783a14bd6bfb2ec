"""Build the WSGI application from config: the middleware stack, outermost
first: request metrics (``[metrics] enabled``) -> proxy headers (when
enabled) -> request id -> CORS -> fault barrier -> JSON errors by default
-> auth -> request context -> microversion -> body size limit -> routes
table -> handler; around them all, the request freed once answered
(_freed_when_done)."""
from microversion_parse import middleware as mp_middleware
import oslo_middleware
from oslo_middleware import cors

from placement import auth
from placement import context as placement_context
from placement.db import api as db_api
from placement.db import startup
from placement import fault_wrap
from placement import handler
from placement.objects.candidates import world
from placement import microversion
from placement import policy
from placement import util


def deploy(conf):
    """Assemble the middleware pipeline around the placement handler."""
    application = handler.PlacementHandler(config=conf)
    routes = application.mapper
    # Innermost, so a 413 carries the microversion's error code.
    application = fault_wrap.BodySizeLimiter(application, conf)
    application = mp_middleware.MicroversionMiddleware(
        application, microversion.SERVICE_TYPE, microversion.VERSIONS,
        json_error_formatter=util.json_error_formatter)
    application = auth.KeystoneContext(application, conf)
    # A scraper may come without a token; the policy rule decides.
    anonymous = ('/metrics',) if conf.metrics.enabled else ()
    if conf.api.auth_strategy == 'noauth2':
        application = auth.NoAuthMiddleware(application, anonymous)
    else:
        application = auth.keystone_auth(conf, anonymous)(application)
    application = fault_wrap.DefaultJSONErrors(application)
    application = fault_wrap.FaultWrapper(application)
    if conf.cors.allowed_origin:
        application = oslo_middleware.CORS(application, conf)
    application = oslo_middleware.RequestId(application)
    # Outermost, as upstream: every layer inside (and each Location and
    # link) sees the scheme, host and SCRIPT_NAME the client used in front
    # of a TLS-terminating proxy. Only stacked when enabled: the option
    # cannot change at run time, and when off the layer would cost a
    # webob Request per request (some 70 us) to do nothing.
    if conf.oslo_middleware.enable_proxy_headers_parsing:
        application = oslo_middleware.HTTPProxyToWSGI(application, conf)
    if conf.metrics.enabled:
        from placement import request_metrics
        application = request_metrics.RequestMetrics(
            application, handler.route_template(routes))
    return _freed_when_done(application)


def _freed_when_done(application):
    """``application``, whose requests are freed as soon as the server
    lets them go.

    webob keeps a request's parsed query string in its environ, and that
    GET dict refers back to the environ: a reference cycle, which keeps
    the environ and all it holds (the response: megabytes for a large
    candidates answer) until the cyclic collector runs, every few
    requests. Each answer's body then took fresh pages from the system
    (1,100 page faults, ~1.5 ms, per limit=1000 answer at a million
    providers). Broken here, once the application has answered."""
    def freed_when_done(environ, start_response):
        try:
            return application(environ, start_response)
        finally:
            environ.pop('webob._parsed_query_vars', None)
    return freed_when_done


def update_database(conf):
    """Start-up work on the database, as upstream does at process boot:
    migrate when asked (always for the embedded SQLite default, so a
    newcomer needs no setup), then make sure the standard traits and
    resource classes of the installed os-traits / os-resource-classes are
    present. Lookups cached from an earlier database are dropped."""
    from placement.objects import aggregate as agg_obj
    from placement.objects import resource_class as rc_obj
    from placement.objects import trait as trait_obj
    from placement import conf as placement_conf
    with startup.startup_lock():
        if (conf.placement_database.sync_on_startup
                or placement_conf.uses_embedded_database(conf)):
            # Here only: alembic adds 0.3 s to a worker's start.
            from placement.db import migration
            migration.upgrade('head')
        ctx = placement_context.admin_context(conf)
        agg_obj.reset_ids()
        trait_obj.ensure_sync(ctx)
        rc_obj.ensure_sync(ctx)


def loadapp(conf, project_name=None):
    """The placement WSGI application for an oslo.config ConfigOpts."""
    db_api.configure(conf)
    policy.init(conf)
    world.configure(conf)
    application = deploy(conf)
    update_database(conf)
    return application
