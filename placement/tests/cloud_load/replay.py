"""Replays model.FLOWS for many simulated compute nodes, open loop.

Every flow starts at its scheduled instant whatever the service's state
(a slow answer delays nothing else), so that a saturated service shows as
latency, not as fewer requests. Periodics of one compute node are spaced
``PERIODIC`` apart with a random phase; boots, moves and deletes arrive as
Poisson processes. A compute node runs one resource-tracker update at a
time, as nova's COMPUTE_RESOURCE_SEMAPHORE makes it.
"""
import asyncio
import collections
import json
import math
import random
import time
import uuid as uuidlib

import httpx

from placement.tests.cloud_load import model
from placement.tests.cloud_load import scheduler

PROJECTS, USERS = 100, 200   # bench-large-world's project and user names
# The answers a simulated agent reads; the others are not decoded, as a
# provider list of a large world would stall the event loop.
# (Candidates are read by the scheduler's processes: scheduler.py.)
DECODED = {'inventories', 'aggregates', 'rp_allocations', 'consumer',
           'put_inventories'}


class Compute:
    """One nova-compute's provider cache (report client) and its lock."""

    def __init__(self, root, providers):
        self.root = root
        self.providers = providers      # top-down, root first
        self.aggregates = {}
        self.inventory = None           # root's last GET inventories body
        self.refreshed = -math.inf
        self.toggles = 0                # inventory changes made (cleanup)
        self.lock = asyncio.Lock()


# Seconds over which the computes of a storm start their services.
STORM_START = 5.0


