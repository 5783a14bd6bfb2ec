"""The world a node's processes share (candidates/snapshot.py, world/).

A large world is written once to a file every process of the node maps:
a process starting later maps it and catches up from the change log
instead of reading every provider; after enough changes one process
writes a newer file and the others move to it. These tests lower the
thresholds (world/settings.py's ``SHARE_FROM``, ``OVERLAY``) so that a
handful of providers goes through each step. That every answer stays the
database's through all of it is the freshness check's
(test_world_freshness.py runs its world processes sharing a file, made
again every few changes).
"""
import mmap
import os
import threading
import time
import uuid as uuidlib

import pytest
import sqlalchemy as sa

from placement import context
from placement.db import change_triggers
from placement.objects.candidates import model
from placement.objects.candidates import node_file
from placement.objects.candidates import world as world_mod
from placement.objects.candidates.world import apart
from placement.objects.candidates.world import settings as world_settings
from placement.objects import changes
from placement.tests.functional import candidate_worlds as cw
from placement.tests.functional.fixtures import gabbits
from placement.tests.functional import test_candidate_gather as twr
from placement.tests.functional import test_candidates_world as tcw


@pytest.fixture
def shared(monkeypatch, tmp_path):
    # What [candidates] world_dir says, whatever the app's configuration.
    monkeypatch.setattr(world_mod, 'configure', lambda conf: None)
    monkeypatch.setattr(world_settings, 'SHARED_DIR', str(tmp_path))
    monkeypatch.setattr(world_settings, 'SHARE_FROM', 0)
    monkeypatch.setattr(world_settings, 'OVERLAY', 3)
    return tmp_path


@pytest.fixture
def full_reads(monkeypatch):
    """The worlds that read every provider from the database, in order."""
    readers = []
    real = world_mod.World._read_rows

    def _read(self, conn, ids):
        if ids is None:
            readers.append(self)
        return real(self, conn, ids)

    monkeypatch.setattr(world_mod.World, '_read_rows', _read)
    return readers


def _app_and_engine():
    return gabbits.app_and_engine_over_world(cw.WorldBuilder())


def _process(engine):
    """A World as a new process of the node has it after one request."""
    other = world_mod.World()
    _refresh(other, engine)
    return other


def _refresh(world, engine):
    tcw._refresh(world, engine, None)


def _renews_apart(engine):
    """Whether a file is renewed by a thread (World._renew_apart) on this
    test run's database: not on SQLite, whose writers would wait."""
    return engine.dialect.name != 'sqlite'


def _renewed(world):
    """After the thread renewing ``world``'s file (if any) is done."""
    if world._renewal is not None:
        world._renewal[1].join(30)
        assert not world._renewal[1].is_alive()


def _vcpu(world, rp_uuid):
    return world.models[world.by_uuid[rp_uuid]].inventory['VCPU'][:2]


def _cloud_of_one(app, vcpu=4):
    """A cloud of one provider ``a`` with ``vcpu`` VCPU: (cloud, a)."""
    cloud = tcw._Cloud(app)
    a = cloud.provider('a')
    cloud.inventory(a, VCPU=vcpu)
    return cloud, a


def _files(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith('world-')
                  and not n.endswith('.lock'))


def test_a_later_process_maps_the_file_and_catches_up(shared, full_reads):
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app)
        first = _process(engine)
        assert full_reads == [first]
        assert len(_files(shared)) == 1 and first.base.path
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=3)
        b = cloud.provider('b', parent=a)
        second = _process(engine)
        # Mapped, not read: the same file, and only what changed since.
        assert full_reads == [first]
        assert second.base.ino == first.base.ino
        assert _vcpu(second, a) == (4, 3)
        assert second.rps[second.by_uuid[b]].root == second.by_uuid[a]
        # The first one catches up too, by the change log.
        _refresh(first, engine)
        assert _vcpu(first, a) == (4, 3) and b in first.by_uuid
        assert first.loads == 1 and second.loads == 1


def _as_another_history(engine, rp_uuid, total):
    """Provider ``rp_uuid``'s VCPU total set to ``total``, its slot's
    counter then put back where it was with another mark: what a database
    restored from a backup, or a standby that lagged, shows at the count
    the node's file was written at, with other data behind it."""
    with engine.begin() as conn:
        rp = conn.execute(sa.text('SELECT id FROM resource_providers '
                                  'WHERE uuid = :u'), {'u': rp_uuid}).scalar()
        conn.execute(sa.text('UPDATE inventories SET total = :t '
                             'WHERE resource_provider_id = :rp'),
                     {'t': total, 'rp': rp})
    slot = {'s': changes.slot_of(rp), 'm': change_triggers.random_mark()}
    with engine.begin() as conn:
        conn.execute(sa.text('DELETE FROM placement_changes WHERE slot = :s '
                             'AND seq = (SELECT seq FROM '
                             'placement_change_slots WHERE slot = :s)'),
                     slot)
        conn.execute(sa.text('UPDATE placement_change_slots SET seq = '
                             'seq - 1, mark = :m WHERE slot = :s'), slot)


