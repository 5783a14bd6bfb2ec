"""Configuration: upstream Placement's option groups, names and defaults.

Every option can also be set from the environment as ``OS_<GROUP>__<OPTION>``
(oslo.config's built-in environment source does that for us).
"""
import os

from oslo_config import cfg
from oslo_db import options as oslo_db_options
from oslo_log import log as logging
from oslo_middleware import cors
from oslo_middleware import http_proxy_to_wsgi
from oslo_middleware import sizelimit
from oslo_policy import opts as policy_opts

DEFAULT_CONSUMER_MISSING_ID = '00000000-0000-0000-0000-000000000000'
MAX_REQUEST_BODY_SIZE = 1024 * 1024

api_group = cfg.OptGroup('api', title='API options', help="""
Options under this group are used to define Placement API.
""")
api_opts = [
    cfg.StrOpt('auth_strategy', default='keystone',
               choices=[('keystone', 'Use keystone for authentication.'),
                        ('noauth2', 'Designed for testing only, as it does '
                         'no actual credential checking. "admin" as the '
                         'token is an admin, "user:project" tokens are '
                         'accepted otherwise.')],
               deprecated_group='DEFAULT',
               help='Determine the strategy to use for authentication.'),
]

placement_group = cfg.OptGroup(
    'placement', title='Placement Service Options',
    help='Configuration options for the placement API service')
placement_opts = [
    cfg.BoolOpt('randomize_allocation_candidates', default=False,
                help='If True, when limiting allocation candidate results, '
                     'the results will be a random sampling of the full '
                     'result set. If False, allocation candidates are '
                     'returned in a deterministic but undefined order.'),
    cfg.StrOpt('incomplete_consumer_project_id',
               default=DEFAULT_CONSUMER_MISSING_ID,
               help='Project id given to consumers whose allocations were '
                    'written before microversion 1.8 without one.'),
    cfg.StrOpt('incomplete_consumer_user_id',
               default=DEFAULT_CONSUMER_MISSING_ID,
               help='User id given to consumers whose allocations were '
                    'written before microversion 1.8 without one.'),
    cfg.IntOpt('allocation_conflict_retry_count', default=10,
               help='The number of times to retry, server-side, writing '
                    'allocations when there is a resource provider '
                    'generation conflict.'),
    cfg.IntOpt('max_allocation_candidates', default=-1,
               help='The maximum number of allocation candidates placement '
                    'generates for a single request; -1 means no limit. '
                    'Candidates beyond it are never generated, so this '
                    'bounds the work of a query, unlike ``limit``.'),
    cfg.StrOpt('allocation_candidates_generation_strategy',
               default='depth-first',
               choices=[('depth-first', 'Generate candidates from one root '
                         'provider tree before moving to the next.'),
                        ('breadth-first', 'Generate candidates round-robin '
                         'across root provider trees.')],
               help='Order in which candidates are generated when '
                    '``max_allocation_candidates`` cuts the result set.'),
]

workarounds_group = cfg.OptGroup('workarounds', title='Workaround Options')
workarounds_opts = [
    cfg.BoolOpt('optimize_for_wide_provider_trees', default=False,
                help='Accepted for compatibility. Candidate generation here '
                     'is always output-sensitive, so wide trees need no '
                     'special switch.'),
]

metrics_group = cfg.OptGroup(
    'metrics', title='Metrics options',
    help='Prometheus metrics at GET /metrics (an extension: upstream '
         'Placement has none).')
metrics_opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Serve GET /metrics in the Prometheus text format: '
                     'inventory and usage gauges per provider and class '
                     '(the openstack_placement_* families of '
                     'openstack-exporter) and request metrics of this '
                     'service. Access is decided by the policy rule '
                     'placement:metrics:read. Several worker processes '
                     'need PROMETHEUS_MULTIPROC_DIR set in their '
                     'environment so that request metrics add up across '
                     'them. When False, /metrics is an unknown URL (404).'),
]