class Stats:
    """Latencies and statuses per request kind, and the generator's own
    lateness per scheduled event."""

    def __init__(self):
        self.times = collections.defaultdict(list)
        self.status = collections.defaultdict(collections.Counter)
        self.issued = collections.defaultdict(collections.Counter)
        self.late = []
        self.flows = collections.Counter()
        self.recording = False
        # CPU seconds the scheduler's processes spent in the window.
        self.scheduler_cpu = 0.0
        # (seconds since the window opened at the send, kind, seconds,
        # status) of every request recorded: the storm's timeline.
        self.timeline = []
        self.opened = None
        # When the node restarted by bench-cloud --restart-node went down
        # and answered again (seconds since the window opened).
        self.node_down = self.node_up = None
        # What the restarted node logged of its workers and their world.
        self.node_log = []

    def add(self, kind, seconds, status, sent=None):
        self.issued[kind][status] += 1      # the whole run, drain included
        if self.recording:
            self.times[kind].append(seconds)
            self.status[kind][status] += 1
            if sent is not None and self.opened is not None:
                self.timeline.append((sent - self.opened, kind, seconds,
                                      status))

    def buckets(self, width):
        """Per ``width`` seconds of the window: (start, requests, p99 of
        all, p99 of candidates, 5xx, the longest), in ms."""
        rows = collections.defaultdict(list)
        for at, kind, seconds, status in self.timeline:
            rows[int(at // width)].append((kind, seconds, status))
        out = []
        for b in sorted(rows):
            reqs = rows[b]
            out.append((b * width, len(reqs),
                        pct(sorted(t for _k, t, _s in reqs), 99),
                        pct(sorted(t for k, t, _s in reqs
                                   if k == 'candidates'), 99),
                        sum(1 for _k, _t, st in reqs
                            if st >= 500 or st == 0),
                        max(t for _k, t, _s in reqs) * 1000))
        return out

    def summary(self, elapsed):
        out = {}
        for kind, times in sorted(self.times.items()):
            times = sorted(times)
            st = self.status[kind]
            out[kind] = {
                'count': len(times), 'rate': len(times) / elapsed,
                'p50': pct(times, 50), 'p95': pct(times, 95),
                'p99': pct(times, 99),
                '4xx': sum(n for s, n in st.items() if 400 <= s < 500),
                '5xx': sum(n for s, n in st.items() if s >= 500 or s == 0)}
        return out


def pct(sorted_values, p):
    if not sorted_values:
        return float('nan')
    i = min(len(sorted_values) - 1,
            int(math.ceil(p / 100 * len(sorted_values))) - 1)
    return sorted_values[max(i, 0)] * 1000


class Replay:
    """The simulated cloud against one service URL."""

    def __init__(self, url, computes, args, stats=None):
        self.url = url
        self.args = args
        self.scale = args.time_scale
        self.computes = computes
        self.by_rp = {rp: c for c in computes for rp in c.providers}
        self.stats = stats or Stats()
        self.rnd = random.Random(args.seed)
        self.instances = {}             # uuid -> [compute, project, user]
        self.busy = set()               # instances being moved or deleted
        self.leftovers = []             # migrations a failed move left
        self.client = None
        self.scheduler = None

    # -- HTTP --------------------------------------------------------------

    @staticmethod
    def _headers(k):
        headers = {'x-auth-token': 'admin', 'accept': 'application/json'}
        if k.version:
            headers['openstack-api-version'] = 'placement ' + k.version
        return headers

    async def call(self, kind, body=None, expect=(200, 201, 204), **fill):
        """(status, decoded body or None) of one request of ``kind``."""
        k = model.KINDS[kind]
        headers = self._headers(k)
        start = time.perf_counter()
        # Our own queue in front of httpx's pool: its waiting requests
        # cost CPU per queued request at every release, which made the
        # generator the bottleneck once a slow service let them pile up.
        # The wait counts in the latency, as a queue at the server would.
        async with self.slots:
            try:
                resp = await self.client.request(
                    k.method, self.url + k.path.format(**fill),
                    headers=headers, json=body)
                status = resp.status_code
                data = resp.content
            except httpx.HTTPError:
                status, data = 0, b''
        self.stats.add(kind, time.perf_counter() - start, status, start)
        if status not in expect or kind not in DECODED:
            return status, None
        return status, json.loads(data) if data else None

    # -- flows -------------------------------------------------------------

    async def flow(self, name, ctx):
        """Run ``name``'s steps; per-provider steps grouped in order, as
        _refresh_associations interleaves them."""
        steps = model.FLOWS[name][1]
        compute = ctx.get('compute')
        if name == 'rt_update':
            ctx['stale'] = (self.loop.time() - compute.refreshed >
                            model.REFRESH * self.scale)
            ctx['C'] = set()
        i = 0
        while i < len(steps):
            s = steps[i]
            if s.when == 'stale' and not ctx.get('stale'):
                i += 1
                continue
            if s.times in ('P', 'A'):
                group = [s]
                while (i + len(group) < len(steps)
                       and steps[i + len(group)].times in ('P', 'A')
                       and steps[i + len(group)].when == s.when):
                    group.append(steps[i + len(group)])
                for rp in compute.providers:
                    for g in group:
                        if g.times == 'A' and not compute.aggregates.get(rp):
                            continue
                        await self.do(g, ctx, rp=rp)
                i += len(group)
                continue
            if s.kind.startswith('@'):
                sub = dict(ctx, compute=ctx.get(s.target) or compute)
                if s.kind == '@rt_update':
                    async with sub['compute'].lock:
                        if await self.flow('rt_update', sub) == 'redrive':
                            # _update_to_placement's retry on a generation
                            # conflict: the cache was cleared, run again.
                            await self.flow('rt_update', sub)
                else:
                    await self.flow(s.kind[1:], sub)
            elif s.times == 'C':
                for consumer in sorted(ctx['C']):
                    await self.do(s, ctx, consumer=consumer)
            else:
                result = await self.do(s, ctx)
                if result is False:
                    return False
                if result == 'redrive':
                    return 'redrive'
            i += 1
        if name == 'rt_update' and ctx['stale']:
            compute.refreshed = self.loop.time()
        return True

    async def do(self, s, ctx, rp=None, consumer=None):
        """One step; False ends the flow (nova would give up there)."""
        c = ctx.get('compute')
        kind = s.kind
        if kind == 'in_tree':
            await self.call(kind, root=c.root)
        elif kind == 'inventories':
            _, body = await self.call(kind, rp=rp)
            if rp == c.root and body:
                c.inventory = body
        elif kind == 'aggregates':
            _, body = await self.call(kind, rp=rp)
            if body is not None:
                c.aggregates[rp] = body['aggregates']
        elif kind == 'traits':
            await self.call(kind, rp=rp)
        elif kind == 'sharing':
            await self.call(kind, aggs=','.join(c.aggregates[rp]))
        elif kind == 'rp_allocations':
            _, body = await self.call(kind, rp=rp or c.root)
            if body is not None and 'C' in ctx:
                ctx['C'].update(body['allocations'])
        elif kind == 'consumer':
            who = consumer or ctx[s.target]
            _, body = await self.call(kind, consumer=who)
            if body is not None and s.target:
                ctx['seen_' + s.target] = body
        elif kind == 'put_inventories':
            return await self.change_inventory(c)
        elif kind in ('usages_project', 'usages_user'):
            await self.call(kind, project=ctx['project'], user=ctx['user'])
        elif kind == 'candidates':
            return await self.choose(ctx)
        elif kind == 'claim':
            status, _ = await self.call(kind, {
                'allocations': ctx['request'], 'project_id': ctx['project'],
                'user_id': ctx['user'], 'consumer_generation': None},
                consumer=ctx['instance'])
            return status == 204
        elif kind == 'move':
            return await self.move(ctx)
        elif kind == 'clear':
            seen = ctx.get('seen_migration') or {}
            await self.call(kind, {
                'allocations': {}, 'project_id': ctx['project'],
                'user_id': ctx['user'],
                'consumer_generation': seen.get('consumer_generation')},
                consumer=ctx['migration'])
        elif kind == 'delete':
            await self.call(kind, consumer=ctx['instance'])
        elif kind == 'list_providers':
            await self.call(kind)
        return True

    async def change_inventory(self, c):
        """The driver reports a changed inventory (DISK_GB reserved 0 <->
        1) with probability ``--changes`` per update; PUT with the cached
        generation, which any allocation since the refresh made stale."""
        if self.rnd.random() >= self.args.changes or c.inventory is None:
            return True
        inv = c.inventory['inventories']
        if 'DISK_GB' not in inv:
            return True
        inv['DISK_GB']['reserved'] = 1 - inv['DISK_GB']['reserved']
        status, body = await self.call('put_inventories', {
            'resource_provider_generation':
                c.inventory['resource_provider_generation'],
            'inventories': inv}, expect=(200,), rp=c.root)
        if status == 200:
            c.toggles += 1
            c.inventory = body
            return True
        inv['DISK_GB']['reserved'] = 1 - inv['DISK_GB']['reserved']
        if status == 409:
            c.refreshed = -math.inf
            c.inventory = None
            return 'redrive'
        return True

    async def choose(self, ctx):
        """The scheduler's pick: a random candidate on a simulated compute
        node other than the instance's own (nova filters and weighs; the
        spread is what matters here), made in the scheduler's processes
        (scheduler.py); the request waits in the replay's queue as
        others do, and that wait counts in its latency."""
        k = model.KINDS['candidates']
        source = ctx.get('source')
        start = time.perf_counter()
        async with self.slots:
            sent, seconds, status, pick, why, cpu = await self.scheduler.pick(
                self.loop, self.url + k.path, self._headers(k),
                source.root if source else None, self.rnd.getrandbits(32))
        self.stats.add('candidates', sent - start + seconds, status, start)
        if self.stats.recording:
            self.stats.scheduler_cpu += cpu
        if status != 200:
            self.stats.flows['no answer'] += 1
            return False
        if pick is None:
            self.stats.flows[why] += 1
            return False
        ctx['request'] = pick
        ctx['dest'] = self.by_rp[next(iter(pick))]
        return True

    async def move(self, ctx):
        seen = ctx.get('seen_instance')
        if not seen or not seen.get('allocations'):
            return False
        status, _ = await self.call('move', {
            ctx['instance']: {
                'allocations': {}, 'project_id': ctx['project'],
                'user_id': ctx['user'],
                'consumer_generation': seen['consumer_generation']},
            ctx['migration']: {
                'allocations': {rp: {'resources': a['resources']}
                                for rp, a in seen['allocations'].items()},
                'project_id': ctx['project'], 'user_id': ctx['user'],
                'consumer_generation': None}}, consumer=None)
        return status == 204

    # -- scheduling --------------------------------------------------------

    async def at(self, when, coro_fn):
        """Start ``coro_fn()`` at loop time ``when``; record lateness."""
        delay = when - self.loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        late = self.loop.time() - when
        if self.stats.recording:
            self.stats.late.append(late)
        task = asyncio.ensure_future(coro_fn())
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task):
        """A flow that raised is counted, not lost with its task."""
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.stats.flows['error: %r' % task.exception()] += 1

    async def compute_clock(self, c, end, cold_at):
        period = model.PERIODIC * self.scale
        t = self.start + self.rnd.uniform(0, period)
        # Spread the association refreshes over the cloud: each cache was
        # last refreshed somewhere in the last REFRESH_EVERY periodics.
        c.refreshed = t - self.rnd.uniform(
            0, model.REFRESH_EVERY * period) + period / 2
        storm = self.args.storm
        while t < end or (storm and cold_at is not None and cold_at < end):
            if cold_at is not None and t >= cold_at:
                c.refreshed = -math.inf   # restarted: its caches empty
                self.stats.flows['restart'] += 1
                if storm:
                    # A restarted nova-compute reports its tree as its
                    # service starts, a few seconds in, then every period.
                    t = cold_at + self.rnd.uniform(0, STORM_START)
                cold_at = None
            await self.at(t + self.rnd.uniform(-0.01, 0.01) * period,
                          lambda: self.periodic(c))
            t += period

    async def periodic(self, c):
        self.stats.flows['periodic'] += 1
        await self.flow('periodic', {'compute': c})

    async def poisson(self, rate, end, fn):
        if rate <= 0:
            return
        t = self.loop.time()
        while True:
            t += self.rnd.expovariate(rate)
            if t >= end:
                return
            await self.at(t, fn)

    def _owner(self):
        return ('bench-project-%d' % self.rnd.randrange(PROJECTS),
                'bench-user-%d' % self.rnd.randrange(USERS))

    async def boot(self):
        project, user = self._owner()
        ctx = {'instance': str(uuidlib.uuid4()), 'project': project,
               'user': user}
        if await self.flow('boot', ctx):
            self.instances[ctx['instance']] = [ctx['dest'], project, user]
            self.stats.flows['boot'] += 1
        else:
            self.stats.flows['boot failed'] += 1

    def _pick(self):
        free = [i for i in self.instances if i not in self.busy]
        if not free:
            return None
        inst = self.rnd.choice(free)
        self.busy.add(inst)
        return inst

    async def delete(self):
        inst = self._pick()
        if inst is None:
            return
        c, project, user = self.instances.pop(inst)
        self.busy.discard(inst)
        await self.flow('delete', {'instance': inst, 'source': c,
                                   'compute': c, 'project': project,
                                   'user': user})
        self.stats.flows['delete'] += 1

    async def migrate(self, flow):
        inst = self._pick()
        if inst is None:
            return
        c, project, user = self.instances[inst]
        ctx = {'instance': inst, 'migration': str(uuidlib.uuid4()),
               'source': c, 'compute': c, 'project': project, 'user': user}
        try:
            if await self.flow(flow, ctx):
                self.instances[inst][0] = ctx['dest']
                self.stats.flows[flow] += 1
            else:
                self.stats.flows[flow + ' failed'] += 1
                self.leftovers.append(ctx['migration'])
        finally:
            self.busy.discard(inst)

    async def operator(self):
        await self.flow('operator', {})

    async def run(self, duration, warmup=0.0, restarts=0, prime=0):
        """Drive the cloud for ``warmup + duration`` seconds; statistics
        (and ``on_window``'s CPU snapshots) cover the last ``duration``.
        ``prime`` instances are booted first, one by one, so that deletes
        and moves find instances from the start."""
        a = self.args
        self.loop = asyncio.get_running_loop()
        self.tasks = set()
        limits = httpx.Limits(max_connections=a.connections,
                              max_keepalive_connections=a.connections)
        self.slots = asyncio.Semaphore(a.connections)
        self.scheduler = scheduler.Scheduler(
            {rp: c.root for rp, c in self.by_rp.items()}, a.timeout)
        try:
            return await self._run(limits, duration, warmup, restarts, prime)
        finally:
            self.scheduler.close()

    async def _run(self, limits, duration, warmup, restarts, prime):
        a = self.args
        async with httpx.AsyncClient(limits=limits, timeout=a.timeout) as cl:
            self.client = cl
            for _ in range(prime):
                await self.boot()
            self.start = self.loop.time()
            end = self.start + warmup + duration
            cold = set(self.rnd.sample(range(len(self.computes)),
                                       min(restarts, len(self.computes))))
            # Restarts in the window's first half, their cold refresh
            # inside it; a storm restarts them all at once, a tenth into
            # the window.
            def restart_at():
                if a.storm:
                    return self.start + warmup + duration / 10
                return self.start + self.rnd.uniform(warmup,
                                                     warmup + duration / 2)
            clocks = [self.compute_clock(
                c, end, restart_at() if n in cold else None)
                for n, c in enumerate(self.computes)]
            b = a.boots
            clocks += [
                self.poisson(b, end, self.boot),
                self.poisson(b * a.deletes, end, self.delete),
                self.poisson(b * a.cold_migrations, end,
                             lambda: self.migrate('cold_migration')),
                self.poisson(b * a.live_migrations, end,
                             lambda: self.migrate('live_migration')),
                self.poisson(a.operator_lists / 60.0 / self.scale, end,
                             self.operator),
                self.window(warmup, duration)]
            await asyncio.gather(*clocks)
            if self.tasks:
                await asyncio.wait(self.tasks, timeout=a.timeout)
            await self.cleanup()
        return self.measured

    async def window(self, warmup, duration):
        await asyncio.sleep(warmup)
        before = self.on_window() if self.on_window else None
        cpu0 = time.process_time()
        self.stats.recording = True
        self.stats.opened = time.perf_counter()
        if self.on_open is not None:
            self.on_open()
        t0 = self.loop.time()
        await asyncio.sleep(duration)
        self.stats.recording = False
        elapsed = self.loop.time() - t0
        after = self.on_window() if self.on_window else None
        self.measured = {'elapsed': elapsed, 'server': (before, after),
                         'generator_cpu': time.process_time() - cpu0
                         + self.stats.scheduler_cpu}

    on_window = None
    # Called once the measured window opens (a restart timed from it).
    on_open = None

    async def cleanup(self):
        """Leave the world as found: the instances booted here deleted,
        the inventories changed here changed back (not measured)."""
        for inst in list(self.instances) + self.leftovers:
            await self.call('delete', consumer=inst, expect=(204, 404))
        self.instances.clear()
        for c in self.computes:
            if c.toggles % 2:
                _, body = await self.call('inventories', rp=c.root)
                body['inventories']['DISK_GB']['reserved'] = 0
                await self.call('put_inventories', body, rp=c.root)


async def discover(url, count, seed, timeout=600):
    """``count`` compute nodes to simulate, each with its providers
    top-down: first trees of nova's candidates answer (a limit of 1000
    over 52,632 trees offers the scheduler the same first trees; random
    ones would seldom be picked), then, if it has too few, others of the
    whole listing (a million providers take it half a minute)."""
    k = model.KINDS['candidates']
    async with httpx.AsyncClient(timeout=timeout) as client:
        resp = await client.get(url + k.path, headers=Replay._headers(k))
        resp.raise_for_status()
        offered = _trees(
            (u, s['parent_provider_uuid'], s['root_provider_uuid'], u)
            for u, s in resp.json()['provider_summaries'].items())
        rnd = random.Random(seed)
        roots = sorted(offered)
        rnd.shuffle(roots)
        if len(roots) < count:
            resp = await client.get(url + '/resource_providers', headers={
                'x-auth-token': 'admin', 'accept': 'application/json',
                'openstack-api-version': 'placement 1.14'})
            resp.raise_for_status()
            listed = _trees(
                (rp['uuid'], rp['parent_provider_uuid'],
                 rp['root_provider_uuid'], rp['name'])
                for rp in resp.json()['resource_providers'])
            others = sorted((r for r in listed if r not in offered),
                            key=lambda r: listed[r][1][r])
            rnd.shuffle(others)
            roots += others
            offered.update(listed)
    return [Compute(r, offered[r][0]) for r in roots[:count]]


def _trees(rows):
    """{root: ([providers top-down], {uuid: name})} of (uuid, parent,
    root, name) rows."""
    rows = list(rows)
    parent = {u: p for u, p, _r, _n in rows}
    depth = {}

    def level(u):
        if u not in depth:
            depth[u] = 0 if parent[u] is None else level(parent[u]) + 1
        return depth[u]

    trees = collections.defaultdict(lambda: ([], {}))
    for u, _p, root, name in sorted(rows, key=lambda r: level(r[0])):
        trees[root][0].append(u)
        trees[root][1][u] = name
    return dict(trees)