def test_a_file_of_another_history_is_not_taken(shared, full_reads):
    with _app_and_engine() as (app, engine):
        _cloud, a = _cloud_of_one(app, vcpu=4)
        first = _process(engine)
        _as_another_history(engine, a, 2)
        # Every counter is what the file was written at; one mark is not.
        second = _process(engine)
        assert full_reads == [first, second]
        assert _vcpu(second, a) == (2, 0)
        _refresh(first, engine)
        assert _vcpu(first, a) == (2, 0)


def test_a_newer_file_after_many_changes_and_the_others_follow(
        shared, full_reads):
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=8)
        first = _process(engine)
        second = _process(engine)
        old = first.base.ino
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
        _refresh(second, engine)
        assert second.changed and second.base.ino == old
        # Past OVERLAY (not twice): answered as it is now, the file
        # renewed apart (in the request on SQLite).
        more = []
        while first._renewal is None and len(full_reads) == 1:
            assert len(more) < 10
            more.append(cloud.provider('p%d' % len(more)))
            _refresh(first, engine)
            assert all(p in first.by_uuid for p in more)
        if _renews_apart(engine):
            assert first.base.ino == old and first.changed
            _renewed(first)
            assert len(full_reads) == 2
            assert full_reads[1] not in (first, second)
            _refresh(first, engine)
            assert len(full_reads) == 2
        else:
            assert full_reads == [first, first]
        assert first.base.ino != old and not first.changed
        assert _vcpu(first, a) == (8, 1) and all(
            p in first.by_uuid for p in more)
        # The other process, with changes of its own since the old file,
        # moves to the new one without reading everything.
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=2)
        _refresh(second, engine)
        assert len(full_reads) == 2
        assert second.base.ino == first.base.ino
        assert _vcpu(second, a) == (8, 3) and all(
            p in second.by_uuid for p in more)
        assert len(_files(shared)) == 1


def _held_renewals(monkeypatch):
    """(release, failures): renewals read the database once ``release``
    is set, and raise the messages put in ``failures`` instead."""
    release = threading.Event()
    failures = []
    real = world_mod.World._read_snapshot

    def held(self, conn, epoch, current):
        if threading.current_thread().name == 'placement-world-renew':
            assert release.wait(30)
            if failures:
                raise RuntimeError(failures.pop())
        return real(self, conn, epoch, current)

    monkeypatch.setattr(world_mod.World, '_read_snapshot', held)
    return release, failures


def test_requests_are_answered_while_the_file_is_renewed(
        shared, monkeypatch, full_reads):
    """Renewing the file (reading every provider: 10 s at a million)
    keeps no request waiting: they are answered from the old snapshot
    and what changed since, which may grow past the threshold meanwhile;
    one renewal at a time."""
    release, _failures = _held_renewals(monkeypatch)
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=8)
        first = _process(engine)
        old = first.base.ino
        used = 0
        while first._renewal is None and len(full_reads) == 1:
            assert used < 10
            used += 1
            cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
            _refresh(first, engine)
            assert _vcpu(first, a) == (8, used)
        if not _renews_apart(engine):
            # SQLite: no thread; the request past the threshold read it.
            assert first._renewal is None and full_reads == [first, first]
            return
        # Written on past the threshold: still answered, one renewal.
        renewal = first._renewal[1]
        for _ in range(2):
            used += 1
            cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
            _refresh(first, engine)
            assert _vcpu(first, a) == (8, used)
        assert renewal.is_alive() and first._renewal[1] is renewal
        assert first.base.ino == old and full_reads == [first]
        release.set()
        _renewed(first)
        _refresh(first, engine)
        # The new file, and what was written since the counters it read.
        assert first.base.ino != old and len(first.changed) <= 1
        assert _vcpu(first, a) == (8, used) and len(full_reads) == 2


