"""Policy enforcement with oslo.policy, using upstream's rule defaults."""
from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from placement import exception
from placement import policies

_ENFORCER = None


def reset():
    global _ENFORCER
    _ENFORCER = None


def init(conf):
    """Build the enforcer from the defaults plus any operator policy file."""
    global _ENFORCER
    _ENFORCER = oslo_policy.Enforcer(conf)
    _ENFORCER.register_defaults(policies.list_rules())
    _ENFORCER.load_rules()
    return _ENFORCER


def get_enforcer():
    """For oslopolicy-* tools: an enforcer over the default config."""
    conf = cfg.ConfigOpts()
    from placement import conf as placement_conf
    placement_conf.register_opts(conf)
    conf([], project='placement')
    return init(conf)


def authorize(context, action, target):
    if _ENFORCER is None:
        raise RuntimeError('policy enforcer not initialised')
    try:
        return _ENFORCER.authorize(
            action, target, context, do_raise=True,
            exc=exception.PolicyNotAuthorized, action=action)
    except oslo_policy.InvalidScope:
        raise exception.PolicyNotAuthorized(action=action)
