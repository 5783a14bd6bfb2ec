"""The node's world file written by a process of its own.

Reading every provider of a large world and writing the node's file is
seconds of CPU. In a thread of a worker it holds that worker's
interpreter lock half the time, so every request the worker serves
meanwhile takes twice as long. A process started for it, from the
interpreter the worker runs, leaves the lock to the requests: it reads
and writes the file under the file's lock, as a worker would
(``renew_node_file``), and the workers then take the file up and catch
up from the change log, as they take up any file another process of the
node wrote. It runs at the workers' CPU priority: niced, it read for
longer on a busy node, and the database answered candidates meanwhile
at a far higher cost than the world (figures: doc/source/benchmarks.rst).

Smaller worlds (``settings.WRITE_IN_A_PROCESS_FROM``), and where no such
process can be started (no interpreter found: a server embedding Python
under another name) or it fails, have the file written in the worker's
thread (``renew_node_file``).
"""
import contextlib
import importlib
import json
import logging as std_logging
import os
import subprocess
import sys
import time

from oslo_log import log as logging

from placement import context as placement_context
from placement.db import api as db_api
from placement.objects.candidates import node_file
from placement.objects import changes
from placement.objects.candidates.world import settings

LOG = logging.getLogger(__name__)

# What the process runs (a module run with -m would be imported twice),
# given the World class to write with.
_MAIN = ('from placement.objects.candidates.world import apart, registry; '
         'apart.main(registry.World)')


def interpreter():
    """The Python the process runs on: this one's, when it is a Python
    (under uwsgi or mod_wsgi sys.executable is the server), else the
    environment's python3; None if neither."""
    exe = sys.executable or ''
    if os.path.basename(exe).startswith('python'):
        return exe
    exe = os.path.join(sys.prefix, 'bin', 'python3')
    return exe if os.access(exe, os.X_OK) else None


def renew_node_file(world_class, path, ino, engine, config, mysql,
                    locked=False):
    """Write the node's file at ``path`` again from the database, unless
    another process did since it was ``ino`` (this one waited for the
    file's lock meanwhile), with a scratch world of ``world_class``;
    whether the file is now written. In a thread of a worker, or in the
    process of its own (main), which the worker's lock covers
    (``locked``)."""
    start = time.perf_counter()
    ctx = placement_context.admin_context(config)
    scratch = world_class()
    scratch._mysql = mysql
    try:
        with contextlib.nullcontext() if locked else node_file.locked(path):
            if node_file.inode(path) != ino:
                return True
            with engine.connect() as conn:
                epoch, current = changes.counters(conn)
                scratch._write_node_file(
                    ctx, path, scratch._read_snapshot(conn, epoch, current))
    except Exception:
        LOG.exception('Allocation candidates: writing %s failed; the '
                      'next request past the threshold reads the world '
                      'itself.', path)
        return False
    LOG.info('Allocation candidates: wrote %s from the database in '
             '%.3f s.', path, time.perf_counter() - start)
    return True


def renew_apart(world_class, path, ino, engine, config, mysql, providers):
    """renew_node_file, in a process of its own for a world of
    ``providers`` when one is due and can be started (write_in_a_process),
    else here."""
    if not write_in_a_process(path, ino, engine, config, providers):
        renew_node_file(world_class, path, ino, engine, config, mysql)


def write_in_a_process(path, ino, engine, config, providers):
    """Have a process of its own write the node's file at ``path`` from
    the database of ``engine``, unless another process wrote it since it
    was ``ino``; wait for it. True when the file was so written; False
    when the world's ``providers`` are too few for it, or no process
    could write it (the caller then writes here)."""
    least = settings.WRITE_IN_A_PROCESS_FROM
    exe = None if least is None or providers < least else interpreter()
    if exe is None:
        return False
    options = db_api.facade_options(config) if config is not None else {}
    options.setdefault('galera_sync_wait', 0)
    # The database this process reads (a test's may not be the
    # configured one), its parameters in the URL already.
    options.update(
        connection=engine.url.render_as_string(hide_password=False),
        connection_parameters='')
    options.pop('slave_connection', None)
    order = {'path': path, 'ino': ino, 'options': options,
             'renderer': (settings.RENDERER[1].__module__
                          if settings.RENDERER else None)}
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    start = time.perf_counter()
    try:
        # Under the file's lock, which the process holds with this one:
        # the node's other workers wait for it here, each in its loading
        # thread, rather than start a process of their own that would
        # find the file written (a second of CPU each for its imports).
        with node_file.locked(path) as lock:
            if node_file.inode(path) != ino:
                return True
            proc = subprocess.Popen([exe, '-c', _MAIN],
                                    stdin=subprocess.PIPE, env=env,
                                    pass_fds=(lock,))
            proc.communicate(json.dumps(order).encode())
    except OSError as exc:
        LOG.warning('Allocation candidates: cannot start a process to '
                    'write %s (%s); this one reads the world.', path, exc)
        return False
    if proc.returncode != 0:
        LOG.warning('Allocation candidates: the process writing %s ended '
                    'with status %s; this one reads the world.', path,
                    proc.returncode)
        return False
    LOG.info('Allocation candidates: process %d wrote %s in %.3f s.',
             proc.pid, path, time.perf_counter() - start)
    return True


def main(world_class):
    """The process: write_in_a_process's order on standard input; status
    0 when the file is written (or another process wrote it meanwhile)."""
    std_logging.basicConfig(
        stream=sys.stderr, level=std_logging.INFO,
        format='%(asctime)s %(process)d %(levelname)s %(name)s '
               '%(message)s')
    order = json.load(sys.stdin)
    db_api.configure_with(order['options'])
    if order['renderer']:
        # Registers the workers' rendering of trees (render_trees_with).
        importlib.import_module(order['renderer'])
    engine = db_api.get_engine()
    done = renew_node_file(world_class, order['path'], order['ino'], engine,
                           None, engine.dialect.name == 'mysql', locked=True)
    sys.exit(0 if done else 1)