def test_past_twice_the_threshold_or_after_a_failed_renewal_the_request_reads(
        shared, monkeypatch, full_reads, caplog):
    """The fallbacks: a renewal that failed (logged), or changes past
    twice the threshold (a renewal too slow for the writes): the request
    reads the world itself, as a process does when nothing is shared."""
    release, failures = _held_renewals(monkeypatch)
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=16)
        first = _process(engine)
        failures.append('the database went away')
        release.set()
        used = 0
        while len(full_reads) == 1:
            assert used < 10
            used += 1
            cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
            _refresh(first, engine)
            _renewed(first)
            assert _vcpu(first, a) == (16, used)
        if _renews_apart(engine):
            assert 'writing %s failed' % first.base.path in caplog.text
        assert full_reads == [first, first] and not first.changed
        old = first.base.ino
        for i in range(8):
            cloud.provider('p%d' % i)
        _refresh(first, engine)
        assert full_reads == [first, first, first]
        assert first.base.ino != old and not first.changed


def test_a_file_of_another_epoch_or_broken_is_not_used(shared, full_reads):
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app)
        first = _process(engine)
        path = first.base.path
        # placement-manage reload: a new epoch, every world reads again.
        ctx = context.RequestContext(user_id='admin', project_id='admin')
        assert changes.reload_everywhere(ctx)
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
        second = _process(engine)
        assert full_reads == [first, second]
        assert _vcpu(second, a) == (4, 1)
        # Cut short, or not a snapshot: read again and written whole.
        with open(path, 'rb') as f:
            data = f.read()
        for broken in (data[:len(data) // 2], b'garbage' * 100):
            with open(path, 'wb') as f:
                f.write(broken)
            third = _process(engine)
            assert full_reads[-1] is third
            assert _vcpu(third, a) == (4, 1)
            assert node_file.open_file(path) is not None


def test_small_worlds_are_not_written(shared, monkeypatch, full_reads):
    monkeypatch.setattr(world_settings, 'SHARE_FROM', 3)
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app)
        first = _process(engine)
        assert _files(shared) == [] and first.base.path is None
        for i in range(3):
            cloud.provider('p%d' % i)
        second = _process(engine)
        assert len(_files(shared)) == 1 and second.base.path


def test_a_directory_it_cannot_write_leaves_a_copy_per_process(
        shared, monkeypatch, full_reads, caplog):
    """No room or no right in world_dir: each process reads its own copy
    (warned once), and answers as ever."""
    blocked = shared / 'a-file'
    blocked.write_text('')
    monkeypatch.setattr(world_settings, 'SHARED_DIR', str(blocked / 'worlds'))
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app)
        first = _process(engine)
        second = _process(engine)
        assert full_reads == [first, second]
        assert first.base.path is None and _vcpu(second, a) == (4, 0)
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
        assert tcw._providers(app, 'resources=VCPU:3') == [a]
        assert tcw._providers(app, 'resources=VCPU:4') == []
    warnings = [r for r in caplog.records
                if 'cannot share the world' in r.getMessage()]
    assert len(warnings) == 1


def test_many_new_usages_of_few_providers_make_a_new_file(shared,
                                                          full_reads):
    """Each new usage of a provider is a new kind this process keeps:
    those count toward a new snapshot too, so a process's own share
    stays small however often the same providers are written."""
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=16)
        first = _process(engine)
        for used in range(1, 6):
            cloud.allocate(str(uuidlib.uuid4()), a, VCPU=1)
            _refresh(first, engine)
            assert _vcpu(first, a) == (16, used)
            assert len(first.changed) <= 1
            _renewed(first)
        assert len(full_reads) == 2 and full_reads[0] is first
        assert len(first.kinds) - len(first.base.kinds) <= 3


@pytest.fixture
def answered(monkeypatch):
    """Which engine answered each candidates request ('world', 'sql'),
    first reads of 5 providers or more run apart."""
    from placement.objects.candidates import search
    from placement.objects.candidates import sql
    monkeypatch.setattr(world_settings, 'READ_APART_FROM', 5)
    engines = []
    for module, name, label in ((search, 'find_in_world', 'world'),
                                (sql, 'find_in_database', 'sql')):
        def counting(*args, _real=getattr(module, name), _label=label,
                     **kwargs):
            engines.append(_label)
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, name, counting)
    return engines


def _six_hosts():
    """(world, path): six hosts of 8 VCPU, and a request they answer."""
    world = cw.WorldBuilder()
    for i in range(6):
        world.provider('cn%d' % i)
        world.inventory('cn%d' % i, 'VCPU', 8)
    return world, '/allocation_candidates?resources=VCPU:1&limit=4'


