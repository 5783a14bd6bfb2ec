"""The model-based freshness check of the in-memory world (issue 28).

GET /allocation_candidates is answered from each process's in-memory world
(candidates/world.py), refreshed at every request from the database's
change counters. This check proves that no write, by anybody, leaves a
world behind: random sequences of every write the API offers, made by a
random one of our processes at random microversions (and, by mode, by
upstream 16.0.0's app and by SQL typed by hand), each followed by a random
candidates query sent to every world process and to a process answering
with the SQL engine (``gather.USE_WORLD = False``) over the same
database. Every world must answer exactly as SQL: status, allocation
requests, mappings and provider summaries (randomize off; orders the API
leaves undefined are normalised).

Processes (see ``Cluster``): ``PROCESSES`` of ours keeping worlds, one of
ours answering with SQL (it also writes, and runs ``placement-manage``),
and in ``upstream`` mode upstream's app; each is a child speaking JSON
lines (freshness_server.py, upstream_runner.py) over one database.

Modes say who writes besides our API: ``ours`` (our API and
placement-manage only), ``upstream`` (half the API writes by upstream),
``sql`` (half the writes by hand), ``all`` (a third each).

The world is small (5-15 providers in a few trees, a sharing provider,
standard and custom classes and traits, a few aggregates) so that a step
(one write, one query in three processes, two snapshots of the tables)
costs little: 25-35 ms of CPU over all the processes. Right after a
write, the query is mostly about what it touched (see Focus). ``run``
raises ``Mismatch`` with the seed, the step, the tail of the writes, a
diff of the answers and whether a full reload put the world right;
``tools/freshness-check`` runs it long. ``without_each_trigger`` shows
that each trigger on the tables candidates read is needed.
"""
import collections
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib

import sqlalchemy as sa

from placement.db import migration
from placement.db import models
from placement.tests import db as test_db
from placement.tests.functional import upstream_venv

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, 'freshness_server.py')
UPSTREAM_RUNNER = os.path.join(HERE, 'upstream_runner.py')

MODES = ('ours', 'upstream', 'sql', 'all')
# World processes of ours (each its own world).
PROCESSES = 2
# The newest microversion (ours and upstream 16.0.0).
LATEST = 39
# Seconds a process may take to answer (a hung one fails the run).
ANSWER_TIMEOUT = 300

_RP, _INV, _ALLOC = models.RP, models.INV, models.ALLOC
_RPT, _RPA, _AGG = models.RPT, models.RPA, models.AGG
_TRAIT, _RC, _CONSUMER = models.TRAIT, models.RC, models.CONSUMER

# What the random writes and queries pick from.
STANDARD_RCS = ['VCPU', 'MEMORY_MB', 'DISK_GB']
CUSTOM_RCS = ['CUSTOM_GPU', 'CUSTOM_FPGA', 'CUSTOM_NIC', 'CUSTOM_PMEM',
              'CUSTOM_QAT']
SHARES = 'MISC_SHARES_VIA_AGGREGATE'
STANDARD_TRAITS = ['HW_CPU_X86_AVX', 'STORAGE_DISK_SSD', SHARES]
CUSTOM_TRAITS = ['CUSTOM_A', 'CUSTOM_B', 'CUSTOM_C', 'CUSTOM_D']
# Names traits get renamed to by hand (the API cannot rename a trait).
RENAMED_TRAITS = ['CUSTOM_E', 'CUSTOM_F', 'CUSTOM_G']
AGGS = ['a99e0000-0000-4000-8000-00000000000%d' % i for i in range(4)]
PROJECTS = ['p0', 'p1']
USERS = ['u0', 'u1']
MIN_PROVIDERS, MAX_PROVIDERS = 5, 15
MAX_CONSUMERS = 12
MAX_CUSTOM_RCS = 4


def _v(minor):
    return '1.%d' % minor


def _uuid(rnd):
    """A uuid from the run's seed (a run is replayed from its seed)."""
    return str(uuidlib.UUID(int=rnd.getrandbits(128), version=4))


# -- processes ---------------------------------------------------------------

class Child:
    """A child process answering JSON lines; ``name`` for reports."""

    def __init__(self, name, argv, env, cwd=None):
        self.name = name
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._err, env=env, cwd=cwd, text=True, bufsize=1)

    def send(self, req):
        self.proc.stdin.write(json.dumps(req) + '\n')
        self.proc.stdin.flush()

    def receive(self, timeout=ANSWER_TIMEOUT):
        # One line is ever outstanding, so nothing waits in the buffer
        # when the pipe shows nothing to read.
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            raise RuntimeError('%s gave no answer in %ds:\n%s' % (
                self.name, timeout, self.stderr()[-4000:]))
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError('%s exited (%s):\n%s' % (
                self.name, self.proc.poll(), self.stderr()[-4000:]))
        return json.loads(line)

    def call(self, req):
        self.send(req)
        return self.receive()

    def cpu(self):
        """Seconds of CPU this process used so far (Linux; 0 elsewhere)."""
        try:
            with open('/proc/%d/stat' % self.proc.pid) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf(
            'SC_CLK_TCK')

    def stderr(self):
        self._err.seek(0)
        return self._err.read().decode(errors='replace')

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._err.close()


class Cluster:
    """A fresh database and the processes over it (a context manager).

    ``worlds``: our processes answering from memory; ``sql``: ours
    answering with the SQL engine (and running placement-manage);
    ``upstream``: upstream's app (upstream mode only). With upstream, the
    schema is made by upstream's migrations and then ours, as in a
    deployment that moved from upstream to us. ``control``: the worlds
    reload everything at every request, so they cannot be stale (what is
    left to fail is the check itself, or the engines disagreeing)."""

    def __init__(self, processes=PROCESSES, upstream=False, control=False):
        self.n_worlds = processes
        self.with_upstream = upstream
        self.control = control
        self.db = None
        self.worlds = []
        self.sql = None
        self.upstream = None

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _start(self):
        # One database made at a time: alembic's state is global, and
        # clusters may be started by several threads (see concurrently).
        with _MIGRATING:
            self._make_database()
        # The test's own connections: plain ones (no BEGIN IMMEDIATE on
        # SQLite), for snapshots and SQL by hand.
        self.engine = sa.create_engine(self.db.url)
        env = dict(os.environ)
        env.pop(test_db.ENV_VAR, None)
        # Our package first, wherever the test imported it from.
        root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
        env['PYTHONPATH'] = os.pathsep.join(
            [root] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                      if p])
        url = self.db.url
        world = [sys.executable, SERVER, url] + (
            ['--reload-every-request'] if self.control else [])
        self.worlds = [Child('ours%d' % i, world, env)
                       for i in range(self.n_worlds)]
        self.sql = Child('ours-sql', [sys.executable, SERVER, url, '--sql'],
                         env)
        if self.with_upstream:
            self.upstream = Child(
                'upstream', [upstream_venv.executable('upstream'),
                             UPSTREAM_RUNNER, url], _upstream_env(), cwd='/')
        for child in self.worlds + [self.sql]:
            ready = child.receive()
            assert ready == {'ready': True}, ready

    def _make_database(self):
        if self.with_upstream:
            upstream_py = upstream_venv.executable('upstream')
            self.db = test_db.TestDatabase(schema=False)
            subprocess.run([upstream_py, UPSTREAM_RUNNER, self.db.url,
                            'init'], check=True, cwd='/',
                           env=_upstream_env())
            migration.upgrade('head', engine=self.db.engine)
        else:
            self.db = test_db.TestDatabase(migrate=True)

    def ours(self):
        """Every process of ours (the writers of ours)."""
        return self.worlds + [self.sql]

    def cpu(self):
        """CPU seconds used so far by the children and this thread (the
        driver; other threads may drive other clusters)."""
        return time.thread_time() + sum(
            c.cpu() for c in self.worlds + [self.sql, self.upstream] if c)

    def manage(self, *args):
        return self.sql.call({'manage': list(args)})

    def close(self):
        for child in self.worlds + [self.sql, self.upstream]:
            if child is not None:
                child.close()
        self.worlds, self.sql, self.upstream = [], None, None
        if getattr(self, 'engine', None) is not None:
            self.engine.dispose()
            self.engine = None
        if self.db is not None:
            self.db.drop()
            self.db = None


_MIGRATING = threading.Lock()


def _upstream_env():
    """Upstream's interpreter must not find our package first."""
    env = dict(os.environ)
    env.pop('PYTHONPATH', None)
    env.pop(test_db.ENV_VAR, None)
    return env


# -- what the database holds -------------------------------------------------