candidates_group = cfg.OptGroup(
    'candidates', title='Allocation candidates options',
    help='How the API processes keep the providers allocation candidates '
         'are searched in (an extension: upstream Placement searches the '
         'database at each request).')
candidates_opts = [
    cfg.BoolOpt('share_world', default=True,
                help='Share one copy of the providers between the API '
                     'processes of a node: a large world (10,000 providers '
                     'or more) is written once to a file in '
                     '``world_dir`` that every process maps read-only, so '
                     'a node holds one copy whatever its number of '
                     'workers, and a worker that starts later maps it and '
                     'catches up from the change log instead of reading '
                     'every provider. When False each process reads and '
                     'keeps its own copy.'),
    cfg.StrOpt('world_dir',
               sample_default='/dev/shm/placement-world-<uid>',
               help='Directory of the shared world files (one per '
                    'database; created with mode 0700). Unset: '
                    '/dev/shm/placement-world-<uid> (memory), or the '
                    'temporary directory where there is no /dev/shm. '
                    'Only processes of one node (one machine) may share '
                    'it.'),
]

placement_db_group = cfg.OptGroup(
    'placement_database', title='Placement API database options',
    help='The database used by the placement service. When ``connection`` '
         'is not set an embedded SQLite file under ``state_path`` is used.')
placement_db_opts = [
    cfg.StrOpt('connection', secret=True,
               help='The SQLAlchemy connection string to use to connect to '
                    'the database. Unset: sqlite file in state_path.'),
    cfg.StrOpt('connection_parameters', default='',
               help='Optional URL parameters to append onto the connection '
                    'URL at connect time; specify as '
                    'param1=value1&param2=value2&...'),
    cfg.BoolOpt('sqlite_synchronous', default=True,
                help='If True, SQLite uses synchronous mode.'),
    cfg.StrOpt('slave_connection', secret=True,
               help='The SQLAlchemy connection string to use to connect to '
                    'the slave database.'),
    cfg.StrOpt('mysql_sql_mode', default='TRADITIONAL',
               help='The SQL mode to be used for MySQL sessions.'),
    cfg.IntOpt('connection_recycle_time', default=3600,
               help='Connections which have been present in the connection '
                    'pool longer than this number of seconds will be '
                    'replaced with a new one the next time they are checked '
                    'out from the pool.'),
    cfg.IntOpt('max_pool_size',
               help='Maximum number of SQL connections to keep open in a '
                    'pool.'),
    cfg.IntOpt('max_retries', default=10,
               help='Maximum number of database connection retries during '
                    'startup. Set to -1 to specify an infinite retry count.'),
    cfg.IntOpt('retry_interval', default=10,
               help='Interval between retries of opening a SQL connection.'),
    cfg.IntOpt('max_overflow',
               help='If set, use this value for max_overflow with '
                    'SQLAlchemy.'),
    cfg.IntOpt('connection_debug', default=0, min=0, max=100,
               help='Verbosity of SQL debugging information: 0=None, '
                    '100=Everything.'),
    cfg.BoolOpt('connection_trace', default=False,
                help='Add Python stack traces to SQL as comment strings.'),
    cfg.IntOpt('pool_timeout',
               help='If set, use this value for pool_timeout with '
                    'SQLAlchemy.'),
    cfg.BoolOpt('sync_on_startup', default=False,
                help='If True, database schema migrations will be attempted '
                     'when the web service starts.'),
    cfg.IntOpt('galera_sync_wait', default=1, min=0, max=15,
               help='On a MariaDB Galera cluster (noticed on each new '
                    'connection by wsrep_on), the wsrep_sync_wait value '
                    'set for its sessions. 1 makes every read wait until '
                    'this node has applied all writes the cluster '
                    'committed before it began, so a client that wrote '
                    'through one node reads its write through any other '
                    '(read-your-writes across API nodes). 0 leaves the '
                    'server setting (reads may then be stale by the '
                    'replication lag). Ignored on other databases. An '
                    'extension: upstream Placement has no such option.'),
]