def test_a_large_first_read_runs_apart_and_the_database_answers_meanwhile(
        monkeypatch, caplog, answered):
    """A node with no snapshot file reads a large world from a database
    server in a thread of its own; until it is done (or after it failed)
    the SQL engine answers; the requests of the process reading it wait
    for the read a little first (READ_WAITS); then the world answers."""
    release = threading.Event()
    reading = threading.Event()
    failures = []
    real_bytes = world_mod.World._read_snapshot

    def held_bytes(self, conn, epoch, current):
        assert self.reading
        reading.set()
        assert release.wait(30)
        if failures:
            raise RuntimeError(failures.pop())
        return real_bytes(self, conn, epoch, current)

    monkeypatch.setattr(world_mod.World, '_read_snapshot', held_bytes)

    def loader():
        return [t for t in threading.enumerate()
                if t.name == 'placement-world-load']

    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        if engine.dialect.name == 'sqlite':
            # Embedded: read at once, as a small world is.
            release.set()
            assert tcw.twr.get(app, path, tcw.LATEST)[0] == 200
            assert answered == ['world'] and not loader()
            return
        first = tcw.twr.get(app, path, tcw.LATEST)
        assert answered == ['sql'] and first[0] == 200
        assert len(loader()) == 1 and reading.wait(30)
        # While this process reads the world, a request waits for it
        # READ_WAITS seconds at most; then the database answers it.
        monkeypatch.setattr(world_settings, 'READ_WAITS', 1.0)
        waiting = _request_in_thread(app, path, answered)
        waiting.join(0.3)
        assert waiting.is_alive() and answered == ['sql']
        waiting.join(30)
        assert not waiting.is_alive() and answered[1:] == ['sql', first]
        # The read fails: logged, and the next request starts another
        # read, the database answering it.
        failures.append('the database went away')
        release.set()
        loader()[0].join(30)
        assert 'reading the world failed' in caplog.text
        release.clear()
        reading.clear()
        assert tcw.twr.get(app, path, tcw.LATEST) == first
        assert answered[-1] == 'sql' and len(loader()) == 1
        # A read done within READ_WAITS: the waiting request has the
        # world's answer.
        assert reading.wait(30)
        monkeypatch.setattr(world_settings, 'READ_WAITS', 30)
        del answered[:]
        waiting = _request_in_thread(app, path, answered)
        waiting.join(0.3)
        assert waiting.is_alive() and not answered
        release.set()
        waiting.join(30)
        assert answered == ['world', first]
        for thread in loader():
            thread.join(30)
        assert tcw.twr.get(app, path, tcw.LATEST) == first
        assert answered[-1] == 'world'
        assert not loader()


def _request_in_thread(app, path, answered):
    """The candidates request ``path`` in a thread of its own, appending
    its answer to ``answered``."""
    thread = threading.Thread(target=lambda: answered.append(
        tcw.twr.get(app, path, tcw.LATEST)))
    thread.start()
    return thread


@pytest.mark.parametrize('stale', ['new epoch', 'far behind'])
def test_a_node_file_too_old_to_catch_up_from_is_read_apart(
        shared, full_reads, answered, stale):
    """A restarted node whose file is of another epoch, or further
    behind than a catch-up covers, reads the world as a node with no
    file does: apart, the database answering meanwhile (not in the
    request: 15 s at a million providers)."""
    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        first = _process(engine)                # writes the node's file
        assert _files(shared) and full_reads == [first]
        cloud = tcw._Cloud(app)
        if stale == 'new epoch':
            ctx = context.RequestContext(user_id='admin', project_id='admin')
            assert changes.reload_everywhere(ctx)
        else:
            # Past twice OVERLAY (3): no catch-up.
            for i in range(7):
                cloud.inventory(first.rps[first.roots[i % 6]].uuid,
                                VCPU=9 + i)
        got = tcw.twr.get(app, path, tcw.LATEST)
        if engine.dialect.name == 'sqlite':
            assert answered == ['world']
            return
        assert answered == ['sql']
        for t in threading.enumerate():
            if t.name == 'placement-world-load':
                t.join(30)
        assert tcw.twr.get(app, path, tcw.LATEST) == got
        assert answered == ['sql', 'world'] and len(full_reads) == 2


@pytest.mark.parametrize('changes_since, randomize', [
    (1, False), (2, False), (2, True)])
