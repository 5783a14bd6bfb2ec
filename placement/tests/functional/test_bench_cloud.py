"""tools/bench-cloud's replay, a few seconds against a live server of
ours, so that the tool cannot rot between the runs that give issue 50's
figures: every request kind of the load model issued, none answered 5xx;
and the benchmarks page's table is the model's."""
import argparse
import asyncio
import importlib.machinery
import importlib.util
import os
import threading
import types

import pytest

from placement.tests.cloud_load import compare
from placement.tests.cloud_load import model
from placement.tests.cloud_load import replay
from placement.tests import db as test_db
from placement.tests.functional import api_world
from placement.tests.functional import candidate_worlds
from placement.tests.functional import live_server

pytestmark = pytest.mark.once('a smoke run of a benchmark tool')

AGG = 'c10d0000-0000-4000-8000-000000000001'


def _world(trees=6):
    """bench-large-world's tree, shrunk: a compute node in an aggregate,
    two NUMA nodes, a VGPU provider under each; instances on half."""
    w = candidate_worlds.WorldBuilder()
    for t in range(trees):
        cn = 'cn%d' % t
        w.provider(cn)
        w.inventory(cn, 'VCPU', 64, allocation_ratio=4.0)
        w.inventory(cn, 'MEMORY_MB', 262144, reserved=4096)
        w.inventory(cn, 'DISK_GB', 2000)
        w.aggregate(cn, AGG)
        for k in range(2):
            numa = '%s-numa%d' % (cn, k)
            w.provider(numa, parent=cn)
            w.trait(numa, 'HW_NUMA_ROOT')
            w.provider('%s-vgpu%d' % (cn, k), parent=numa)
            w.inventory('%s-vgpu%d' % (cn, k), 'VGPU', 4)
        if t % 2:
            w.usage(cn, 'VCPU', 2)
    return w


def _args(**kw):
    args = dict(time_scale=0.05, boots=2.0, deletes=0.5,
                cold_migrations=0.5, live_migrations=0.5,
                operator_lists=6.0, changes=0.3, connections=16,
                timeout=30, seed=50, storm=False)
    args.update(kw)
    return argparse.Namespace(**args)


def test_replay_issues_every_kind_without_5xx():
    with live_server.LiveServer(workers=2) as server:
        api_world.load(_world(), api_world.Client(server.port), threads=4)
        computes = asyncio.run(replay.discover(server.url, 6, 50))
        assert len(computes) == 6
        assert all(len(c.providers) == 5 for c in computes)
        rep = replay.Replay(server.url, computes, _args())
        measured = asyncio.run(rep.run(3.0, warmup=0.2, restarts=2,
                                       prime=6))
        log = server.log_text()
    assert measured['elapsed'] >= 3.0
    issued = rep.stats.issued
    assert set(issued) == set(model.KINDS), (
        set(model.KINDS) - set(issued), dict(rep.stats.flows))
    bad = {k: dict(st) for k, st in issued.items()
           if any(s >= 500 or s == 0 for s in st)}
    assert not bad, (bad, log[-3000:])
    flows = rep.stats.flows
    assert flows['boot'] and flows['restart'], dict(flows)
    assert flows['cold_migration'] + flows['live_migration'], dict(flows)
    assert not [f for f in flows if f.startswith('error')], dict(flows)
    # Open loop: the generator started its events on time.
    assert replay.pct(sorted(rep.stats.late), 50) < 100


def test_the_simulated_compute_nodes_are_those_the_scheduler_is_offered():
    """discover takes trees of nova's candidates answer first (on a large
    world a limit offers the same first trees), and the others of the
    whole listing when the answer has too few: here two trees are
    disabled, so never offered."""
    w = _world(trees=6)
    for t in (1, 4):
        w.trait('cn%d' % t, 'COMPUTE_STATUS_DISABLED')
    with live_server.LiveServer(workers=1) as server:
        api_world.load(w, api_world.Client(server.port), threads=4)
        uuids = {w.by_name['cn%d' % t]['uuid']: t for t in range(6)}
        offered = asyncio.run(replay.discover(server.url, 4, 50))
        everyone = asyncio.run(replay.discover(server.url, 6, 50))
    assert sorted(uuids[c.root] for c in offered) == [0, 2, 3, 5]
    assert {uuids[c.root] for c in everyone[:4]} == {0, 2, 3, 5}
    assert {uuids[c.root] for c in everyone[4:]} == {1, 4}
    # Each tree top-down: the root, its NUMA nodes, then their VGPUs.
    assert all(len(c.providers) == 5 and c.providers[0] == c.root
               for c in everyone)


