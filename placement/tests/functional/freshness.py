"""The model-based freshness check of the in-memory world (issue 28).

GET /allocation_candidates is answered from each process's in-memory world
(candidates/world/), refreshed at every request from the database's
change counters. This check proves that no write, by anybody, leaves a
world behind: random sequences of every write the API offers, made by a
random one of our processes at random microversions (and, by mode, by
upstream 16.0.0's app and by SQL typed by hand), each followed by a random
candidates query sent to every world process and to a process answering
with the SQL engine (``engine.USE_WORLD = False``) over the same
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

The writes and the snapshot of the tables they are made from are in
``freshness_writes.py``; the queries in ``freshness_queries.py``. The
world is small (5-15 providers in a few trees, a sharing provider,
standard and custom classes and traits, a few aggregates) so that a step
(one write, one snapshot, one query in three processes) costs little:
20-35 ms of CPU over all the processes. Right after a write, the query is
mostly about what it touched (freshness_queries.Focus). ``run``
raises ``Mismatch`` with the seed, the step, the tail of the writes, a
diff of the answers and whether a full reload put the world right;
``tools/freshness-check`` runs it long. ``without_each_trigger`` shows
that each trigger on the tables candidates read is needed.
"""
import collections
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import sqlalchemy as sa

from placement.db import migration
from placement.tests import db as test_db
from placement.tests.functional import freshness_operator as operator
from placement.tests.functional import freshness_queries as queries
from placement.tests.functional import freshness_writes as writes
from placement.tests.functional import upstream_venv

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, 'freshness_server.py')
UPSTREAM_RUNNER = os.path.join(HERE, 'upstream_runner.py')

