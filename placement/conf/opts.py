"""Entry points for oslo-config-generator."""
from oslo_db import options as oslo_db_options  # noqa: F401

from placement import conf as placement_conf


def list_opts():
    return [
        ('DEFAULT', placement_conf.default_opts),
        (placement_conf.api_group, placement_conf.api_opts),
        (placement_conf.placement_group, placement_conf.placement_opts),
        (placement_conf.placement_db_group, placement_conf.placement_db_opts),
        (placement_conf.workarounds_group, placement_conf.workarounds_opts),
        (placement_conf.metrics_group, placement_conf.metrics_opts),
    ]


def set_defaults(conf=None):
    pass
