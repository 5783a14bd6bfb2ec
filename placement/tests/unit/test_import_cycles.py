"""No import cycles between placement's own modules.

A cycle (resource_provider and trait once imported each other, one of them
inside a function to dodge the partial-module error) makes the import order
matter and hides which module owns what. Every import statement counts,
function-local ones included.
"""
import ast
import os

import placement

ROOT = os.path.dirname(placement.__file__)


def _module_name(path):
    rel = os.path.relpath(path, os.path.dirname(ROOT))[:-len('.py')]
    parts = rel.split(os.sep)
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts)


def import_graph():
    """{module: set of placement modules it imports}, tests excluded."""
    modules = {}
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d != 'tests']
        for name in filenames:
            if name.endswith('.py'):
                path = os.path.join(dirpath, name)
                modules[_module_name(path)] = path
    graph = {}
    for mod, path in modules.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                if node.level:
                    pkg = mod.split('.')
                    if not path.endswith('__init__.py'):
                        pkg = pkg[:-1]
                    pkg = pkg[:len(pkg) - node.level + 1]
                    base = '.'.join(pkg + [node.module])
                # ``from p import m`` of a module m needs p.m (p comes
                # with it, as every module's packages do); of any other
                # name it reads p itself.
                subs = ['%s.%s' % (base, a.name) for a in node.names]
                names = [n for n in subs if n in modules]
                if len(names) < len(subs):
                    names.append(base)
            else:
                continue
            deps.update(n for n in names if n in modules and n != mod)
        graph[mod] = deps
    return graph


def find_cycle(graph):
    """One cycle as a list of modules, or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = 'open'
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 'open':
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 'done'
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == [
        'a', 'b', 'c', 'a']
    assert find_cycle({'a': {'b'}, 'b': set()}) is None


def test_objects_import_each_other_one_way_only():
    graph = import_graph()
    objects = {m: {d for d in deps if d.startswith('placement.objects')}
               for m, deps in graph.items()
               if m.startswith('placement.objects')}
    assert 'placement.objects.trait' in objects['placement.objects.'
                                                'resource_provider']
    assert find_cycle(objects) is None, find_cycle(objects)


def test_placement_imports_one_way_only():
    """The whole package, not only the objects: auth and keystone_auth
    once imported each other, the second one inside a function."""
    graph = import_graph()
    assert 'placement.public_paths' in graph['placement.keystone_auth']
    assert find_cycle(graph) is None, find_cycle(graph)