def test_a_long_catch_up_from_the_node_file_runs_apart(
        shared, full_reads, answered, monkeypatch, changes_since,
        randomize):
    """A restarted node whose file is behind by CATCH_UP_APART_FROM
    changes or more (2 here), though no further than a catch-up covers,
    catches up in a thread: the database answers its first request, then
    the world does, made from the file and the changes (no full read).
    Behind by fewer, or with candidates randomized (the SQL engine's
    sample reads every tree), it catches up in the request."""
    monkeypatch.setattr(world_settings, 'CATCH_UP_APART_FROM', 2)
    world, path = _six_hosts()
    overrides = {('placement', 'randomize_allocation_candidates'):
                 randomize}
    with gabbits.app_and_engine_over_world(world, overrides) as (app,
                                                                  engine):
        first = _process(engine)                # writes the node's file
        assert _files(shared) and full_reads == [first]
        cloud = tcw._Cloud(app)
        for i in range(changes_since):
            cloud.inventory(first.rps[first.roots[i]].uuid, VCPU=9 + i)
        got = tcw.twr.get(app, path, tcw.LATEST)
        assert got[0] == 200
        if engine.dialect.name == 'sqlite' or changes_since < 2 or \
                randomize:
            assert answered == ['world']
        else:
            assert answered == ['sql']
            for t in threading.enumerate():
                if t.name == 'placement-world-load':
                    t.join(30)
            assert tcw.twr.get(app, path, tcw.LATEST) == got
            assert answered == ['sql', 'world']
        assert full_reads == [first]


def test_a_large_first_read_waits_for_the_answer_of_the_request_that_began_it(
        monkeypatch):
    """The request that starts a large first read is answered from the
    database before the read begins: sharing the interpreter with the
    read, a cold node's first answer took three times as long."""
    from placement.objects.candidates import sql
    monkeypatch.setattr(world_settings, 'READ_APART_FROM', 5)
    reading = threading.Event()
    real_bytes = world_mod.World._read_snapshot

    def noted_bytes(self, conn, epoch, current):
        reading.set()
        return real_bytes(self, conn, epoch, current)

    monkeypatch.setattr(world_mod.World, '_read_snapshot', noted_bytes)
    read_during_answer = []
    real_find = sql.find_in_database

    def slow_find(*args, **kwargs):
        # Long enough for a read started alongside to have begun.
        read_during_answer.append(reading.wait(0.5))
        return real_find(*args, **kwargs)

    monkeypatch.setattr(sql, 'find_in_database', slow_find)
    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        first = tcw.twr.get(app, path, tcw.LATEST)
        if engine.dialect.name == 'sqlite':
            # Embedded: read at once, in the request.
            assert read_during_answer == [] and reading.is_set()
            return
        assert first[0] == 200 and read_during_answer == [False]
        assert reading.wait(30)
        for t in threading.enumerate():
            if t.name == 'placement-world-load':
                t.join(30)
        assert tcw.twr.get(app, path, tcw.LATEST) == first
        assert read_during_answer == [False]


def test_while_a_first_read_runs_the_database_answers_few_at_a_time(
        monkeypatch, shared, answered):
    """While a world is first read apart, the requests the SQL engine
    answers take turns, DATABASE_LANES at a time on the node (lock files
    beside the node's file): a request waiting its turn when the read
    ends is answered by the world instead."""
    from placement.objects.candidates import sql
    release = threading.Event()
    reading = threading.Event()
    real_bytes = world_mod.World._read_snapshot

    def held_bytes(self, conn, epoch, current):
        reading.set()
        assert release.wait(30)
        return real_bytes(self, conn, epoch, current)

    monkeypatch.setattr(world_mod.World, '_read_snapshot', held_bytes)
    monkeypatch.setattr(world_settings, 'READ_WAITS', 0.05)
    monkeypatch.setattr(world_settings, 'DATABASE_LANES', 2)
    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        if engine.dialect.name == 'sqlite':
            # Embedded: read at once, in the request; no turns.
            release.set()
            assert tcw.twr.get(app, path, tcw.LATEST)[0] == 200
            assert answered == ['world']
            return
        first = tcw.twr.get(app, path, tcw.LATEST)
        assert answered == ['sql'] and reading.wait(30)
        # The next answer from the database is held while it has its turn.
        gate = threading.Event()
        inside = []
        counted_find = sql.find_in_database

        def gated_find(*args, **kwargs):
            inside.append(1)
            try:
                assert gate.wait(30)
                return counted_find(*args, **kwargs)
            finally:
                inside.pop()

        monkeypatch.setattr(sql, 'find_in_database', gated_find)
        got = []
        holders = []
        for lanes in (1, 2):
            holders.append(_request_in_thread(app, path, got))
            deadline = time.monotonic() + 10
            while len(inside) < lanes and time.monotonic() < deadline:
                time.sleep(0.01)
            assert inside == [1] * lanes
        waiter = _request_in_thread(app, path, got)
        waiter.join(0.5)
        # Waiting its turn, not answering beside the two.
        assert waiter.is_alive() and inside == [1, 1] and not got
        # The read ends: the waiting request is the world's.
        release.set()
        waiter.join(30)
        assert not waiter.is_alive() and got == [first]
        assert answered[-1] == 'world' and inside == [1, 1]
        gate.set()
        for holder in holders:
            holder.join(30)
        assert got == [first, first, first]
        assert answered == ['sql', 'world', 'sql', 'sql']
        assert os.path.exists(node_file.path_for(str(shared), engine) +
                              '.turn0.lock')