MODES = ('ours', 'upstream', 'sql', 'all')
# World processes of ours (each its own world).
PROCESSES = 2
# Seconds a process may take to answer (a hung one fails the run).
ANSWER_TIMEOUT = 300


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
    left to fail is the check itself, or the engines disagreeing).
    ``trust_triggers``: our processes take the database as counting its
    changes even when a change trigger is missing (they otherwise answer
    with SQL then, and placement-manage reload does nothing), for
    without_each_trigger. ``recheck_always``: they ask whether it does
    at every request (freshness_operator turns triggers off and on)."""

    def __init__(self, processes=PROCESSES, upstream=False, control=False,
                 trust_triggers=False, recheck_always=False):
        self.n_worlds = processes
        self.recheck_always = recheck_always
        self.with_upstream = upstream
        self.control = control
        self.trust_triggers = trust_triggers
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
        # The world processes share their snapshot through a file, made
        # again after a few changes (freshness_server.py --share).
        self.share_dir = tempfile.mkdtemp(prefix='placement-world-')
        world = [sys.executable, SERVER, url, '--share', self.share_dir] + (
            ['--reload-every-request'] if self.control else []) + (
            ['--trust-triggers'] if self.trust_triggers else []) + (
            ['--recheck-always'] if self.recheck_always else [])
        self.worlds = [Child('ours%d' % i, world, env)
                       for i in range(self.n_worlds)]
        self.sql = Child('ours-sql', [sys.executable, SERVER, url, '--sql']
                         + (['--trust-triggers'] if self.trust_triggers
                            else []), env)
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
        if getattr(self, 'share_dir', None):
            shutil.rmtree(self.share_dir, ignore_errors=True)
            self.share_dir = None


_MIGRATING = threading.Lock()


def _upstream_env():
    """Upstream's interpreter must not find our package first."""
    env = dict(os.environ)
    env.pop('PYTHONPATH', None)
    env.pop(test_db.ENV_VAR, None)
    return env


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
        self.api = writes.ApiWrites()
        self.sqlw = writes.SqlWrites()
        self.managew = writes.ManageWrites()
        self.operator = operator.Operator()
        self.history = collections.deque(maxlen=tail)
        self.snap = None
        self.since_reload = []
        self.asked = None       # the last query checked: (path, version)

    def snapshot(self):
        with self.cluster.engine.connect() as conn:
            return writes.Snapshot(conn)

    # -- writes -------------------------------------------------------------

    def _writer(self):
        """Who writes this step: 'ours' (our API), 'upstream' (its API),
        'hand' (SQL), 'manage' (placement-manage) or, where SQL by hand
        writes, 'operator' (freshness_operator: backups, triggers)."""
        if self.operator.due():
            return 'operator'
        draw = self.rnd.random()
        if draw < 0.004:
            return 'manage'
        if draw < 0.008 and self.mode in ('sql', 'all'):
            return 'operator'
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
        elif writer == 'operator':
            w = self.operator.make(self.rnd)
        if w is None:
            w = self.api.make(self.rnd, snap, self.favour and
                              self.favour.split()[-1])
            writer = 'upstream' if writer == 'upstream' else 'ours'
        w.writer = writer
        if w.act is not None:
            w.by = 'operator'
            w.act(self.cluster.engine)
            w.status = 'done'
        elif w.sql is not None:
            w.by = 'hand'
            with self.cluster.engine.begin() as conn:
                for text, params in w.sql:
                    conn.execute(sa.text(text), params or {})
            w.status = 'committed'
            if w.manage is not None:
                self.cluster.manage(*w.manage)
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
            answers = [child.call(req) for child in children]
        else:
            for child in children:
                child.send(req)
            answers = [child.receive() for child in children]
        if all(a.get('engine') == 'world' for a in answers[1:]):
            self.operator.answered_from_memory()
        for child, answer in zip(self.cluster.worlds, answers[1:]):
            if answer.get('engine') == 'sql' and \
                    not self.operator.sql_allowed():
                raise Mismatch(
                    '%s answered GET %s with the SQL engine, not its world: '
                    'the database does not count its changes (a change '
                    'trigger missing?), and nothing was checked'
                    % (child.name, path))
        answers = [queries.normalize(a) for a in answers]
        return answers[0], list(zip(self.cluster.worlds, answers[1:]))

    def check(self, snap, step, focus=None, query=None):
        path, version = query or queries.random_query(self.rnd, snap, focus)
        self.asked = path, version
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
            again = queries.normalize(child.call(req))
            lines.append('%s differs from SQL:' % child.name)
            lines.append(queries.diff(expected, got, names))
            lines.append('after placement-manage reload: %s' % (
                'the same as SQL: the world was stale' if again == expected
                else 'still different: the engines disagree\n' +
                queries.diff(expected, again, names)))
        lines.append('replay: tools/freshness-check --mode %s --seed %d '
                     '--steps %d (from a new database)'
                     % (self.mode, self.result.seed, step))
        return '\n'.join(lines)

    def step(self, step):
        """One write, then one query in every process (every fourth step,
        the last step's query first, then a new one); the snapshot
        taken after the write serves the query and the next write."""
        if self.snap is None:
            self.snap = self.snapshot()
        if self.blame:
            # Every world up to date before the write (reloaded, at a
            # request): a failure after it is that write's.
            self.cluster.manage('reload')
            self.ask_all('/allocation_candidates?resources=VCPU:1', '1.39')
            self.since_reload = []
        before = self.asked
        w = self.write(self.snap)
        focus = queries.focus_of(w, self.snap)
        self.result.steps += 1
        self.snap = self.snapshot()
        if before is not None and step % 4 == 1:
            # The last step's query again: what a world keeps per query
            # (a tree's search) must follow the write too.
            wrong = self.check(self.snap, step, query=before)
            if wrong:
                return wrong
        return self.check(self.snap, step, focus)


