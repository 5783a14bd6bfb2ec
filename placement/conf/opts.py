"""Entry points for oslo-config-generator."""
from oslo_config import cfg
from oslo_db import options as oslo_db_options  # noqa: F401
from oslo_middleware import sizelimit

from placement import conf as placement_conf


def list_opts():
    return [
        ('DEFAULT', placement_conf.default_opts),
        (placement_conf.api_group, placement_conf.api_opts),
        (placement_conf.placement_group, placement_conf.placement_opts),
        (placement_conf.placement_db_group, placement_conf.placement_db_opts),
        (placement_conf.workarounds_group, placement_conf.workarounds_opts),
        (placement_conf.metrics_group, placement_conf.metrics_opts),
        (placement_conf.candidates_group, placement_conf.candidates_opts),
    ]


def set_defaults(conf=None):
    """The generator's hook (oslo.config.opts.defaults): oslo.middleware's
    options with the defaults this service gives them at start-up, so the
    sample and the reference show what the service really uses."""
    cfg.set_defaults(
        sizelimit.OPTS,
        max_request_body_size=placement_conf.MAX_REQUEST_BODY_SIZE)