class Snapshot:
    """The rows the random writes and queries are made from, read in one
    go from the database (whoever wrote them)."""

    def __init__(self, conn):
        self.rps = {r.id: r for r in conn.execute(sa.select(
            _RP.c.id, _RP.c.uuid, _RP.c.name, _RP.c.generation,
            _RP.c.parent_provider_id, _RP.c.root_provider_id))}
        self.rc_names = dict(conn.execute(
            sa.select(_RC.c.id, _RC.c.name)).all())
        self.rc_ids = {n: i for i, n in self.rc_names.items()}
        self.inv = {}           # (rp id, rc id) -> row
        for r in conn.execute(sa.select(
                _INV.c.resource_provider_id, _INV.c.resource_class_id,
                _INV.c.total, _INV.c.reserved, _INV.c.min_unit,
                _INV.c.max_unit, _INV.c.step_size,
                _INV.c.allocation_ratio)):
            self.inv[(r[0], r[1])] = r
        self.allocs = collections.defaultdict(dict)  # consumer -> {(rp,rc)}
        self.used = collections.Counter()           # (rp, rc) -> used
        for rp, consumer, rc, used in conn.execute(sa.select(
                _ALLOC.c.resource_provider_id, _ALLOC.c.consumer_id,
                _ALLOC.c.resource_class_id, _ALLOC.c.used)):
            self.allocs[consumer][(rp, rc)] = used
            self.used[(rp, rc)] += used
        self.consumer_gen = dict(conn.execute(sa.select(
            _CONSUMER.c.uuid, _CONSUMER.c.generation)).all())
        self.trait_names = dict(conn.execute(
            sa.select(_TRAIT.c.id, _TRAIT.c.name).where(sa.or_(
                _TRAIT.c.name.like('CUSTOM_%'),
                _TRAIT.c.name.in_(STANDARD_TRAITS)))).all())
        self.rp_traits = collections.defaultdict(set)
        for rp, tid in conn.execute(sa.select(_RPT.c.resource_provider_id,
                                              _RPT.c.trait_id)):
            self.rp_traits[rp].add(tid)
        self.agg_uuids = dict(conn.execute(
            sa.select(_AGG.c.id, _AGG.c.uuid)).all())
        self.agg_ids = {u: i for i, u in self.agg_uuids.items()}
        self.rp_by_uuid = {r.uuid: r.id for r in self.rps.values()}
        self.rp_aggs = collections.defaultdict(set)
        for rp, aid in conn.execute(sa.select(_RPA.c.resource_provider_id,
                                              _RPA.c.aggregate_id)):
            self.rp_aggs[rp].add(aid)

    # -- helpers --------------------------------------------------------------

    def custom_rcs(self):
        return sorted(n for n in self.rc_names.values()
                      if n.startswith('CUSTOM_'))

    def classes(self):
        """Names of the classes a provider could hold."""
        return STANDARD_RCS + self.custom_rcs()

    def custom_traits(self):
        return sorted(n for n in self.trait_names.values()
                      if n.startswith('CUSTOM_'))

    def traits(self):
        return sorted(self.trait_names.values())

    def children(self, rp_id):
        return [r.id for r in self.rps.values()
                if r.parent_provider_id == rp_id]

    def subtree(self, rp_id):
        out, todo = [], [rp_id]
        while todo:
            rid = todo.pop()
            out.append(rid)
            todo.extend(self.children(rid))
        return out

    def invs_of(self, rp_id):
        return {rc: row for (rp, rc), row in self.inv.items()
                if rp == rp_id}

    def free(self, rp_id, rc_id, consumer=None):
        """Units of ``rc_id`` left on ``rp_id`` (a consumer's own usage
        counts as free when it is being replaced)."""
        row = self.inv.get((rp_id, rc_id))
        if row is None:
            return 0
        cap = int((row.total - row.reserved) * row.allocation_ratio)
        used = self.used[(rp_id, rc_id)]
        if consumer is not None:
            used -= self.allocs.get(consumer, {}).get((rp_id, rc_id), 0)
        return cap - used

    def amount(self, rnd, rp_id, rc_id, consumer=None):
        """A valid amount to allocate; when none fits, and now and then,
        one the API refuses (over max_unit or capacity), in the column's
        range (SQL by hand uses it too)."""
        row = self.inv.get((rp_id, rc_id))
        if row is None:
            return rnd.randint(1, 4)
        top = min(row.max_unit, self.free(rp_id, rc_id, consumer))
        low = max(row.min_unit, row.step_size)
        low += (-low) % row.step_size
        if top < low or rnd.random() < 0.05:
            return rnd.choice([1, row.total, min(row.max_unit + 1,
                                                 2 ** 31 - 1)])
        steps = (top - low) // row.step_size
        return low + row.step_size * rnd.randint(0, min(steps, 3))


# -- writes ------------------------------------------------------------------

class Write:
    """One write: an API request (``method``, ``path``, ``version``,
    ``body``), SQL statements typed by hand (``sql``: [(text, params)]),
    or a placement-manage command (``manage``: args). ``kind`` names it in
    counts and reports; ``writer`` (ours, upstream, hand, manage) and
    ``by`` (the process) are filled in when it runs."""

    def __init__(self, kind, method=None, path=None, version=None,
                 body=None, sql=None, manage=None):
        self.kind = kind
        self.method, self.path, self.version = method, path, version
        self.body = body
        self.sql = sql
        self.manage = manage
        self.writer = self.by = None
        self.status = None

    def refused(self):
        """An API write answered 4xx (which must have changed nothing)."""
        return self.method is not None and self.status >= 400

    def request(self):
        # A service (the reshaper is for services only) and an admin.
        return {'method': self.method, 'path': self.path,
                'version': self.version, 'body': self.body,
                'headers': {'x-roles': 'admin,service'}}

    def __str__(self):
        if self.sql is not None:
            what = '; '.join('%s %s' % (t, p or '') for t, p in self.sql)
        elif self.manage is not None:
            what = 'placement-manage ' + ' '.join(self.manage)
        else:
            what = '%s %s @%s %s' % (self.method, self.path, self.version,
                                     json.dumps(self.body)
                                     if self.body is not None else '')
        return '[%s by %s -> %s] %s' % (self.kind, self.by, self.status,
                                        what)


def _tables(kind, tables):
    """The tables a write kind writes: the entry of ``tables`` for its
    longest prefix."""
    parts = kind.split('_')
    for n in range(len(parts), 0, -1):
        found = tables.get('_'.join(parts[:n]))
        if found is not None:
            return found
    return ()


def _pick(rnd, weights, tables, favour):
    """A kind by weight; ``favour`` (a table) makes the kinds writing it
    ten times likelier (to show its trigger is needed, sooner)."""
    kinds = list(weights)
    return rnd.choices(kinds, [
        weights[k] * (10 if favour in _tables(k, tables) else 1)
        for k in kinds])[0]


