"""Nothing in the code goes undocumented: every option the service
registers, every policy rule, every placement-manage command and option,
every placement-status check, every URL outside upstream's and every
script in tools/ must be in the documentation's sources. The checks read
the .rst files (no Sphinx build): the generated references count through
the generator configuration they name, the rest by name on their page."""
import argparse
import importlib
import os
import re

from keystonemiddleware import auth_token
from oslo_config import cfg
from oslo_config import generator

from placement.cmd import manage
from placement.cmd import status
from placement import conf as placement_conf
from placement import handler
from placement import policies
from placement.policies import ops

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
DOC = os.path.join(REPO, 'doc', 'source')

# Upstream Placement 16.0.0's URL space (its handler's route table);
# everything else we serve is ours and needs a reference page.
UPSTREAM_ROUTES = {
    '': {'GET'},
    '/': {'GET'},
    '/resource_classes': {'GET', 'POST'},
    '/resource_classes/{name}': {'GET', 'PUT', 'DELETE'},
    '/resource_providers': {'GET', 'POST'},
    '/resource_providers/{uuid}': {'GET', 'PUT', 'DELETE'},
    '/resource_providers/{uuid}/inventories': {'GET', 'POST', 'PUT',
                                               'DELETE'},
    '/resource_providers/{uuid}/inventories/{resource_class}': {
        'GET', 'PUT', 'DELETE'},
    '/resource_providers/{uuid}/usages': {'GET'},
    '/resource_providers/{uuid}/aggregates': {'GET', 'PUT'},
    '/resource_providers/{uuid}/allocations': {'GET'},
    '/resource_providers/{uuid}/traits': {'GET', 'PUT', 'DELETE'},
    '/allocations': {'POST'},
    '/allocations/{consumer_uuid}': {'GET', 'PUT', 'DELETE'},
    '/allocation_candidates': {'GET'},
    '/traits': {'GET'},
    '/traits/{name}': {'GET', 'PUT', 'DELETE'},
    '/usages': {'GET'},
    '/reshaper': {'POST'},
}


def _read(*path):
    with open(os.path.join(REPO, *path)) as f:
        return f.read()


def _generator_conf(name):
    """The namespaces of an oslo generator file (repeated keys, which
    configparser refuses)."""
    lines = _read('etc', 'placement', name).splitlines()
    return [line.split('=', 1)[1].strip() for line in lines
            if line.split('=', 1)[0].strip() == 'namespace']


def registered_options():
    """(group, option) of everything the service registers, keystone's
    [keystone_authtoken] included (keystonemiddleware registers it when
    the pipeline loads)."""
    conf = cfg.ConfigOpts()
    # oslo.config's own (config_source...), in every ConfigOpts.
    builtin = {('DEFAULT', name) for name in conf._opts}
    placement_conf.register_opts(conf)
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    found = set()
    for name, opt in conf._opts.items():
        found.add(('DEFAULT', name))
    for group in conf._groups.values():
        for name in group._opts:
            found.add((group.name, name))
    return found - builtin


def documented_options():
    """(group, option) the configuration reference shows: the namespaces
    of the generator file its show-options directive names."""
    page = _read('doc', 'source', 'configuration.rst')
    assert re.search(r'\.\. show-options::\n   :config-file: '
                     r'etc/placement/config-generator\.conf', page)
    found = set()
    for _ns, groups in generator._list_opts(
            _generator_conf('config-generator.conf')):
        for group, opts in groups:
            name = getattr(group, 'name', group) or 'DEFAULT'
            for opt in opts:
                found.add((name, opt.dest))
    return found


def test_every_option_is_in_the_reference():
    missing = registered_options() - documented_options()
    assert not missing, ('options registered but not in the generated '
                         'reference (add their namespace to '
                         'etc/placement/config-generator.conf): %s'
                         % sorted(missing))