@pytest.fixture
def copied(monkeypatch):
    """How many trees each answer of the world gave rendered already."""
    counts = []
    real = world_mod.World.answer

    def answer(self, cands, rendered_as=None):
        providers = real(self, cands, rendered_as)
        roots = {providers[rp].root_id
                 for rp in model.allocated_providers(cands)}
        counts.append(len(roots) - len(providers.trees))
        return providers

    monkeypatch.setattr(world_mod.World, 'answer', answer)
    return counts


def _alike_sql(monkeypatch, app, query, version):
    """The world's answer, checked against the SQL engine's."""
    path = '/allocation_candidates?' + query
    got = twr.get(app, path, version)
    assert got == tcw._sql(monkeypatch, app, path, version)
    return got[1]


def test_trees_come_rendered_from_the_file_until_they_change(
        shared, monkeypatch, copied):
    """The file ends with every tree's summaries as the microversions
    from 1.29 show them, rendered by the process that wrote it; an answer
    copies those of the trees unchanged since, and renders the others: a
    tree written since shows what it is now."""
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=8)
        b = cloud.provider('b', parent=a)
        cloud.inventory(b, VCPU=4)
        cloud.traits(b, 'CUSTOM_GPU')
        c = cloud.provider('c')
        cloud.inventory(c, VCPU=8)
        query = 'resources=VCPU:1'
        body = _alike_sql(monkeypatch, app, query, '1.39')
        assert copied[-1] == 2 and len(body['provider_summaries']) == 3
        with engine.connect() as conn:
            first = world_mod.for_connection(conn)
        assert first.base.rendered_key is not None
        ino = first.base.ino
        # c written since the file: rendered by the process, as it is now.
        cloud.allocate(str(uuidlib.uuid4()), c, VCPU=3)
        body = _alike_sql(monkeypatch, app, query, '1.39')
        assert first.base.ino == ino and copied[-1] == 1
        assert body['provider_summaries'][c]['resources']['VCPU'][
            'used'] == 3
        # Other microversions render their own.
        for version in ('1.28', '1.17', '1.10'):
            _alike_sql(monkeypatch, app, query, version)
            assert copied[-1] == 0
        # A later process maps the file and copies from it too.
        second = _process(engine)
        assert second.base.ino == ino
        root = second.by_uuid[a]
        runs, missing = second.base.rendered([root])
        assert [first for first, _view in runs] == [root] and not missing


def test_a_rendering_that_fails_leaves_the_file_without_it(
        shared, monkeypatch, copied, caplog):
    """The rendered trees only spare the processes work: if rendering them
    fails, the file is written without them (logged) and every answer is
    rendered by the process, as right as ever."""
    def broken(trees):
        yield b''
        raise RuntimeError('a bug')

    key, _render = world_settings.RENDERER
    monkeypatch.setattr(world_settings, 'RENDERER', (key, broken))
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=8)
        _alike_sql(monkeypatch, app, 'resources=VCPU:1', '1.39')
        assert copied[-1] == 0
        with engine.connect() as conn:
            first = world_mod.for_connection(conn)
        assert first.base.path and first.base.rendered_key is None
    assert any('rendering the trees' in r.getMessage()
               for r in caplog.records)