def test_a_storm_restarts_every_compute_at_once():
    """--storm: every compute node restarts a tenth into the window and
    reads its whole tree again (in_tree, each provider's inventories,
    traits and aggregates) within STORM_START; the window's timeline
    counts every request recorded."""
    with live_server.LiveServer(workers=2) as server:
        api_world.load(_world(), api_world.Client(server.port), threads=4)
        computes = asyncio.run(replay.discover(server.url, 6, 50))
        rep = replay.Replay(server.url, computes,
                            _args(storm=True, boots=0.0, time_scale=1.0))
        asyncio.run(rep.run(8.0, warmup=0.2, restarts=6))
    stats = rep.stats
    assert stats.flows['restart'] == 6, dict(stats.flows)
    # Before the storm nothing refreshes its associations (a period is
    # 60 s); after it, each compute node read its tree and providers.
    assert len(stats.times['in_tree']) == 6
    assert len(stats.times['inventories']) == 6 * 5
    storm = [at for at, kind, _t, _s in stats.timeline if kind == 'in_tree']
    # (each periodic starts within 1% of a period of its time)
    assert all(0.8 - 0.6 <= at <= 0.8 + replay.STORM_START + 1
               for at in storm), storm
    rows = stats.buckets(10)
    assert sum(req for _start, req, *_ in rows) == sum(
        len(t) for t in stats.times.values())


def _bench_cloud():
    """tools/bench-cloud, a script without a suffix, as a module."""
    path = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                        'tools', 'bench-cloud')
    loader = importlib.machinery.SourceFileLoader('bench_cloud', path)
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_a_node_restarted_under_the_traffic(capsys):
    """--restart-node: the node is stopped and started again over the
    same database while the replay goes on; the requests sent once it
    answers again are answered, and the report shows the window around
    the restart and how the workers took up the world."""
    tool = _bench_cloud()
    db = test_db.TestDatabase(migrate=True)
    try:
        with live_server.LiveServer(workers=2, db_url=db.url) as server:
            api_world.load(_world(), api_world.Client(server.port),
                           threads=4)
            computes = asyncio.run(replay.discover(server.url, 6, 50))
            rep = replay.Replay(server.url, computes,
                                _args(operator_lists=0.0))
            side = types.SimpleNamespace(server=server, cold_restart=False)
            rep.on_open = lambda: threading.Timer(
                1.3, tool.Side.restart, (side, rep.stats)).start()
            asyncio.run(rep.run(7.0, warmup=0.2, prime=2))
            rep.stats.node_log = ['a line of the node']
    finally:
        db.drop()
    stats = rep.stats
    assert 0 < stats.node_down < stats.node_up < 7.0
    after = [st for at, _k, _t, st in stats.timeline if at >= stats.node_up]
    assert after and all(200 <= st < 500 for st in after), after
    tool.restart_report({'ours': {'stats': stats}})
    out = capsys.readouterr().out
    assert 'the node restarted at' in out and 'node: a line' in out


def test_the_reporting_reads_are_compared_and_timed():
    """--compare: each reporting read sent to both services in turns,
    the answers compared and each service's median time kept."""
    with live_server.LiveServer(workers=1) as server:
        api_world.load(_world(), api_world.Client(server.port), threads=4)
        computes = asyncio.run(replay.discover(server.url, 6, 50))
        reqs = compare.sample(computes, [], [], 3, 50)
        out = compare.compare({'a': server.url, 'b': server.url}, reqs)
    assert set(out) == {'in_tree', 'inventories', 'traits', 'aggregates',
                        'rp_allocations'}
    for row in out.values():
        assert row['same'] == 3 and row['differ'] == 0
        assert set(row['ms']) == {'a', 'b'}
        assert all(ms > 0 for ms in row['ms'].values())


def test_benchmarks_page_shows_the_model():
    path = os.path.join(live_server.REPO_ROOT, 'doc', 'source',
                        'benchmarks.rst')
    with open(path) as f:
        text = f.read()
    begin, end = '.. cloud-model-begin\n\n', '\n.. cloud-model-end'
    assert begin in text and end in text
    table = text[text.index(begin) + len(begin):text.index(end)]
    assert table == model.render(), (
        'regenerate with tools/bench-cloud --print-model')