def test_every_policy_rule_is_in_the_reference():
    """The policy page generates from the 'placement' namespace, which
    setup.cfg points at placement.policies.list_rules; the extensions'
    rules are also named on their reference page."""
    page = _read('doc', 'source', 'policy.rst')
    assert re.search(r'\.\. show-policy::\n   :config-file: '
                     r'etc/placement/policy-generator\.conf', page)
    assert _generator_conf('policy-generator.conf') == ['placement']
    assert re.search(r'oslo\.policy\.policies =\n\s+placement = '
                     r'placement\.policies:list_rules', _read('setup.cfg'))
    # A module of rules left out of list_rules would be missing from the
    # reference (and unregistered).
    listed = {r.name for r in policies.list_rules()}
    package = os.path.dirname(policies.__file__)
    for filename in sorted(os.listdir(package)):
        if filename.endswith('.py') and filename != '__init__.py':
            module = importlib.import_module(
                'placement.policies.' + filename[:-3])
            if hasattr(module, 'list_rules'):
                names = {r.name for r in module.list_rules()}
                assert names <= listed, (filename, names - listed)
    extensions = _read('doc', 'source', 'api', 'extensions.rst')
    missing = [r.name for r in ops.list_rules() if r.name not in extensions]
    assert not missing, missing


def manage_commands():
    """{program: set of options} of placement-manage, from its parsers:
    e.g. 'placement-manage db version': {'--extra'}; positionals by
    name."""
    parser = argparse.ArgumentParser(prog='placement-manage')
    sub = parser.add_subparsers()
    manage._add_parsers(sub, db=manage.DbCommands(None),
                        traits=manage.OsTraitsCommands(None),
                        ops=manage.ops_cmd.OpsCommands(None))
    found = {}

    def walk(prog, p):
        subs = [a for a in p._actions
                if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, child in subs[0].choices.items():
                walk('%s %s' % (prog, name), child)
            return
        opts = set()
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            opts.add(action.option_strings[0] if action.option_strings
                     else action.dest)
        found[prog] = opts
    walk('placement-manage', parser)
    return found


def documented_programs(page):
    """{program: set of options} from the page's ``.. program::`` and
    ``.. option::`` directives."""
    found = {}
    current = None
    for line in page.splitlines():
        m = re.match(r'\.\. program:: (.+)$', line)
        if m:
            current = m.group(1).strip()
            found.setdefault(current, set())
            continue
        m = re.match(r'\.\. option:: (\S+)', line)
        if m:
            assert current, line
            found[current].add(m.group(1))
    return found


def test_every_manage_command_is_documented():
    """Both ways: a command or option in the code and not on the page
    fails, and so does one the page describes that no longer exists."""
    page = _read('doc', 'source', 'cli', 'placement-manage.rst')
    assert documented_programs(page) == manage_commands()


def test_every_status_check_is_documented():
    page = _read('doc', 'source', 'cli', 'placement-status.rst')
    assert documented_programs(page) == {
        'placement-status upgrade check': {'--json'}}
    for name, _check in status.Checks._upgrade_checks:
        assert '\n%s\n' % name in page, name


def extension_routes():
    """(method, path) we serve outside upstream's URL space, optional
    routes included."""
    routes = dict(handler.ROUTES)
    for _enabled, url, targets in handler.OPTIONAL_ROUTES:
        routes[url] = targets
    return {(method, path) for path, methods in routes.items()
            for method in methods
            if method not in UPSTREAM_ROUTES.get(path, ())}


def test_every_extension_route_is_documented():
    """Each is a heading of the extensions page (or named in one)."""
    page = _read('doc', 'source', 'api', 'extensions.rst')
    headings = re.findall(r'^(.+)\n=+\n', page, re.M)
    documented = set()
    for heading in headings:
        documented.update(re.findall(r'(GET|PUT|POST|DELETE|PATCH) (/\S*)',
                                     heading.replace(',', ' ')))
    routes = extension_routes()
    assert routes, 'no extension route found: is the route table moved?'
    assert routes == documented, (
        'undocumented: %s; documented but not served: %s'
        % (sorted(routes - documented), sorted(documented - routes)))


def test_every_tool_is_listed():
    listing = _read('tools', 'README.rst')
    listed = set(re.findall(r'^``([\w.-]+)``$', listing, re.M))
    tools_dir = os.path.join(REPO, 'tools')
    scripts = {name for name in os.listdir(tools_dir)
               if os.path.isfile(os.path.join(tools_dir, name))
               and name != 'README.rst'}
    assert scripts == listed, (
        'not listed: %s; listed but gone: %s'
        % (sorted(scripts - listed), sorted(listed - scripts)))
