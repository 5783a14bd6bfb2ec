"""Policy enforcement with oslo.policy, using upstream's rule defaults.

``[oslo_policy] enforce_scope`` / ``enforce_new_defaults`` and the operator
policy file (``[oslo_policy] policy_file``, default ``policy.yaml``, plus
``policy_dirs``) are all oslo.policy's own options: nothing here reads them.
"""
import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_policy import _checks
from oslo_policy import policy as oslo_policy

from placement import exception
from placement import policies

LOG = logging.getLogger(__name__)
_ENFORCER = None
# Seconds between looks for a changed policy file.
RECHECK_INTERVAL = 1.0


class Enforcer(oslo_policy.Enforcer):
    """oslo.policy's enforcer, looking for a new or changed policy file at
    most once per RECHECK_INTERVAL instead of on every check: the search
    (several stat calls per configured directory) cost 0.2 ms, a sixth of
    a simple request."""

    _next_check = 0.0
    # (the rules they were made under, {decision key: True} or None when
    # those rules cannot be remembered): see allowed_before.
    _allowed = (None, None)

    def load_rules(self, force_reload=False):
        now = time.monotonic()
        if force_reload or not self.rules or now >= self._next_check:
            super().load_rules(force_reload)
            self._next_check = now + RECHECK_INTERVAL

    def allowed_before(self):
        """{decision key: True}: what the current rules allowed already.

        Evaluating a rule costs oslo.policy about 30 us (it inspects each
        check's signature on every call); a decision depends only on the
        rules, the action, the target and the credentials, so an allowed
        one is remembered until the rules change (a reloaded policy file
        makes a new Rules object). Denials are not remembered: they raise
        and log as before. Rules with a check that asks elsewhere (http:,
        https:, or any other registered kind) are never remembered; None
        then."""
        self.load_rules()
        rules, allowed = self._allowed
        if rules is not self.rules:
            allowed = {} if _pure(self.rules) else None
            self._allowed = (self.rules, allowed)
        return allowed


_PURE_CHECKS = (_checks.TrueCheck, _checks.FalseCheck, _checks.RoleCheck,
                _checks.GenericCheck, _checks.RuleCheck)
# Remembered decisions per set of rules: (action, target, credentials)
# combinations are few in a deployment, but a bound costs nothing.
_MAX_ALLOWED = 4096


def _pure(rules):
    """Every check of every rule decides from target and credentials
    alone."""
    stack = list(rules.values())
    while stack:
        check = stack.pop()
        if isinstance(check, (_checks.AndCheck, _checks.OrCheck)):
            stack.extend(check.rules)
        elif isinstance(check, _checks.NotCheck):
            stack.append(check.rule)
        elif type(check) not in _PURE_CHECKS:
            return False
    return True


def _frozen(value):
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _decision_key(action, target, creds):
    try:
        key = (action,
               tuple(sorted((k, _frozen(v)) for k, v in target.items())),
               tuple(sorted((k, _frozen(v)) for k, v in creds.items())))
        hash(key)
    except TypeError:
        return None         # an unhashable value: not remembered
    return key


def reset():
    global _ENFORCER
    if _ENFORCER is not None:
        _ENFORCER.clear()
    _ENFORCER = None


def init(conf, rules=None, suppress_deprecation_warnings=False):
    """Build the enforcer from the defaults plus any operator policy file.

    Each application (and each test fixture) gets its own enforcer over its
    own config, so this always replaces the previous one.
    """
    global _ENFORCER
    enforcer = Enforcer(conf)
    # Every default changed with the scoped-role work; warning about each
    # one on every start helps nobody (upstream silences them too).
    enforcer.suppress_default_change_warnings = True
    enforcer.suppress_deprecation_warnings = suppress_deprecation_warnings
    enforcer.register_defaults(rules or policies.list_rules())
    enforcer.load_rules()
    _ENFORCER = enforcer
    return enforcer


def get_enforcer():
    """For the oslopolicy-* tools: an enforcer over the default config (and
    whatever config files the tool was pointed at)."""
    conf = cfg.ConfigOpts()
    from placement import conf as placement_conf
    placement_conf.register_opts(conf)
    conf([], project='placement')
    return init(conf)


def authorize(context, action, target, do_raise=True):
    """Is ``context`` allowed ``action`` on ``target``? PolicyNotAuthorized
    (403) if not and ``do_raise``; else False."""
    if _ENFORCER is None:
        raise RuntimeError('policy enforcer not initialised')
    allowed = _ENFORCER.allowed_before()
    key = None
    if allowed is not None:
        key = _decision_key(action, target, context.to_policy_values())
        if key is not None and key in allowed:
            return True
    try:
        result = _ENFORCER.authorize(
            action, target, context, do_raise=do_raise,
            exc=exception.PolicyNotAuthorized, action=action)
        if result and key is not None:
            if len(allowed) >= _MAX_ALLOWED:
                allowed.clear()
            allowed[key] = True
        return result
    except oslo_policy.InvalidScope:
        # A token of the wrong scope (e.g. system scope where rules want
        # project scope). Upstream's message here is the bare rule name.
        LOG.debug('Policy check for %s failed: token scope not allowed',
                  action)
        if not do_raise:
            return False
        raise exception.PolicyNotAuthorized(action)
    except exception.PolicyNotAuthorized:
        LOG.debug('Policy check for %(action)s failed with credentials '
                  '%(credentials)s',
                  {'action': action,
                   'credentials': context.to_policy_values()})
        raise