default_opts = [
    cfg.StrOpt('tempdir',
               help='Explicitly specify the temporary working directory.'),
    cfg.StrOpt('state_path',
               default=os.environ.get(
                   'OS_PLACEMENT_STATE_DIR',
                   os.path.join(os.path.expanduser('~'), '.local', 'state',
                                'placement')),
               sample_default='~/.local/state/placement',
               help="Top-level directory for maintaining placement's state; "
                    'holds the embedded SQLite database when '
                    '[placement_database] connection is unset.'),
    cfg.BoolOpt('log_options', default=True,
                help='Enables or disables logging values of all registered '
                     'options when starting a service (at DEBUG level).'),
]


def _fresh(group):
    """A new OptGroup like ``group``: oslo.config keeps a group's options
    (and their overrides) in the group object, so registering the shared
    module-level group would let one ConfigOpts' set_override leak into
    every other one built later (in tests, from one test into the next)."""
    return cfg.OptGroup(group.name, title=group.title, help=group.help)


def register_opts(conf):
    """Every option the service reads, oslo.log's included (as upstream
    does: embedders such as nova's tests call this on a bare ConfigOpts),
    on ``conf`` before it is parsed."""
    conf.register_opts(default_opts)
    logging.register_options(conf)
    for group, opts in ((api_group, api_opts),
                        (placement_group, placement_opts),
                        (workarounds_group, workarounds_opts),
                        (metrics_group, metrics_opts),
                        (candidates_group, candidates_opts),
                        (placement_db_group, placement_db_opts)):
        fresh = _fresh(group)
        conf.register_group(fresh)
        conf.register_opts(opts, group=fresh)
    policy_opts.set_defaults(conf)
    conf.register_opts(cors.CORS_OPTS, 'cors')
    # [oslo_middleware] enable_proxy_headers_parsing, as upstream registers
    # it: off unless a trusted proxy sets X-Forwarded-* / Forwarded.
    conf.register_opts(http_proxy_to_wsgi.OPTS, 'oslo_middleware')
    # oslo.middleware's body size limit; its 112 KiB default could refuse a
    # large but valid reshape or allocations batch, so allow 1 MiB.
    conf.register_opts(sizelimit.OPTS, 'oslo_middleware')
    conf.set_default('max_request_body_size', MAX_REQUEST_BODY_SIZE,
                     group='oslo_middleware')
    # keystonemiddleware registers [keystone_authtoken] itself when loaded.


def config_files_from_env(environ=None):
    """The config file list: $OS_PLACEMENT_CONFIG_DIR/placement.conf, if set.

    ``None`` lets oslo.config search its usual places (~/.placement,
    ~/, /etc/placement, /etc) for placement.conf.
    """
    environ = os.environ if environ is None else environ
    dirname = environ.get('OS_PLACEMENT_CONFIG_DIR', '').strip()
    if dirname:
        return [os.path.join(dirname, 'placement.conf')]
    return None


def build_conf(args=None, default_config_files=None, environ=None,
               logging_setup=False, cli_opts=()):
    """Return a fresh, parsed ConfigOpts with every placement option.

    ``cli_opts`` (e.g. a command's SubCommandOpt) are registered before
    ``args`` are parsed.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf.register_cli_opts(cli_opts)
    if default_config_files is None:
        default_config_files = config_files_from_env(environ)
    conf(args if args is not None else [], project='placement',
         default_config_files=default_config_files)
    if logging_setup:
        logging.setup(conf, 'placement')
    return conf


def database_url(conf):
    """The configured connection URL, or the embedded SQLite default."""
    url = conf.placement_database.connection
    if url:
        return url
    state = os.path.expanduser(conf.state_path)
    os.makedirs(state, exist_ok=True)
    return 'sqlite:///' + os.path.join(state, 'placement.sqlite')


def uses_embedded_database(conf):
    return not conf.placement_database.connection