def build_world(cluster, rnd):
    """The starting world, through our API: two trees (NUMA children and
    a device grandchild), a flat compute node, a sharing storage
    provider, custom classes and traits, aggregates and some usage."""
    sql = cluster.sql

    def call(method, path, body=None, version=writes.mv(writes.LATEST)):
        answer = sql.call({'method': method, 'path': path,
                           'version': version, 'body': body})
        assert answer['status'] < 400, (method, path, answer)
        return answer['body']

    for rc in writes.CUSTOM_RCS[:2]:
        call('PUT', '/resource_classes/' + rc)
    for t in writes.CUSTOM_TRAITS[:3]:
        call('PUT', '/traits/' + t)
    made = {}

    def provider(name, parent=None, inv=None, traits=(), aggs=()):
        body = {'name': name, 'uuid': writes.seeded_uuid(rnd)}
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
             aggs=[writes.AGGS[0]])
    provider('cn0_numa0', 'cn0', inv={'VCPU': 4}, traits=['CUSTOM_A'])
    provider('cn0_numa1', 'cn0', inv={'VCPU': 4})
    provider('cn0_gpu', 'cn0_numa1', inv={'CUSTOM_GPU': 2})
    provider('cn1', inv={'VCPU': 8, 'MEMORY_MB': 2048},
             aggs=[writes.AGGS[0], writes.AGGS[1]])
    provider('cn1_fpga', 'cn1', inv={'CUSTOM_FPGA': 4},
             traits=['CUSTOM_B'])
    provider('cn2', inv={'VCPU': 16, 'MEMORY_MB': 8192, 'DISK_GB': 100},
             traits=['STORAGE_DISK_SSD'], aggs=[writes.AGGS[2]])
    provider('ss', inv={'DISK_GB': 1000}, traits=[writes.SHARES],
             aggs=[writes.AGGS[0], writes.AGGS[2]])
    for allocs in ({made['cn0_numa0']: {'VCPU': 2},
                    made['cn0']: {'MEMORY_MB': 1024},
                    made['ss']: {'DISK_GB': 100}},
                   {made['cn1']: {'VCPU': 4, 'MEMORY_MB': 512},
                    made['cn1_fpga']: {'CUSTOM_FPGA': 1}}):
        call('PUT', '/allocations/' + writes.seeded_uuid(rnd), {
            'allocations': {u: {'resources': r} for u, r in allocs.items()},
            'project_id': writes.PROJECTS[0], 'user_id': writes.USERS[0],
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
                 control=control,
                 recheck_always=mode in ('sql', 'all')) as cluster:
        rnd = random.Random(seed)
        build_world(cluster, rnd)
        return run_on(cluster, mode, steps, rnd.getrandbits(32),
                      keep_going=keep_going, progress=progress,
                      result=Result(mode, seed), blame=blame)


def run_on(cluster, mode, steps, seed, keep_going=False, progress=None,
           result=None, favour=None, blame=False):
    """``run`` over an existing Cluster, its world as it is; ``favour``: a
    table whose writers are made likelier, or 'TRUNCATE <table>'."""
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
        check.operator.close()
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
    reload. The cluster must trust triggers (see Cluster): our processes
    otherwise answer with SQL once they notice a trigger missing. Returns
    {(name, table): the failing step, or None if none failed}."""
    assert cluster.trust_triggers
    found = {}
    for i, (name, table, statement) in enumerate(
            which if which is not None else triggers(cluster.engine)):
        drop_trigger(cluster.engine, name, table)
        result = Result(mode, seed + i)
        try:
            truncate = re.search(r'\bTRUNCATE\s+ON\b', statement, re.I)
            run_on(cluster, mode, cap, seed + i, result=result,
                   favour=('TRUNCATE ' if truncate else '') + table)
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
                        'read in turn and run (mode all by default, our '
                        'processes trusting the triggers that are left) '
                        'until the check fails, at most CAP steps each; '
                        'exit 1 if one went unnoticed')
    args = parser.parse_args(argv)
    print('database: %s' % test_db.backend(), flush=True)

    def progress(result):
        print(result.summary(), flush=True)

    if args.without_each_trigger:
        mode = args.mode if args.mode != 'ours' else 'all'
        with Cluster(args.processes, upstream=mode in ('upstream', 'all'),
                     trust_triggers=True) as cluster:
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