def _damaged(path, how, uuid):
    """Damage the node's file in place, as an outside hand may."""
    with open(path, 'r+b') as f:
        data = f.read()
        if how == 'a uuid in its column changed':
            # The first copy of ``uuid`` is the column's (the rendered
            # trees come after): another valid uuid, a wrong answer.
            at = data.index(uuid.encode())
            f.seek(at)
            f.write(b'0' if data[at:at + 1] != b'0' else b'1')
        elif how == 'its last byte cut':
            f.truncate(len(data) - 1)
        else:
            f.truncate(len(data) // 2)


@pytest.mark.parametrize('how', ['a uuid in its column changed',
                                 'its last byte cut', 'cut in half'])
def test_a_damaged_node_file_is_logged_ignored_and_written_again(
        shared, full_reads, caplog, how):
    """Before a process maps the file it checks its size and checksum:
    a damaged one gives no answer; it is logged once per process, and the
    world is read from the database and written to the file again."""
    with _app_and_engine() as (app, engine):
        _cloud, a = _cloud_of_one(app)
        path = _process(engine).base.path
        _damaged(path, how, a)
        later = _process(engine)
        assert full_reads[-1] is later and len(full_reads) == 2
        assert a in later.by_uuid and _vcpu(later, a) == (4, 0)
        assert later.base.path == path and later.base.intact()
        assert node_file.open_file(path).n == 1
    warnings = [r for r in caplog.records if r.levelname == 'WARNING'
                and path in r.getMessage() and 'damaged' in r.getMessage()]
    assert len(warnings) == 1



def test_a_process_starting_from_the_file_sums_it_once(shared,
                                                       monkeypatch):
    """Whether its first load is long (on a database server) opens the
    file, and the load itself maps it: the checksum, the bulk of an open
    (a tenth of a second at a million providers), once."""
    sums = []
    real = node_file._unsealed
    monkeypatch.setattr(node_file, '_unsealed',
                        lambda buf: sums.append(len(buf)) or real(buf))
    with _app_and_engine() as (app, engine):
        _cloud, a = _cloud_of_one(app)
        _process(engine)
        del sums[:]
        later = world_mod.World()
        with engine.connect() as conn:
            assert not later.first_load_is_long(conn)
        _refresh(later, engine)
        assert len(sums) == 1 and later.base.path and a in later.by_uuid


def _hosts(count):
    world = cw.WorldBuilder()
    for i in range(count):
        world.provider('cn%d' % i)
        world.inventory('cn%d' % i, 'VCPU', 8)
    return world


def test_a_node_file_truncated_under_a_worker_is_left_unread(shared, caplog):
    """The file cut in place to 4,096 bytes while a worker maps it (an
    outside hand: the writer renames a new file, never changes one):
    reading a page past its new end would kill the worker (SIGBUS). Its
    next request sees that the mapped file's size moved, leaves the
    mapping untouched and reads the world again: the client is answered.
    A forked child plays the worker, so that this test run survives it."""
    with gabbits.app_and_engine_over_world(_hosts(60)) as (app, engine):
        query = 'resources=VCPU:1'
        everyone = tcw._providers(app, query)
        assert len(everyone) == 60
        path = node_file.path_for(str(shared), engine)
        assert os.path.getsize(path) > 4 * mmap.PAGESIZE
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                engine.dispose(close=False)
                os.truncate(path, 4096)
                code = 0 if tcw._providers(app, query) == everyone else 4
            finally:
                os._exit(code)
        _pid, status = os.waitpid(pid, 0)
        # -7: killed by SIGBUS.
        assert os.waitstatus_to_exitcode(status) == 0
        # The child wrote the file again; this process, which maps the
        # one cut too, moves to the new one as well (not reading it).
        assert node_file.open_file(path).n == 60
        assert tcw._providers(app, query) == everyone
        with engine.connect() as conn:
            assert world_mod.for_connection(conn).base.intact()
    assert any(r.levelname == 'WARNING' and path in r.getMessage()
               for r in caplog.records)

# The node's file written by a process of its own (world/apart.py): a
# worker that would read a whole large world, or renew the node's file,
# has a process started at a lower priority do it and takes the file up
# when it is done, answering meanwhile as above. Where no process can be
# started, or it fails, the worker writes the file in its thread. (The
# other tests here have it written in their thread, where their patches
# of the reads apply: tests/conftest.py.)


@pytest.fixture
def in_a_process(monkeypatch, shared):
    monkeypatch.setattr(world_settings, 'WRITE_IN_A_PROCESS_FROM', 0)
    return shared


def _loads():
    return [t for t in threading.enumerate()
            if t.name in ('placement-world-load', 'placement-world-renew')]


def _written_by(caplog):
    """The processes that wrote a node file, as their log lines say."""
    return [int(r.getMessage().split()[3]) for r in caplog.records
            if r.getMessage().startswith('Allocation candidates: process ')]


def test_a_large_first_read_is_written_by_a_process_of_its_own(
        in_a_process, full_reads, answered, caplog):
    caplog.set_level('INFO')
    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        first = tcw.twr.get(app, path, tcw.LATEST)
        assert first[0] == 200
        if engine.dialect.name == 'sqlite':
            assert answered == ['world'] and not _written_by(caplog)
            return
        assert answered == ['sql']
        for thread in _loads():
            thread.join(60)
        # The file is the other process's; this one mapped it and read
        # no provider itself.
        writers = _written_by(caplog)
        assert len(writers) == 1 and writers[0] != os.getpid()
        assert len(_files(in_a_process)) == 1 and not full_reads
        assert tcw.twr.get(app, path, tcw.LATEST) == first
        assert answered == ['sql', 'world']


def test_a_node_file_being_written_is_waited_for_not_written_again(
        in_a_process, monkeypatch):
    """A worker due to have the node's file written waits for the file's
    lock in its own thread: when another process of the node wrote the
    file meanwhile, it starts no process of its own. The process it
    starts holds the lock with it (given the lock's descriptor)."""
    world, _path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        if engine.dialect.name == 'sqlite':
            with engine.connect() as conn:
                assert not world_mod.World().first_load_is_long(conn)
            return
        started = []
        real_popen = apart.subprocess.Popen

        def popen(*args, **kwargs):
            started.append(kwargs.get('pass_fds'))
            return real_popen(*args, **kwargs)

        monkeypatch.setattr(apart.subprocess, 'Popen', popen)
        path = node_file.path_for(str(in_a_process), engine)
        done = []

        def write(ino):
            done.append(apart.write_in_a_process(path, ino, engine, None,
                                                 10))

        with node_file.locked(path):
            waiting = threading.Thread(target=write, args=(None,))
            waiting.start()
            waiting.join(0.5)
            assert waiting.is_alive() and not started
            # Another process of the node writes the file meanwhile.
            with open(path, 'wb') as f:
                f.write(b'written by another process')
        waiting.join(30)
        assert done == [True] and not started
        # Due again from that file: its process writes it, under the lock
        # it was given (it would wait for it forever otherwise).
        writer = threading.Thread(target=write,
                                  args=(node_file.inode(path),))
        writer.start()
        writer.join(60)
        assert not writer.is_alive() and done == [True, True]
        assert len(started) == 1 and len(started[0]) == 1
        assert node_file.open_file(path) is not None


def test_a_renewal_is_written_by_a_process_of_its_own(
        in_a_process, full_reads, caplog):
    caplog.set_level('INFO')
    with _app_and_engine() as (app, engine):
        cloud, a = _cloud_of_one(app, vcpu=8)
        first = _process(engine)
        old = first.base.ino
        more = []
        while first._renewal is None and len(full_reads) == 1:
            assert len(more) < 10
            more.append(cloud.provider('p%d' % len(more)))
            _refresh(first, engine)
        if not _renews_apart(engine):
            assert full_reads == [first, first] and not _written_by(caplog)
            return
        _renewed(first)
        # Written by the other process: no second read in this one.
        assert full_reads == [first]
        assert _written_by(caplog)[0] != os.getpid()
        cloud.allocate(str(uuidlib.uuid4()), a, VCPU=2)
        _refresh(first, engine)
        assert first.base.ino != old and full_reads == [first]
        assert _vcpu(first, a) == (8, 2) and all(
            p in first.by_uuid for p in more)


@pytest.mark.parametrize('python', ['/nonexistent/python3', '/bin/false'])
def test_where_no_process_can_write_the_worker_reads_itself(
        in_a_process, full_reads, answered, caplog, monkeypatch, python):
    """An interpreter that cannot be started, or a process that fails:
    logged, and the worker reads the world in its thread."""
    monkeypatch.setattr(apart, 'interpreter', lambda: python)
    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        first = tcw.twr.get(app, path, tcw.LATEST)
        if engine.dialect.name == 'sqlite':
            assert answered == ['world']
            return
        for thread in _loads():
            thread.join(60)
        assert 'this one reads the world' in caplog.text
        assert len(full_reads) == 1
        assert tcw.twr.get(app, path, tcw.LATEST) == first
        assert answered == ['sql', 'world']


def test_a_world_under_the_threshold_is_written_by_the_worker_itself(
        in_a_process, full_reads, answered, caplog, monkeypatch):
    """Starting a process costs about a second of CPU: a world of fewer
    providers than WRITE_IN_A_PROCESS_FROM is read in the worker's
    thread."""
    caplog.set_level('INFO')
    monkeypatch.setattr(world_settings, 'WRITE_IN_A_PROCESS_FROM', 7)
    world, path = _six_hosts()
    with gabbits.app_and_engine_over_world(world) as (app, engine):
        first = tcw.twr.get(app, path, tcw.LATEST)
        for thread in _loads():
            thread.join(60)
        assert not _written_by(caplog)
        assert len(full_reads) == 1 and len(_files(in_a_process)) == 1
        assert tcw.twr.get(app, path, tcw.LATEST) == first
        assert answered[-1] == 'world'