class ApiWrites:
    """Random API writes made from a Snapshot; ``make(rnd, snap)`` picks
    one by weight. Most are valid; some are refused (stale generation,
    in-use inventory, a cycle...), which must change nothing."""

    WEIGHTS = {
        'inventory_put_all': 8, 'inventory_post': 4, 'inventory_put_one': 6,
        'inventory_delete_one': 3, 'inventory_delete_all': 2,
        'allocation_put': 14, 'allocation_post': 7,
        'allocation_delete': 5,
        'provider_create': 4, 'provider_delete': 3, 'provider_parent': 4,
        'provider_rename': 1,
        'traits_set': 6, 'traits_delete': 2, 'trait_create': 1,
        'trait_delete': 1,
        'aggregates_set': 6,
        'class_create': 2, 'class_rename': 3, 'class_delete': 2,
        'reshape': 4,
    }

    # The tables each kind writes (see favour).
    TABLES = {
        'inventory': ('inventories',), 'allocation': ('allocations',),
        'reshape': ('inventories', 'allocations'),
        'provider': ('resource_providers',),
        'provider_delete': ('resource_providers', 'inventories',
                            'resource_provider_traits',
                            'resource_provider_aggregates'),
        'traits': ('resource_provider_traits',), 'trait': ('traits',),
        'aggregates': ('resource_provider_aggregates',),
        'class': ('resource_classes',),
    }

    def make(self, rnd, snap, favour=None):
        if len(snap.rps) < MIN_PROVIDERS:
            kind = 'provider_create'
        else:
            kind = _pick(rnd, self.WEIGHTS, self.TABLES, favour)
        return getattr(self, kind)(rnd, snap, kind)

    # -- pickers ------------------------------------------------------------

    @staticmethod
    def _rp(rnd, snap):
        return snap.rps[rnd.choice(sorted(snap.rps))]

    @staticmethod
    def _gen(rnd, gen):
        """The generation to send: now and then a stale one."""
        return gen - 1 if rnd.random() < 0.03 else gen

    def _inv_record(self, rnd, rc, with_class=False):
        total = {'VCPU': rnd.randint(1, 16),
                 'MEMORY_MB': rnd.choice([512, 1024, 2048, 4096]),
                 'DISK_GB': rnd.choice([10, 100, 500, 1000])}.get(
            rc, rnd.randint(1, 8))
        rec = {'total': total}
        if rnd.random() < 0.2:
            rec['reserved'] = rnd.choice([0, 1, total // 4])
        if rnd.random() < 0.2:
            rec['allocation_ratio'] = rnd.choice([1.0, 1.5, 2.0, 16.0, 0.5])
        if rnd.random() < 0.15:
            rec['max_unit'] = max(1, total // rnd.choice([1, 2, 4]))
        if rnd.random() < 0.1:
            rec['min_unit'] = rnd.choice([1, 2])
        if rnd.random() < 0.1:
            rec['step_size'] = rnd.choice([1, 2])
        if with_class:
            rec['resource_class'] = rc
        return rec

    def _classes(self, rnd, snap, n):
        classes = snap.classes()
        if rnd.random() < 0.03:
            classes = classes + ['CUSTOM_MISSING']
        return rnd.sample(classes, min(n, len(classes)))

    # -- inventories --------------------------------------------------------

    def inventory_put_all(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        have = [snap.rc_names[rc] for rc in snap.invs_of(rp.id)]
        # Keep what it has, mostly: inventory in use may not go.
        names = set(n for n in have if rnd.random() < 0.8)
        names.update(self._classes(rnd, snap, rnd.choice([0, 1, 1, 2])))
        return Write(kind, 'PUT', '/resource_providers/%s/inventories'
                     % rp.uuid, _v(rnd.randint(0, LATEST)), {
                         'resource_provider_generation':
                             self._gen(rnd, rp.generation),
                         'inventories': {n: self._inv_record(rnd, n)
                                         for n in sorted(names)}})

    def inventory_post(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        rc = self._classes(rnd, snap, 1)[0]
        body = self._inv_record(rnd, rc, with_class=True)
        body['resource_provider_generation'] = self._gen(rnd, rp.generation)
        return Write(kind, 'POST', '/resource_providers/%s/inventories'
                     % rp.uuid, _v(rnd.randint(0, LATEST)), body)

    def _held(self, rnd, snap):
        """(provider, class name) of an inventory, if any."""
        if not snap.inv:
            return None, None
        rp_id, rc_id = rnd.choice(sorted(snap.inv))
        return snap.rps[rp_id], snap.rc_names[rc_id]

    def inventory_put_one(self, rnd, snap, kind):
        rp, rc = self._held(rnd, snap)
        if rp is None:
            return self.inventory_post(rnd, snap, 'inventory_post')
        body = self._inv_record(rnd, rc)
        body['resource_provider_generation'] = self._gen(rnd, rp.generation)
        return Write(kind, 'PUT', '/resource_providers/%s/inventories/%s'
                     % (rp.uuid, rc), _v(rnd.randint(0, LATEST)), body)

    def inventory_delete_one(self, rnd, snap, kind):
        rp, rc = self._held(rnd, snap)
        if rp is None:
            return self.inventory_post(rnd, snap, 'inventory_post')
        return Write(kind, 'DELETE', '/resource_providers/%s/inventories/%s'
                     % (rp.uuid, rc), _v(rnd.randint(0, LATEST)))

    def inventory_delete_all(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        return Write(kind, 'DELETE', '/resource_providers/%s/inventories'
                     % rp.uuid, _v(rnd.randint(5, LATEST)))

    # -- allocations --------------------------------------------------------

    def _placement(self, rnd, snap, consumer, like=None, avoid=()):
        """{rp uuid: {class: amount}}: for each class of ``like``
        ({(rp, rc): used}, a consumer's allocations) or of 1-3 random
        inventories, a provider holding it (another one than before for
        the classes in ``avoid``)."""
        wanted = sorted({rc for _, rc in like}) if like else sorted(
            {rc for _, rc in rnd.sample(sorted(snap.inv),
                                        min(len(snap.inv),
                                            rnd.randint(1, 3)))})
        out = collections.defaultdict(dict)
        for rc in wanted:
            holders = [rp for (rp, c) in sorted(snap.inv) if c == rc]
            elsewhere = [rp for rp in holders
                         if (rp, rc) not in (like or {})]
            if rc in avoid and elsewhere:
                holders = elsewhere
            if not holders:
                continue
            rp = rnd.choice(holders)
            out[snap.rps[rp].uuid][snap.rc_names[rc]] = snap.amount(
                rnd, rp, rc, consumer)
        return dict(out)

    def _consumer(self, rnd, snap, existing=None):
        """(uuid, its generation or None): an existing consumer or a new
        one."""
        if existing is None:
            existing = (snap.allocs and rnd.random() < 0.75) or (
                len(snap.allocs) >= MAX_CONSUMERS)
        if existing and snap.allocs:
            c = rnd.choice(sorted(snap.allocs))
            return c, snap.consumer_gen.get(c)
        return _uuid(rnd), None

    def _new_allocations(self, rnd, snap, consumer):
        """A new set of allocations for ``consumer``: a move (every class
        elsewhere), a partial replacement (some classes elsewhere, one
        added or dropped) or a fresh pick."""
        mine = snap.allocs.get(consumer)
        how = rnd.choice(['move', 'partial', 'fresh']) if mine else 'fresh'
        if how == 'move':
            return self._placement(rnd, snap, consumer, mine,
                                   avoid={rc for _, rc in mine}), how
        if how == 'partial':
            keep = {k: v for k, v in mine.items() if rnd.random() < 0.5}
            moved = {k: v for k, v in mine.items() if k not in keep}
            if moved and rnd.random() < 0.3:
                moved.pop(rnd.choice(sorted(moved)))       # dropped
            out = self._placement(rnd, snap, consumer, moved,
                                  avoid={rc for _, rc in moved}) if moved \
                else {}
            for (rp, rc), used in keep.items():
                if rp in snap.rps:
                    out.setdefault(snap.rps[rp].uuid, {})[
                        snap.rc_names.get(rc, 'CUSTOM_GONE')] = (
                        used if rnd.random() < 0.7
                        else snap.amount(rnd, rp, rc, consumer))
            if rnd.random() < 0.3:
                for u, res in self._placement(rnd, snap, consumer).items():
                    out.setdefault(u, {}).update(res)
            return out, how
        return self._placement(rnd, snap, consumer), how

    def _consumer_fields(self, rnd, minor, gen, body):
        if minor >= 8:
            body['project_id'] = rnd.choice(PROJECTS)
            body['user_id'] = rnd.choice(USERS)
        if minor >= 28:
            body['consumer_generation'] = (self._gen(rnd, gen)
                                           if gen is not None else None)
        if minor >= 38:
            body['consumer_type'] = rnd.choice(['INSTANCE', 'MIGRATION'])
        return body

    def allocation_put(self, rnd, snap, kind):
        consumer, gen = self._consumer(rnd, snap)
        allocs, how = self._new_allocations(rnd, snap, consumer)
        minor = rnd.randint(0, LATEST)
        if minor < 12:
            body = {'allocations': [
                {'resource_provider': {'uuid': u}, 'resources': res}
                for u, res in sorted(allocs.items())]}
        else:
            body = {'allocations': {u: {'resources': res}
                                    for u, res in allocs.items()}}
        self._consumer_fields(rnd, minor, gen, body)
        return Write('%s_%s' % (kind, how), 'PUT',
                     '/allocations/' + consumer, _v(minor), body)

    def allocation_post(self, rnd, snap, kind):
        """Several consumers at once: a migration's shape (one consumer's
        allocations moved to another, the first emptied), or random."""
        minor = rnd.randint(13, LATEST)
        body = {}
        if snap.allocs and rnd.random() < 0.5:
            source, gen = self._consumer(rnd, snap, existing=True)
            target = _uuid(rnd)
            body[target] = self._consumer_fields(rnd, minor, None, {
                'allocations': {u: {'resources': r} for u, r in
                                self._placement(
                                    rnd, snap, target,
                                    snap.allocs[source]).items()}})
            body[source] = self._consumer_fields(rnd, minor, gen, {
                'allocations': {}})
            kind += '_migration'
        for _ in range(rnd.randint(0 if body else 1, 2)):
            consumer, gen = self._consumer(rnd, snap)
            if consumer in body:
                continue
            allocs, _how = self._new_allocations(rnd, snap, consumer)
            if rnd.random() < 0.1:
                allocs = {}
            body[consumer] = self._consumer_fields(rnd, minor, gen, {
                'allocations': {u: {'resources': r}
                                for u, r in allocs.items()}})
        return Write(kind, 'POST', '/allocations', _v(minor), body)

    def allocation_delete(self, rnd, snap, kind):
        consumer, _gen = self._consumer(rnd, snap, existing=True)
        return Write(kind, 'DELETE', '/allocations/' + consumer,
                     _v(rnd.randint(0, LATEST)))

    # -- providers ----------------------------------------------------------

    def provider_create(self, rnd, snap, kind):
        minor = rnd.randint(0, LATEST)
        if len(snap.rps) >= MAX_PROVIDERS:
            return self.provider_delete(rnd, snap, 'provider_delete')
        body = {'name': 'rp-' + _uuid(rnd)[:8]}
        if rnd.random() < 0.7:
            body['uuid'] = _uuid(rnd)
        if minor >= 14 and snap.rps and rnd.random() < 0.6:
            parent = self._rp(rnd, snap)
            if parent.root_provider_id is not None:
                body['parent_provider_uuid'] = parent.uuid
        return Write(kind, 'POST', '/resource_providers', _v(minor), body)

    def provider_delete(self, rnd, snap, kind):
        if len(snap.rps) <= MIN_PROVIDERS:
            return self.provider_create(rnd, snap, 'provider_create')
        # Mostly one that can go: a leaf without allocations.
        used = {rp for allocs in snap.allocs.values() for rp, _ in allocs}
        free = [r for r in sorted(snap.rps) if r not in used
                and not snap.children(r)]
        rid = rnd.choice(free) if free and rnd.random() < 0.85 else \
            self._rp(rnd, snap).id
        return Write(kind, 'DELETE', '/resource_providers/%s'
                     % snap.rps[rid].uuid, _v(rnd.randint(0, LATEST)))

    def provider_parent(self, rnd, snap, kind):
        """A new parent: 1.37 on, anywhere (or none); before, a root may
        take one (the server refuses the rest)."""
        rp = self._rp(rnd, snap)
        mine = set(snap.subtree(rp.id))
        others = [r for r in sorted(snap.rps) if r not in mine]
        minor = rnd.choice([rnd.randint(14, 36), rnd.randint(37, LATEST),
                            rnd.randint(37, LATEST)])
        if rnd.random() < 0.05 and rp.parent_provider_id is not None:
            others = sorted(mine - {rp.id}) or others     # a cycle
        if others and (rp.parent_provider_id is None or
                       rnd.random() < 0.8):
            parent = snap.rps[rnd.choice(others)].uuid
        else:
            parent = None
        return Write(kind, 'PUT', '/resource_providers/' + rp.uuid,
                     _v(minor), {'name': rp.name,
                                 'parent_provider_uuid': parent})

    def provider_rename(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        minor = rnd.randint(0, LATEST)
        body = {'name': 'rp-' + _uuid(rnd)[:8]}
        if minor >= 14 and rp.parent_provider_id is not None:
            body['parent_provider_uuid'] = snap.rps[
                rp.parent_provider_id].uuid
        return Write(kind, 'PUT', '/resource_providers/' + rp.uuid,
                     _v(minor), body)

    # -- traits and aggregates ----------------------------------------------

    def traits_set(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        pool = sorted(set(snap.traits()) | set(STANDARD_TRAITS))
        names = rnd.sample(pool, rnd.randint(0, min(3, len(pool))))
        if rnd.random() < 0.03:
            names.append('CUSTOM_MISSING')
        return Write(kind, 'PUT', '/resource_providers/%s/traits' % rp.uuid,
                     _v(rnd.randint(6, LATEST)), {
                         'resource_provider_generation':
                             self._gen(rnd, rp.generation),
                         'traits': names})

    def traits_delete(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        return Write(kind, 'DELETE', '/resource_providers/%s/traits'
                     % rp.uuid, _v(rnd.randint(6, LATEST)))

    def trait_create(self, rnd, snap, kind):
        return Write(kind, 'PUT', '/traits/' + rnd.choice(CUSTOM_TRAITS),
                     _v(rnd.randint(6, LATEST)))

    def trait_delete(self, rnd, snap, kind):
        names = snap.custom_traits() or CUSTOM_TRAITS
        return Write(kind, 'DELETE', '/traits/' + rnd.choice(names),
                     _v(rnd.randint(6, LATEST)))

    def aggregates_set(self, rnd, snap, kind):
        rp = self._rp(rnd, snap)
        aggs = rnd.sample(AGGS, rnd.choice([0, 1, 1, 2]))
        if rnd.random() < 0.05:
            aggs.append(_uuid(rnd))
        minor = rnd.randint(1, LATEST)
        if minor < 19:
            body = aggs
        else:
            body = {'aggregates': aggs, 'resource_provider_generation':
                    self._gen(rnd, rp.generation)}
        return Write(kind, 'PUT', '/resource_providers/%s/aggregates'
                     % rp.uuid, _v(minor), body)

    # -- resource classes ---------------------------------------------------

    def class_create(self, rnd, snap, kind):
        have = snap.custom_rcs()
        if len(have) >= MAX_CUSTOM_RCS:
            return self.class_delete(rnd, snap, 'class_delete')
        name = rnd.choice(CUSTOM_RCS)
        minor = rnd.randint(2, LATEST)
        if minor >= 7 and rnd.random() < 0.5:
            return Write(kind, 'PUT', '/resource_classes/' + name, _v(minor))
        return Write(kind, 'POST', '/resource_classes', _v(minor),
                     {'name': name})

    def class_rename(self, rnd, snap, kind):
        have = snap.custom_rcs()
        if not have:
            return self.class_create(rnd, snap, 'class_create')
        # The ones in use first: their providers' worlds hold the name.
        used = sorted({snap.rc_names[rc] for _, rc in snap.inv} & set(have))
        old = rnd.choice(used if used and rnd.random() < 0.8 else have)
        free = sorted(set(CUSTOM_RCS) - set(have))
        new = rnd.choice(free if free and rnd.random() < 0.8
                         else CUSTOM_RCS)
        return Write(kind, 'PUT', '/resource_classes/' + old,
                     _v(rnd.randint(2, 6)), {'name': new})

    def class_delete(self, rnd, snap, kind):
        have = snap.custom_rcs() or CUSTOM_RCS
        return Write(kind, 'DELETE', '/resource_classes/' + rnd.choice(have),
                     _v(rnd.randint(2, LATEST)))

    # -- reshaper -----------------------------------------------------------

    def reshape(self, rnd, snap, kind):
        """Move a class's inventory and the allocations against it from a
        provider to another of its tree, as a virt driver does (the
        allocations of a few other consumers rewritten as they are)."""
        minor = rnd.randint(30, LATEST)
        moves = [(rp, rc) for (rp, rc) in sorted(snap.inv)
                 if len(snap.subtree(snap.rps[rp].root_provider_id or rp))
                 > 1]
        if not moves:
            return self.inventory_put_all(rnd, snap, 'inventory_put_all')
        src, rc = rnd.choice(moves)
        tree = snap.subtree(snap.rps[src].root_provider_id or src)
        dst = rnd.choice([r for r in tree if r != src])
        invs = {src: dict(snap.invs_of(src)), dst: dict(snap.invs_of(dst))}
        row = invs[src].pop(rc)
        if rc not in invs[dst] or rnd.random() < 0.5:
            invs[dst][rc] = row

        def record(r):
            return {'total': r.total, 'reserved': r.reserved,
                    'min_unit': r.min_unit, 'max_unit': r.max_unit,
                    'step_size': r.step_size,
                    'allocation_ratio': r.allocation_ratio}

        body = {'inventories': {
            snap.rps[rp].uuid: {
                'resource_provider_generation': self._gen(
                    rnd, snap.rps[rp].generation),
                'inventories': {snap.rc_names[c]: record(r)
                                for c, r in sorted(inv.items())}}
            for rp, inv in invs.items()}, 'allocations': {}}
        for consumer, allocs in sorted(snap.allocs.items()):
            if (src, rc) not in allocs and rnd.random() < 0.9:
                continue
            new = collections.defaultdict(dict)
            for (rp, c), used in allocs.items():
                if rp not in snap.rps:
                    continue
                target = dst if (rp, c) == (src, rc) else rp
                new[snap.rps[target].uuid][snap.rc_names.get(
                    c, 'CUSTOM_GONE')] = used
            body['allocations'][consumer] = self._consumer_fields(
                rnd, minor, snap.consumer_gen.get(consumer), {
                    'allocations': {u: {'resources': r}
                                    for u, r in new.items()}})
        return Write(kind, 'POST', '/reshaper', _v(minor), body)


class ManageWrites:
    """placement-manage commands that write (run by our SQL process)."""

    COMMANDS = [['db', 'online_data_migrations'],
                ['db', 'online_data_migrations', '--max-count', '1'],
                ['audit', '--fix'], ['os-traits', 'sync'], ['db', 'sync']]

    def make(self, rnd, snap):
        return Write('manage', manage=rnd.choice(self.COMMANDS))


class SqlWrites:
    """Writes an operator types by hand, committed one transaction each,
    keeping the data as the API would (roots follow parents, no
    allocation against a missing inventory) but bumping nothing."""

    WEIGHTS = {
        'sql_inventory_update': 8, 'sql_inventory_insert': 3,
        'sql_inventory_delete': 3, 'sql_inventory_move': 2,
        'sql_allocation_delete': 6, 'sql_allocation_insert': 5,
        'sql_allocation_move': 5, 'sql_allocation_update': 3,
        'sql_trait_add': 4, 'sql_trait_remove': 3, 'sql_trait_change': 3,
        'sql_aggregate_add': 4, 'sql_aggregate_remove': 3,
        'sql_aggregate_change': 3,
        'sql_reparent': 4, 'sql_provider_insert': 2,
        'sql_provider_delete': 2, 'sql_class_rename': 3,
        'sql_class_recreate': 2, 'sql_trait_rename': 2,
    }

    TABLES = {
        'sql_inventory': ('inventories',),
        'sql_inventory_move': ('inventories', 'allocations'),
        'sql_allocation': ('allocations',),
        'sql_trait': ('resource_provider_traits',),
        'sql_aggregate': ('resource_provider_aggregates',),
        'sql_reparent': ('resource_providers',),
        'sql_provider': ('resource_providers',),
        'sql_provider_delete': ('resource_providers', 'inventories',
                                'resource_provider_traits',
                                'resource_provider_aggregates'),
        'sql_class': ('resource_classes',), 'sql_trait_rename': ('traits',),
    }

    def make(self, rnd, snap, favour=None):
        kind = _pick(rnd, self.WEIGHTS, self.TABLES, favour)
        sql = getattr(self, kind)(rnd, snap)
        return Write(kind, sql=sql) if sql else None

    @staticmethod
    def _rp(rnd, snap):
        return snap.rps[rnd.choice(sorted(snap.rps))]

    def sql_inventory_update(self, rnd, snap):
        if not snap.inv:
            return None
        rp, rc = rnd.choice(sorted(snap.inv))
        column = rnd.choice(['total', 'total', 'reserved',
                             'allocation_ratio', 'max_unit'])
        row = snap.inv[(rp, rc)]
        value = {'total': max(1, row.total + rnd.choice([-2, -1, 1, 4])),
                 'reserved': rnd.choice([0, 1, 2]),
                 'allocation_ratio': rnd.choice([1.0, 2.0, 0.5]),
                 'max_unit': rnd.choice([1, row.total])}[column]
        return [('UPDATE inventories SET %s = :v WHERE '
                 'resource_provider_id = :rp AND resource_class_id = :rc'
                 % column, {'v': value, 'rp': rp, 'rc': rc})]

    def sql_inventory_insert(self, rnd, snap):
        rp = self._rp(rnd, snap)
        rc = snap.rc_ids.get(rnd.choice(snap.classes()))
        if rc is None or (rp.id, rc) in snap.inv:
            return None
        return [('INSERT INTO inventories (resource_provider_id, '
                 'resource_class_id, total, reserved, min_unit, max_unit, '
                 'step_size, allocation_ratio) VALUES (:rp, :rc, :t, 0, 1, '
                 ':t, 1, 1.0)', {'rp': rp.id, 'rc': rc,
                                 't': rnd.randint(1, 64)})]

    def sql_inventory_delete(self, rnd, snap):
        free = [k for k in sorted(snap.inv) if not snap.used[k]]
        if not free:
            return None
        rp, rc = rnd.choice(free)
        return [('DELETE FROM inventories WHERE resource_provider_id = :rp '
                 'AND resource_class_id = :rc', {'rp': rp, 'rc': rc})]

    def sql_allocation_delete(self, rnd, snap):
        if not snap.allocs:
            return None
        consumer = rnd.choice(sorted(snap.allocs))
        if rnd.random() < 0.5:
            return [('DELETE FROM allocations WHERE consumer_id = :c',
                     {'c': consumer})]
        rp, rc = rnd.choice(sorted(snap.allocs[consumer]))
        return [('DELETE FROM allocations WHERE consumer_id = :c AND '
                 'resource_provider_id = :rp AND resource_class_id = :rc',
                 {'c': consumer, 'rp': rp, 'rc': rc})]

    def sql_allocation_insert(self, rnd, snap):
        """Usage with no consumer row behind it (an incomplete consumer,
        which online data migrations complete)."""
        if not snap.inv:
            return None
        rp, rc = rnd.choice(sorted(snap.inv))
        return [('INSERT INTO allocations (resource_provider_id, '
                 'consumer_id, resource_class_id, used) VALUES '
                 '(:rp, :c, :rc, :u)', {
                     'rp': rp, 'rc': rc, 'u': snap.amount(rnd, rp, rc),
                     'c': _uuid(rnd)})]

    def sql_allocation_move(self, rnd, snap):
        if not snap.allocs:
            return None
        consumer = rnd.choice(sorted(snap.allocs))
        rp, rc = rnd.choice(sorted(snap.allocs[consumer]))
        others = [r for (r, c) in sorted(snap.inv) if c == rc and r != rp]
        if not others:
            return None
        return [('UPDATE allocations SET resource_provider_id = :to WHERE '
                 'consumer_id = :c AND resource_provider_id = :rp AND '
                 'resource_class_id = :rc', {'to': rnd.choice(others),
                                             'c': consumer, 'rp': rp,
                                             'rc': rc})]

    def sql_allocation_update(self, rnd, snap):
        if not snap.allocs:
            return None
        consumer = rnd.choice(sorted(snap.allocs))
        rp, rc = rnd.choice(sorted(snap.allocs[consumer]))
        return [('UPDATE allocations SET used = :u WHERE consumer_id = :c '
                 'AND resource_provider_id = :rp AND resource_class_id = :rc',
                 {'u': snap.amount(rnd, rp, rc, consumer), 'c': consumer,
                  'rp': rp, 'rc': rc})]

    def sql_inventory_move(self, rnd, snap):
        """A reshape by hand: an inventory (and the allocations against
        it) to another provider."""
        if not snap.inv:
            return None
        rp, rc = rnd.choice(sorted(snap.inv))
        others = [r for r in sorted(snap.rps) if (r, rc) not in snap.inv]
        if not others:
            return None
        to = rnd.choice(others)
        return [('UPDATE %s SET resource_provider_id = :to WHERE '
                 'resource_provider_id = :rp AND resource_class_id = :rc'
                 % t, {'to': to, 'rp': rp, 'rc': rc})
                for t in ('inventories', 'allocations')]

    def sql_trait_change(self, rnd, snap):
        """One provider's trait becomes another, or goes to another
        provider (an UPDATE of the link row)."""
        pairs = sorted((rp, t) for rp, ts in snap.rp_traits.items()
                       for t in ts)
        if not pairs:
            return None
        rp, t = rnd.choice(pairs)
        if rnd.random() < 0.5:
            column, choices = 'trait_id', sorted(
                set(snap.trait_names) - snap.rp_traits[rp])
        else:
            column, choices = 'resource_provider_id', [
                r for r in sorted(snap.rps) if t not in snap.rp_traits[r]]
        if not choices:
            return None
        return [('UPDATE resource_provider_traits SET %s = :v WHERE '
                 'resource_provider_id = :rp AND trait_id = :t' % column,
                 {'v': rnd.choice(choices), 'rp': rp, 't': t})]

    def sql_aggregate_change(self, rnd, snap):
        pairs = sorted((rp, a) for rp, aggs in snap.rp_aggs.items()
                       for a in aggs)
        if not pairs:
            return None
        rp, a = rnd.choice(pairs)
        if rnd.random() < 0.5:
            column, choices = 'aggregate_id', sorted(
                set(snap.agg_uuids) - snap.rp_aggs[rp])
        else:
            column, choices = 'resource_provider_id', [
                r for r in sorted(snap.rps) if a not in snap.rp_aggs[r]]
        if not choices:
            return None
        return [('UPDATE resource_provider_aggregates SET %s = :v WHERE '
                 'resource_provider_id = :rp AND aggregate_id = :a' % column,
                 {'v': rnd.choice(choices), 'rp': rp, 'a': a})]

    def sql_trait_add(self, rnd, snap):
        rp = self._rp(rnd, snap)
        missing = sorted(set(snap.trait_names) - snap.rp_traits[rp.id])
        if not missing:
            return None
        return [('INSERT INTO resource_provider_traits (resource_provider_id,'
                 ' trait_id) VALUES (:rp, :t)', {'rp': rp.id,
                                                 't': rnd.choice(missing)})]

    def sql_trait_remove(self, rnd, snap):
        pairs = sorted((rp, t) for rp, ts in snap.rp_traits.items()
                       for t in ts)
        if not pairs:
            return None
        rp, t = rnd.choice(pairs)
        return [('DELETE FROM resource_provider_traits WHERE '
                 'resource_provider_id = :rp AND trait_id = :t',
                 {'rp': rp, 't': t})]

    def sql_aggregate_add(self, rnd, snap):
        rp = self._rp(rnd, snap)
        by_uuid = {u: i for i, u in snap.agg_uuids.items()}
        agg = rnd.choice(AGGS)
        stmts = []
        if agg not in by_uuid:
            stmts.append(('INSERT INTO placement_aggregates (uuid) VALUES '
                          '(:u)', {'u': agg}))
        elif by_uuid[agg] in snap.rp_aggs[rp.id]:
            return None
        stmts.append(('INSERT INTO resource_provider_aggregates '
                      '(resource_provider_id, aggregate_id) SELECT :rp, id '
                      'FROM placement_aggregates WHERE uuid = :u',
                      {'rp': rp.id, 'u': agg}))
        return stmts

    def sql_aggregate_remove(self, rnd, snap):
        pairs = sorted((rp, a) for rp, aggs in snap.rp_aggs.items()
                       for a in aggs)
        if not pairs:
            return None
        rp, a = rnd.choice(pairs)
        return [('DELETE FROM resource_provider_aggregates WHERE '
                 'resource_provider_id = :rp AND aggregate_id = :a',
                 {'rp': rp, 'a': a})]

    def sql_reparent(self, rnd, snap):
        """A provider (and its subtree) under another tree, or made a
        root: parent and roots updated together."""
        rp = self._rp(rnd, snap)
        mine = snap.subtree(rp.id)
        others = [r for r in sorted(snap.rps) if r not in mine]
        if rp.parent_provider_id is not None and rnd.random() < 0.3:
            parent, root = None, rp.id
        elif others:
            parent = rnd.choice(others)
            root = snap.rps[parent].root_provider_id or parent
        else:
            return None
        return [('UPDATE resource_providers SET parent_provider_id = :p '
                 'WHERE id = :id', {'p': parent, 'id': rp.id}),
                ('UPDATE resource_providers SET root_provider_id = :r '
                 'WHERE id IN (%s)' % ','.join(str(i) for i in mine),
                 {'r': root})]

    def sql_provider_insert(self, rnd, snap):
        if len(snap.rps) >= MAX_PROVIDERS:
            return None
        u = _uuid(rnd)
        stmts = [('INSERT INTO resource_providers (uuid, name, generation) '
                  'VALUES (:u, :n, 0)', {'u': u, 'n': 'sql-' + u[:8]})]
        parent = self._rp(rnd, snap) if rnd.random() < 0.5 else None
        if parent is not None and parent.root_provider_id is not None:
            stmts.append(('UPDATE resource_providers SET parent_provider_id'
                          ' = :p, root_provider_id = :r WHERE uuid = :u',
                          {'p': parent.id, 'r': parent.root_provider_id,
                           'u': u}))
        else:
            stmts.append(('UPDATE resource_providers SET root_provider_id '
                          '= id WHERE uuid = :u', {'u': u}))
        if rnd.random() < 0.5:
            stmts.append(('INSERT INTO inventories (resource_provider_id, '
                          'resource_class_id, total, reserved, min_unit, '
                          'max_unit, step_size, allocation_ratio) SELECT '
                          'id, :rc, 8, 0, 1, 8, 1, 1.0 FROM '
                          'resource_providers WHERE uuid = :u',
                          {'u': u, 'rc': snap.rc_ids['VCPU']}))
        return stmts

    def sql_provider_delete(self, rnd, snap):
        if len(snap.rps) <= MIN_PROVIDERS:
            return None
        used = {rp for allocs in snap.allocs.values() for rp, _ in allocs}
        leaves = [r for r in sorted(snap.rps) if r not in used
                  and not snap.children(r)]
        if not leaves:
            return None
        rid = rnd.choice(leaves)
        return [('DELETE FROM %s WHERE resource_provider_id = :id' % t,
                 {'id': rid}) for t in ('inventories',
                                        'resource_provider_traits',
                                        'resource_provider_aggregates')] + [
            # A root refers to itself (which MySQL will not delete).
            ('UPDATE resource_providers SET root_provider_id = NULL '
             'WHERE id = :id', {'id': rid}),
            ('DELETE FROM resource_providers WHERE id = :id', {'id': rid})]

    def sql_class_rename(self, rnd, snap):
        have = snap.custom_rcs()
        free = sorted(set(CUSTOM_RCS) - set(have))
        if not have or not free:
            return None
        return [('UPDATE resource_classes SET name = :new WHERE name = :old',
                 {'old': rnd.choice(have), 'new': rnd.choice(free)})]

    def sql_class_recreate(self, rnd, snap):
        """A rename the long way: the class's row deleted and inserted
        again, same id, another name."""
        have = snap.custom_rcs()
        free = sorted(set(CUSTOM_RCS) - set(have))
        if not have or not free:
            return None
        rc = snap.rc_ids[rnd.choice(have)]
        return [('DELETE FROM resource_classes WHERE id = :id', {'id': rc}),
                ('INSERT INTO resource_classes (id, name) VALUES (:id, :n)',
                 {'id': rc, 'n': rnd.choice(free)})]

    def sql_trait_rename(self, rnd, snap):
        have = snap.custom_traits()
        free = sorted(set(CUSTOM_TRAITS + RENAMED_TRAITS) - set(have))
        if not have or not free:
            return None
        return [('UPDATE traits SET name = :new WHERE name = :old',
                 {'old': rnd.choice(have), 'new': rnd.choice(free)})]


# -- queries -----------------------------------------------------------------

class Focus:
    """What a write touched: provider uuids (those it wrote and those a
    consumer it wrote had allocations on), aggregate uuids, trait and
    class names. A query about them right after the write shows a stale
    world sooner than one about anything (a later write to the same
    provider may mend it before a random query comes by)."""

    def __init__(self):
        self.rps, self.aggs = set(), set()
        self.traits, self.classes = set(), set()

    def __bool__(self):
        return bool(self.rps or self.aggs or self.traits or self.classes)

    def note(self, value, snap):
        """Sort a name or uuid seen in a write into its kind."""
        if not isinstance(value, str):
            return
        if value in snap.rp_by_uuid:
            self.rps.add(value)
        elif value in snap.allocs:
            self.rps.update(snap.rps[rp].uuid
                            for rp, _rc in snap.allocs[value]
                            if rp in snap.rps)
        elif value in AGGS or value in snap.agg_ids:
            self.aggs.add(value)
        elif value in snap.rc_ids or value in CUSTOM_RCS:
            self.classes.add(value)
        elif value.startswith('CUSTOM_') or value in STANDARD_TRAITS:
            self.traits.add(value)

    def note_all(self, data, snap):
        if isinstance(data, dict):
            for k, v in data.items():
                self.note(k, snap)
                self.note_all(v, snap)
        elif isinstance(data, list):
            for v in data:
                self.note_all(v, snap)
        else:
            self.note(data, snap)


def focus_of(w, snap):
    """The Focus of write ``w`` (``snap``: the database before it)."""
    f = Focus()
    if w.manage is not None:
        return f
    if w.sql is None:
        for part in w.path.split('/'):
            f.note(part, snap)
        f.note_all(w.body, snap)
    else:
        for text, params in w.sql:
            for key, value in (params or {}).items():
                if key in ('rp', 'to', 'id', 'p') or (
                        key == 'v' and 'resource_provider_id = :v' in text):
                    if value in snap.rps:
                        f.rps.add(snap.rps[value].uuid)
                elif key == 't' or (key == 'v' and 'trait_id' in text):
                    f.note(snap.trait_names.get(value), snap)
                elif key == 'a' or (key == 'v' and 'aggregate_id' in text):
                    f.note(snap.agg_uuids.get(value), snap)
                else:
                    f.note(value, snap)
    # A provider's old place: its parent's tree.
    for u in list(f.rps):
        rp = snap.rps[snap.rp_by_uuid[u]]
        if rp.parent_provider_id in snap.rps:
            f.rps.add(snap.rps[rp.parent_provider_id].uuid)
    return f


def random_query(rnd, snap, focus=None):
    """(path, version) of a random GET /allocation_candidates over what
    the database holds now: resources (often small, so that most providers
    show up with their usage; sometimes beyond any capacity or naming a
    class that does not exist), traits, aggregates, in_tree,
    root_required, numbered groups, same_subtree and limit, each at the
    microversions that have it. With a ``focus`` (a Focus), mostly about
    what it names."""
    if focus and rnd.random() < 0.6:
        query = _focused_query(rnd, snap, focus)
        if query:
            return query
    minor = rnd.choice([LATEST, LATEST, 36, rnd.randint(10, LATEST)])
    held = sorted({snap.rc_names[rc] for _, rc in snap.inv}) or ['VCPU']
    classes = held + (snap.custom_rcs() if rnd.random() < 0.1 else [])
    if rnd.random() < 0.04:
        classes = classes + ['CUSTOM_NONE']

    def amount(name):
        rc = snap.rc_ids.get(name)
        rows = [r for (_, c), r in snap.inv.items() if c == rc]
        if not rows or rnd.random() < 0.1:
            return rnd.choice([1, 2, 10000])
        row = rnd.choice(rows)
        base = max(row.min_unit, row.step_size)
        return base * rnd.choice([1, 1, 1, 2]) if base <= row.max_unit \
            else base

    def resources(n):
        names = rnd.sample(classes, min(n, len(classes)))
        return ','.join('%s:%d' % (n, amount(n)) for n in names)

    traits = sorted(snap.trait_names.values()) or STANDARD_TRAITS
    if rnd.random() < 0.04:
        traits = traits + ['CUSTOM_NONE']

    def trait_value():
        picks = rnd.sample(traits, min(len(traits), rnd.randint(1, 2)))
        if minor >= 39 and len(picks) > 1 and rnd.random() < 0.3:
            return 'in:' + ','.join(picks)
        if minor >= 22:
            picks = [('!' if rnd.random() < 0.3 else '') + t for t in picks]
        return ','.join(picks)

    aggs = AGGS + [_uuid(rnd)]

    def member_of():
        if minor >= 32 and rnd.random() < 0.25:
            return '!' + rnd.choice(aggs)
        if rnd.random() < 0.5:
            return 'in:' + ','.join(rnd.sample(aggs, 2))
        return rnd.choice(aggs)

    params = []
    if rnd.random() < 0.45:
        # A wide query: every provider of a class, with its usage and
        # traits; or those of some aggregates (which no summary shows).
        params.append(('resources', resources(rnd.choice([1, 1, 2]))))
        if minor >= 21 and rnd.random() < 0.3:
            params.append(('member_of', member_of()))
    else:
        numbered = rnd.choice([0, 0, 1, 2, 3]) if minor >= 25 else 0
        names = []
        for i in range(numbered):
            if minor >= 33 and rnd.random() < 0.3:
                names.append(rnd.choice(['_NUMA', '_ACCEL', '_X']) + str(i))
            else:
                names.append(str(i + 1))
        groups = ([''] if not numbered or rnd.random() < 0.6 else []) + names
        resourceless = set()
        if minor >= 36 and len(names) > 1 and rnd.random() < 0.3:
            resourceless.add(rnd.choice(names))
        for s in groups:
            if s not in resourceless:
                params.append(('resources' + s,
                               resources(rnd.choice([1, 1, 2, 3]))))
            if minor >= 17 and (rnd.random() < 0.3 or s in resourceless):
                params.append(('required' + s, trait_value()))
            if minor >= 21 and rnd.random() < 0.4:
                params.append(('member_of' + s, member_of()))
                if minor >= 24 and rnd.random() < 0.2:
                    params.append(('member_of' + s, member_of()))
            if minor >= 31 and rnd.random() < 0.1 and snap.rps:
                params.append(('in_tree' + s, snap.rps[rnd.choice(
                    sorted(snap.rps))].uuid if rnd.random() < 0.9
                    else rnd.choice(aggs)))
        if len(names) > 1 or (names and rnd.random() < 0.3):
            if rnd.random() < 0.97:
                params.append(('group_policy',
                               rnd.choice(['none', 'isolate'])))
        if minor >= 35 and rnd.random() < 0.15:
            params.append(('root_required', trait_value()))
        if minor >= 36 and len(names) > 1 and (resourceless or
                                               rnd.random() < 0.3):
            params.append(('same_subtree', ','.join(
                rnd.sample(names, rnd.randint(2, len(names))))))
    if minor >= 16 and rnd.random() < 0.3:
        params.append(('limit', rnd.choice([1, 2, 3, 5])))
    return ('/allocation_candidates?' + '&'.join('%s=%s' % kv
                                                 for kv in params),
            _v(minor))


def _focused_query(rnd, snap, focus):
    """A query about one provider the write touched (mostly the classes
    it holds itself, so that its own traits and aggregates count; else
    its tree's; the provider as in_tree), as the unnumbered group or a
    numbered one, and the aggregates, traits and classes the write
    named; None when none of them is left."""
    minor = rnd.choice([LATEST, rnd.randint(29, LATEST),
                        rnd.randint(10, LATEST)])
    rps = {snap.rp_by_uuid[u] for u in focus.rps if u in snap.rp_by_uuid}
    # Else those holding the traits or in the aggregates it named (a
    # trait renamed by hand, say).
    trait_ids = {i for i, n in snap.trait_names.items() if n in focus.traits}
    agg_ids = {snap.agg_ids[u] for u in focus.aggs if u in snap.agg_ids}
    rps = sorted(rps or {r for r in snap.rps if snap.rp_traits[r] & trait_ids
                         or snap.rp_aggs[r] & agg_ids})
    held = {}                           # class name -> a provider's row
    if rps:
        rp = rnd.choice(rps)
        root = snap.rps[rp].root_provider_id or rp
        tree = set(snap.subtree(root)) | {rp}
        for mine in ({rp} if rnd.random() < 0.7 else tree, tree):
            held = {snap.rc_names[c]: row for (r, c), row in
                    sorted(snap.inv.items()) if r in mine}
            if held:
                break
    named = {n: row for (r, c), row in sorted(snap.inv.items())
             for n in [snap.rc_names[c]] if n in focus.classes}
    held.update(named if rnd.random() < 0.7 else {})
    if not held:
        return None
    suffix = '1' if minor >= 25 and rnd.random() < 0.3 else ''
    names = rnd.sample(sorted(held), min(len(held), rnd.choice([1, 1, 2])))
    params = [('resources' + suffix, ','.join(
        '%s:%d' % (n, max(held[n].min_unit, held[n].step_size))
        for n in names))]
    if rps and minor >= 31 and rnd.random() < 0.3:
        params.append(('in_tree' + suffix, snap.rps[rp].uuid))
    if focus.aggs and minor >= 21 and rnd.random() < 0.6:
        agg = rnd.choice(sorted(focus.aggs))
        params.append(('member_of' + suffix, '!' + agg if minor >= 32 and
                       rnd.random() < 0.3 else agg))
    if focus.traits and minor >= 17 and rnd.random() < 0.4:
        trait = rnd.choice(sorted(focus.traits))
        params.append(('required' + suffix, '!' + trait if minor >= 22 and
                       rnd.random() < 0.3 else trait))
    return ('/allocation_candidates?' + '&'.join('%s=%s' % kv
                                                 for kv in params),
            _v(minor))


def normalize(answer):
    """An answer with the orders the API leaves undefined sorted, and
    error request ids dropped."""
    status, body = answer['status'], answer['body']
    if status != 200 or not isinstance(body, dict):
        if isinstance(body, dict):
            body = {'errors': [{k: v for k, v in e.items()
                                if k != 'request_id'}
                               for e in body.get('errors', [])]}
        return {'status': status, 'body': body}
    areqs = []
    for ar in body.get('allocation_requests', []):
        ar = dict(ar)
        if isinstance(ar.get('allocations'), list):
            ar['allocations'] = sorted(ar['allocations'],
                                       key=lambda a: json.dumps(
                                           a, sort_keys=True))
        if 'mappings' in ar:
            ar['mappings'] = {k: sorted(v)
                              for k, v in ar['mappings'].items()}
        areqs.append(ar)
    areqs.sort(key=lambda a: json.dumps(a, sort_keys=True))
    sums = {}
    for rp, s in body.get('provider_summaries', {}).items():
        s = dict(s)
        if 'traits' in s:
            s['traits'] = sorted(s['traits'])
        sums[rp] = s
    return {'status': status, 'body': {'allocation_requests': areqs,
                                       'provider_summaries': sums}}


def diff(expected, got, names=None):
    """What differs between SQL's answer and a world's: each provider's
    summary, and the allocation requests only one of them gives
    (providers named after ``names``, {uuid: name})."""
    names = names or {}

    def text(value, limit=1500):
        out = json.dumps(value, sort_keys=True)
        for u, name in names.items():
            out = out.replace(u, '%s(%s)' % (name, u[:8]))
        return out if len(out) <= limit else out[:limit] + '...'

    if expected['status'] != 200 or got['status'] != 200:
        return '  sql:   %s\n  world: %s' % (text(expected), text(got))
    lines = []
    sums = expected['body']['provider_summaries'], got['body'][
        'provider_summaries']
    for u in sorted(set(sums[0]) | set(sums[1])):
        if sums[0].get(u) != sums[1].get(u):
            lines.append('  summary of %s(%s):\n    sql:   %s\n    world: %s'
                         % (names.get(u, ''), u, text(sums[0].get(u)),
                            text(sums[1].get(u))))
    areqs = [{json.dumps(a, sort_keys=True) for a in answer['body'][
        'allocation_requests']} for answer in (expected, got)]
    for title, only in (('only SQL gives', areqs[0] - areqs[1]),
                        ('only the world gives', areqs[1] - areqs[0])):
        if only:
            lines.append('  %d allocation requests %s, e.g. %s' % (
                len(only), title, text(json.loads(min(only)))))
    return '\n'.join(lines)


# -- the run -----------------------------------------------------------------

class Mismatch(AssertionError):
    """A world answered otherwise than SQL."""


class Result:
    """Counts of a run."""

    def __init__(self, mode, seed):
        self.mode, self.seed = mode, seed
        self.steps = 0
        # (kind, writer, 'ok' or 'refused') -> count
        self.writes = collections.Counter()
        # status -> count, and 'candidates': answers with some
        self.queries = collections.Counter()
        self.failures = []                      # (step, text)
        # Write kinds a failure followed: alone since the last reload
        # (the culprit), or among several.
        self.culprits = collections.Counter()
        self.suspects = collections.Counter()
        self.first_failure = None
        self.elapsed = 0.0
        self.cpu = 0.0          # the driving thread's and the children's

    def summary(self):
        by_kind = collections.Counter()
        refused = collections.Counter()
        for (kind, _writer, outcome), n in self.writes.items():
            by_kind[kind] += n
            if outcome == 'refused':
                refused[kind] += n
        lines = ['mode %s seed %d: %d steps in %.1fs (%.1f steps/s, '
                 '%.1f ms/step)' % (self.mode, self.seed, self.steps,
                                    self.elapsed, self.steps /
                                    max(self.elapsed, 1e-9),
                                    1000 * self.elapsed /
                                    max(self.steps, 1))]
        if self.cpu:
            lines[0] += '; CPU %.1f ms/step (the processes)' % (
                1000 * self.cpu / max(self.steps, 1))
        lines.append('writes: ' + ', '.join(
            '%s %d%s' % (k, n, ' (%d refused)' % refused[k]
                         if refused[k] else '')
            for k, n in sorted(by_kind.items())))
        by = collections.Counter()
        for (_kind, writer, _o), n in self.writes.items():
            by[writer] += n
        lines.append('writers: ' + ', '.join('%s %d' % kv
                                             for kv in sorted(by.items())))
        lines.append('queries: ' + ', '.join(
            '%s %d' % (k, n) for k, n in sorted(self.queries.items(),
                                                key=str)))
        if self.failures:
            lines.append('failures: %d, first at step %d' % (
                len(self.failures), self.first_failure))
            lines.append('  after this write alone (since the last '
                         'reload): ' + ', '.join(
                             '%s %d' % kv for kv in sorted(
                                 self.culprits.items())))
            lines.append('  after several, among them: ' + ', '.join(
                '%s %d' % kv for kv in sorted(self.suspects.items())))
        return '\n'.join(lines)


class Check:
    """The model check over one Cluster. ``step()`` makes one write and
    checks one query in every world."""

    def __init__(self, cluster, mode, seed, result=None, tail=25,
                 favour=None, blame=False):
        assert mode in MODES, mode
        self.favour = favour
        self.blame = blame
        self.cluster = cluster
        self.mode = mode
        self.rnd = random.Random(seed)
        self.result = result or Result(mode, seed)
        self.api = ApiWrites()
        self.sqlw = SqlWrites()
        self.managew = ManageWrites()
        self.history = collections.deque(maxlen=tail)
        self.snap = None
        self.since_reload = []

    def snapshot(self):
        with self.cluster.engine.connect() as conn:
            return Snapshot(conn)

    # -- writes -------------------------------------------------------------

    def _writer(self):
        """Who writes this step: 'ours' (our API), 'upstream' (its API),
        'hand' (SQL) or 'manage' (placement-manage)."""
        if self.rnd.random() < 0.004:
            return 'manage'
        others = {'ours': [], 'upstream': ['upstream'], 'sql': ['hand'],
                  'all': ['upstream', 'hand']}[self.mode]
        return self.rnd.choice(['ours'] * max(1, len(others)) + others)

    def write(self, snap):
        writer = self._writer()
        w = None
        if writer == 'hand':
            w = self.sqlw.make(self.rnd, snap, self.favour)
        elif writer == 'manage':
            w = self.managew.make(self.rnd, snap)
        if w is None:
            w = self.api.make(self.rnd, snap, self.favour)
            writer = 'upstream' if writer == 'upstream' else 'ours'
        w.writer = writer
        if w.sql is not None:
            w.by = 'hand'
            with self.cluster.engine.begin() as conn:
                for text, params in w.sql:
                    conn.execute(sa.text(text), params or {})
            w.status = 'committed'
        elif w.manage is not None:
            w.by = self.cluster.sql.name
            w.status = self.cluster.manage(*w.manage)['status']
        else:
            child = (self.cluster.upstream if writer == 'upstream'
                     else self.rnd.choice(self.cluster.ours()))
            w.by = child.name
            answer = child.call(w.request())
            w.status = answer['status']
            # Ours never answers 500; upstream's faults are not ours to
            # find here (they count as refused writes).
            if w.status >= 500 and writer == 'ours':
                raise Mismatch('%s answered %s to a write:\n%s\n%s\n%s' % (
                    child.name, w.status, w, answer['body'],
                    child.stderr()[-3000:]))
        self.history.append(w)
        self.since_reload.append(w)
        self.result.writes[(w.kind, writer,
                            'refused' if w.refused() else 'ok')] += 1
        return w

    # -- the comparison -----------------------------------------------------

    def ask_all(self, path, version):
        """The query's answer from SQL and from each world, asked at once
        (each process answers in parallel)."""
        req = {'method': 'GET', 'path': path, 'version': version}
        children = [self.cluster.sql] + self.cluster.worlds
        if self.cluster.engine.dialect.name == 'sqlite':
            # One at a time: SQLite's readers here take its lock (BEGIN
            # IMMEDIATE), and a waiter polls it with sleeps.
            answers = [normalize(child.call(req)) for child in children]
        else:
            for child in children:
                child.send(req)
            answers = [normalize(child.receive()) for child in children]
        return answers[0], list(zip(self.cluster.worlds, answers[1:]))

    def check(self, snap, step, focus=None):
        path, version = random_query(self.rnd, snap, focus)
        expected, worlds = self.ask_all(path, version)
        status = expected['status']
        self.result.queries[status] += 1
        if status == 200 and expected['body']['allocation_requests']:
            self.result.queries['candidates'] += 1
        wrong = [(child, got) for child, got in worlds if got != expected]
        if wrong:
            return self._report(step, path, version, expected, wrong)
        return None

    def _report(self, step, path, version, expected, wrong):
        """What went wrong, and whether a full reload (a new epoch) makes
        the world right: stale, or the engines disagree."""
        self.cluster.manage('reload')
        kinds = {'%s by %s' % (w.kind, w.writer)
                 for w in self.since_reload if not w.refused()}
        if len(self.since_reload) == 1:
            self.result.culprits.update(kinds)
        else:
            self.result.suspects.update(kinds)
        self.since_reload = []
        req = {'method': 'GET', 'path': path, 'version': version}
        names = {r.uuid: r.name for r in self.snap.rps.values()}
        lines = ['mode %s seed %d: step %d, %d world(s) of %d answered '
                 'otherwise than SQL' % (self.mode, self.result.seed, step,
                                         len(wrong),
                                         len(self.cluster.worlds)),
                 'query: GET %s @%s' % (path, version),
                 'last writes (oldest first):']
        lines += ['  ' + str(w)[:600] for w in self.history]
        for child, got in wrong:
            again = normalize(child.call(req))
            lines.append('%s differs from SQL:' % child.name)
            lines.append(diff(expected, got, names))
            lines.append('after placement-manage reload: %s' % (
                'the same as SQL: the world was stale' if again == expected
                else 'still different: the engines disagree\n' +
                diff(expected, again, names)))
        lines.append('replay: tools/freshness-check --mode %s --seed %d '
                     '--steps %d (from a new database)'
                     % (self.mode, self.result.seed, step))
        return '\n'.join(lines)

    def step(self, step):
        """One write, then one query in every process; the snapshot
        taken after the write serves the query and the next write."""
        if self.snap is None:
            self.snap = self.snapshot()
        if self.blame:
            # Every world up to date before the write (reloaded, at a
            # request): a failure after it is that write's.
            self.cluster.manage('reload')
            self.ask_all('/allocation_candidates?resources=VCPU:1', '1.39')
            self.since_reload = []
        w = self.write(self.snap)
        focus = focus_of(w, self.snap)
        self.result.steps += 1
        self.snap = self.snapshot()
        return self.check(self.snap, step, focus)


def build_world(cluster, rnd):
    """The starting world, through our API: two trees (NUMA children and
    a device grandchild), a flat compute node, a sharing storage
    provider, custom classes and traits, aggregates and some usage."""
    sql = cluster.sql

    def call(method, path, body=None, version=_v(LATEST)):
        answer = sql.call({'method': method, 'path': path,
                           'version': version, 'body': body})
        assert answer['status'] < 400, (method, path, answer)
        return answer['body']

    for rc in CUSTOM_RCS[:2]:
        call('PUT', '/resource_classes/' + rc)
    for t in CUSTOM_TRAITS[:3]:
        call('PUT', '/traits/' + t)
    made = {}

    def provider(name, parent=None, inv=None, traits=(), aggs=()):
        body = {'name': name, 'uuid': _uuid(rnd)}
        if parent:
            body['parent_provider_uuid'] = made[parent]
        rp = made[name] = call('POST', '/resource_providers', body)['uuid']
        if inv:
            call('PUT', '/resource_providers/%s/inventories' % rp, {
                'resource_provider_generation': 0,
                'inventories': {rc: {'total': n} for rc, n in inv.items()}})
        gen = call('GET', '/resource_providers/' + rp)['generation']
        if traits:
            gen = call('PUT', '/resource_providers/%s/traits' % rp, {
                'resource_provider_generation': gen,
                'traits': list(traits)})['resource_provider_generation']
        if aggs:
            call('PUT', '/resource_providers/%s/aggregates' % rp, {
                'resource_provider_generation': gen, 'aggregates': list(aggs)})
        return rp

    provider('cn0', inv={'MEMORY_MB': 4096}, traits=['HW_CPU_X86_AVX'],
             aggs=[AGGS[0]])
    provider('cn0_numa0', 'cn0', inv={'VCPU': 4}, traits=['CUSTOM_A'])
    provider('cn0_numa1', 'cn0', inv={'VCPU': 4})
    provider('cn0_gpu', 'cn0_numa1', inv={'CUSTOM_GPU': 2})
    provider('cn1', inv={'VCPU': 8, 'MEMORY_MB': 2048},
             aggs=[AGGS[0], AGGS[1]])
    provider('cn1_fpga', 'cn1', inv={'CUSTOM_FPGA': 4},
             traits=['CUSTOM_B'])
    provider('cn2', inv={'VCPU': 16, 'MEMORY_MB': 8192, 'DISK_GB': 100},
             traits=['STORAGE_DISK_SSD'], aggs=[AGGS[2]])
    provider('ss', inv={'DISK_GB': 1000}, traits=[SHARES],
             aggs=[AGGS[0], AGGS[2]])
    for allocs in ({made['cn0_numa0']: {'VCPU': 2},
                    made['cn0']: {'MEMORY_MB': 1024},
                    made['ss']: {'DISK_GB': 100}},
                   {made['cn1']: {'VCPU': 4, 'MEMORY_MB': 512},
                    made['cn1_fpga']: {'CUSTOM_FPGA': 1}}):
        call('PUT', '/allocations/' + _uuid(rnd), {
            'allocations': {u: {'resources': r} for u, r in allocs.items()},
            'project_id': PROJECTS[0], 'user_id': USERS[0],
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})


def run(mode='ours', steps=1000, seed=0, processes=PROCESSES,
        keep_going=False, progress=None, control=False, blame=False):
    """Run the check over a new Cluster; returns a Result. Raises
    Mismatch at the first world answering otherwise than SQL, unless
    ``keep_going``: then the failure is counted, every world reloads
    (placement-manage reload) and the run goes on. ``progress(result)`` is
    called every 1000 steps. ``control``: see Cluster. ``blame``: every
    world reloads before each write, so each failure has one culprit
    (counted in Result.culprits; slower)."""
    with Cluster(processes, upstream=mode in ('upstream', 'all'),
                 control=control) as cluster:
        rnd = random.Random(seed)
        build_world(cluster, rnd)
        return run_on(cluster, mode, steps, rnd.getrandbits(32),
                      keep_going=keep_going, progress=progress,
                      result=Result(mode, seed), blame=blame)


def run_on(cluster, mode, steps, seed, keep_going=False, progress=None,
           result=None, favour=None, blame=False):
    """``run`` over an existing Cluster, its world as it is; ``favour``: a
    table whose writers are made likelier."""
    result = result or Result(mode, seed)
    check = Check(cluster, mode, seed, result, favour=favour, blame=blame)
    start = time.monotonic()
    cpu = cluster.cpu()
    try:
        for i in range(1, steps + 1):
            report = check.step(i)
            if report is not None:
                if result.first_failure is None:
                    result.first_failure = i
                result.failures.append((i, report))
                if not keep_going:
                    raise Mismatch(report)
            if progress and i % 1000 == 0:
                result.elapsed = time.monotonic() - start
                result.cpu = cluster.cpu() - cpu
                progress(result)
    finally:
        result.elapsed = time.monotonic() - start
        result.cpu = cluster.cpu() - cpu
    return result


def concurrently(calls):
    """Run ``calls`` ({name: function()}) in threads, each (a run) driving
    its own processes, so that the runs share the machine's CPUs; returns
    {name: what it returned, or the exception it raised}."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
    out = {}
    for name, future in futures.items():
        try:
            out[name] = future.result()
        except Exception as e:
            out[name] = e
    return out


# -- triggers ---------------------------------------------------------------

# The tables allocation candidates read, whose writes must reach every
# world (through database triggers, issue 28).
CANDIDATE_TABLES = ('resource_providers', 'inventories', 'allocations',
                    'resource_provider_traits',
                    'resource_provider_aggregates', 'resource_classes',
                    'traits')


def triggers(engine):
    """[(name, table, statement re-creating it)] of the triggers on
    CANDIDATE_TABLES, from the database's catalog."""
    tables = set(CANDIDATE_TABLES)
    with engine.connect() as conn:
        name = conn.dialect.name
        if name == 'sqlite':
            rows = conn.exec_driver_sql(
                "SELECT name, tbl_name, sql FROM sqlite_master "
                "WHERE type = 'trigger' ORDER BY name").all()
        elif name == 'postgresql':
            rows = conn.exec_driver_sql(
                'SELECT t.tgname, c.relname, pg_get_triggerdef(t.oid) '
                'FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid '
                'JOIN pg_namespace n ON n.oid = c.relnamespace '
                'WHERE NOT t.tgisinternal AND n.nspname = current_schema() '
                'ORDER BY t.tgname').all()
        else:
            rows = [(n, t, conn.exec_driver_sql(
                'SHOW CREATE TRIGGER `%s`' % n).one()[2])
                for n, t in conn.exec_driver_sql(
                    'SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM '
                    'information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = '
                    'DATABASE() ORDER BY TRIGGER_NAME').all()]
    return [tuple(r) for r in rows if r[1] in tables]


def drop_trigger(engine, name, table):
    with engine.begin() as conn:
        if conn.dialect.name == 'postgresql':
            conn.exec_driver_sql('DROP TRIGGER "%s" ON %s' % (name, table))
        else:
            conn.exec_driver_sql('DROP TRIGGER %s' % name)


def create_trigger(engine, statement):
    with engine.begin() as conn:
        conn.exec_driver_sql(statement)


def without_each_trigger(cluster, mode='all', cap=1500, seed=0,
                         progress=None, which=None):
    """For each trigger on CANDIDATE_TABLES in turn (or those of
    ``which``, [(name, table, statement)]): drop it, run the check from
    the world as it is, favouring writes to its table, until it fails (at
    most ``cap`` steps), put the trigger back and have every world
    reload. Returns {(name, table): the failing step, or None if none
    failed}."""
    found = {}
    for i, (name, table, statement) in enumerate(
            which if which is not None else triggers(cluster.engine)):
        drop_trigger(cluster.engine, name, table)
        result = Result(mode, seed + i)
        try:
            run_on(cluster, mode, cap, seed + i, result=result,
                   favour=table)
        except Mismatch:
            # A world answered otherwise (or a write got a 500).
            result.first_failure = result.first_failure or result.steps
        finally:
            create_trigger(cluster.engine, statement)
            cluster.manage('reload')
        found[(name, table)] = result.first_failure
        if progress:
            progress(name, table, result)
    return found


# -- tools/freshness-check ---------------------------------------------------

def main(argv=None):
    """A long run, with steps per second and counts every 1000 steps."""
    import argparse
    parser = argparse.ArgumentParser(
        prog='tools/freshness-check',
        description='The model-based freshness check of the in-memory '
        'worlds (see placement/tests/functional/freshness.py), on the '
        'database PLACEMENT_TEST_DB_URL names (SQLite when unset).')
    parser.add_argument('--steps', type=int, default=100000)
    parser.add_argument('--mode', choices=MODES, default='ours',
                        help='who writes besides our API (default: ours)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--processes', type=int, default=PROCESSES,
                        help='world processes of ours (default: 2)')
    parser.add_argument('--keep-going', action='store_true',
                        help='count failures (every world reloads after '
                        'each) instead of stopping at the first')
    parser.add_argument('--blame', action='store_true',
                        help='every world reloads before each write, so '
                        'each failure names its one culprit (implies '
                        '--keep-going)')
    parser.add_argument('--control', action='store_true',
                        help='worlds reload everything at every request: '
                        'nothing can be stale (finds faults of the check)')
    parser.add_argument('--without-each-trigger', type=int, metavar='CAP',
                        help='drop each trigger on the tables candidates '
                        'read in turn and run (mode all by default) until '
                        'the check fails, at most CAP steps each')
    args = parser.parse_args(argv)
    print('database: %s' % test_db.backend(), flush=True)

    def progress(result):
        print(result.summary(), flush=True)

    if args.without_each_trigger:
        mode = args.mode if args.mode != 'ours' else 'all'
        with Cluster(args.processes, upstream=mode in ('upstream', 'all')) \
                as cluster:
            build_world(cluster, random.Random(args.seed))

            def one(name, table, result):
                print('without %s (on %s): %s' % (
                    name, table, 'noticed at step %d' % result.first_failure
                    if result.first_failure else
                    'NOT noticed in %d steps' % result.steps), flush=True)

            found = without_each_trigger(cluster, mode,
                                         args.without_each_trigger,
                                         args.seed, one)
        if not found:
            print('no trigger on %s' % ', '.join(CANDIDATE_TABLES))
            return 1
        return 0 if all(found.values()) else 1
    try:
        result = run(args.mode, args.steps, args.seed, args.processes,
                     keep_going=args.keep_going or args.blame,
                     progress=progress, control=args.control,
                     blame=args.blame)
    except Mismatch as e:
        print(e)
        return 1
    print(result.summary())
    for step, report in result.failures[:3]:
        print(report)
    return 1 if result.failures else 0


if __name__ == '__main__':
    sys.exit(main())
