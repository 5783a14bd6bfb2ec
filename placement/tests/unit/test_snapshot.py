"""The columns of a world snapshot (candidates/snapshot.py): what each
lookup answers for a small world, read back from the bytes and from a
mapped file."""
import os

import pytest
import sqlalchemy

from placement.objects.candidates import node_file
from placement.objects.candidates import snapshot

U = '%08d-abcd-0000-0000-000000000000'

# Two trees (1 with children 2 and 5; 3 alone), 4 a provider written
# before nested providers (no root), ids with a gap.
PROVIDERS = [(1, U % 1, None, 1), (2, U % 2, 1, 1), (3, U % 3, None, 3),
             (5, (U % 5).upper(), 1, 1), (4, U % 4, None, None)]
INVENTORIES = [(2, 0, 8, 0, 16.0, 1, 8, 1), (1, 2, 100, 0, 1.0, 1, 100, 1),
               (3, 0, 8, 0, 16.0, 1, 8, 1), (5, 0, 8, 0, 16.0, 1, 8, 1)]
USAGE = [(3, 0, 2), (5, 0, 0)]
TRAITS = [(2, 7), (2, 3), (3, 3)]
AGGS = [(1, 11), (3, 11), (3, 12)]


def _snapshots(tmp_path, rows=None):
    data = snapshot.build(*(rows or (PROVIDERS, INVENTORIES, USAGE, TRAITS,
                                     AGGS)), 42, {0: 9})
    path = str(tmp_path / 'world')
    node_file.write_file(path, data)
    return [snapshot.Snapshot(data), node_file.open_file(path)]


def test_trees_are_runs_of_positions(tmp_path):
    for snap in _snapshots(tmp_path):
        assert (snap.epoch, snap.slots, snap.n, snap.children) == (
            42, {0: 9}, 5, 2)
        assert list(snap.troot) == [1, 3, 4]
        start, end = snap.tree(1)
        assert list(snap.ids[start:end]) == [1, 2, 5]
        assert [snap.parent[p] for p in range(start, end)] == [0, 1, 1]
        assert snap.tree(4) != (0, 0) and snap.tree(2) == (0, 0)
        assert snap.tree(None) == (0, 0)


def test_alike_providers_share_one_kind(tmp_path):
    for snap in _snapshots(tmp_path):
        def kind(rid):
            return snap.kinds[snap.kind[snap.pos_of(rid)]]
        # 2 and 5: the same inventory (2's traits differ); 3 has usage.
        assert kind(2)[0] == kind(5)[0] == ((0, 8, 0, 16.0, 1, 8, 1, 0),)
        assert kind(3)[0] == ((0, 8, 0, 16.0, 1, 8, 1, 2),)
        assert kind(2)[1] == (3, 7) and kind(5) != kind(2)
        assert kind(4) == snapshot.NO_KIND
        assert len(snap.kinds) == 5


def test_each_provider_names_its_set_of_classes(tmp_path):
    for snap in _snapshots(tmp_path):
        def classes(rid):
            i = snap.cls[snap.pos_of(rid)]
            return snap.class_sets[i]
        assert classes(2) == classes(3) == classes(5) == frozenset([0])
        assert classes(1) == frozenset([2]) and classes(4) == frozenset()
    # Past 255 sets the column says "see the kind".
    rows = [(i, U % i, None, i) for i in range(1, 301)]
    invs = [(i, i, 8, 0, 1.0, 1, 8, 1) for i in range(1, 301)]
    snap = _snapshots(tmp_path, (rows, invs, [], [], []))[1]
    assert len(snap.class_sets) == snapshot.MANY_CLASS_SETS
    assert [snap.cls[snap.pos_of(i)] for i in (1, 255, 256, 300)] == [
        0, 254, 255, 255]


def test_lookups(tmp_path):
    for snap in _snapshots(tmp_path):
        assert [snap.pos_of(i) is None for i in (0, 1, 4, 5, 6, None)] == [
            True, False, False, False, True, True]
        assert snap.uuid_at(snap.pos_of(5)) == (U % 5).upper()
        assert snap.ids_with_uuid(U % 5) == [(False, 5)]
        assert snap.ids_with_uuid((U % 5).upper()) == [(True, 5)]
        assert snap.ids_with_uuid(U % 9) == []
        assert list(snap.members('trait', 3)) == [2, 3]
        assert list(snap.members('agg', 11)) == [1, 3]
        assert list(snap.members('agg', 13)) == [] and \
            snap.members('trait', None) == ()


def test_sparse_ids_are_found_by_search(tmp_path):
    far = [(1, U % 1, None, 1), (10 ** 9, U % 2, None, 10 ** 9)]
    for snap in _snapshots(tmp_path, (far, [], [], [], [])):
        assert len(snap.posof) == 0
        assert snap.pos_of(10 ** 9) == 1 and snap.pos_of(2) is None


@pytest.mark.parametrize('cut', [0, 8, 100, -1])
def test_a_file_cut_short_is_refused(tmp_path, cut):
    data = snapshot.build(PROVIDERS, INVENTORIES, USAGE, TRAITS, AGGS, 1, {})
    path = str(tmp_path / 'world')
    with open(path, 'wb') as f:
        f.write(data[:cut])
    assert node_file.open_file(path) is None
    node_file.write_file(path, data)
    assert node_file.open_file(path).n == 5


def test_a_byte_changed_anywhere_or_a_cut_anywhere_is_refused(tmp_path,
                                                             caplog):
    """The seal (length and checksum) is checked before anything is
    read: every byte of the file counts, the seal's own included."""
    data = snapshot.build(PROVIDERS, INVENTORIES, USAGE, TRAITS, AGGS, 1, {})
    path = str(tmp_path / 'world')
    node_file.write_file(path, data, node_file.rendered_section(
        data, 'key', [b'tree 1', b'', b'tree 4']))
    with open(path, 'rb') as f:
        whole = f.read()
    # A byte in eight, and every byte of the seal (CI's time).
    places = sorted(set(range(0, len(whole), 8)) |
                    set(range(len(whole) - 24, len(whole))))
    for at in places:
        with open(path, 'r+b') as f:
            f.seek(at)
            f.write(bytes([whole[at] ^ 0x10]))
        assert node_file.open_file(path) is None, at
        with open(path, 'r+b') as f:
            f.seek(at)
            f.write(whole[at:at + 1])
        assert node_file.open_file(path).n == 5
    for cut in reversed(places):
        os.truncate(path, cut)
        assert node_file.open_file(path) is None, cut
    assert 'world is damaged (checksum differs)' in caplog.text.replace(
        path, 'world')


def test_a_mapped_file_changed_in_place_is_no_longer_intact(tmp_path):
    """What a process asks before each request, without reading the
    mapping: a newer file renamed over it (the writer's way) leaves its
    mapping intact; the file cut in place, or written in place (its
    modification time moves), does not."""
    data = snapshot.build(PROVIDERS, INVENTORIES, USAGE, TRAITS, AGGS, 1, {})
    path = str(tmp_path / 'world')
    assert snapshot.Snapshot(data).intact()
    node_file.write_file(path, data)
    mapped = node_file.open_file(path)
    node_file.write_file(path, data)
    assert mapped.intact() and node_file.open_file(path).ino != mapped.ino
    for change in ('cut', 'written'):
        snap = node_file.open_file(path)
        assert snap.intact()
        if change == 'cut':
            os.truncate(path, 100)
        else:
            stat = os.stat(path)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        assert not snap.intact()
        node_file.write_file(path, data)


def test_a_dead_writers_temporary_file_goes_with_the_next_write(tmp_path):
    """A process that ends while its thread writes the file leaves the
    temporary file (in /dev/shm: memory until a reboot); the next writer,
    holding the lock, removes it. Another database's are not its own."""
    data = snapshot.build(PROVIDERS, INVENTORIES, USAGE, TRAITS, AGGS, 1, {})
    path = str(tmp_path / 'world-a.plworld5')
    dead = tmp_path / '.world-a.plworld5.x1y2z3'
    other = tmp_path / '.world-b.plworld5.x1y2z3'
    for leftover in (dead, other):
        leftover.write_bytes(b'half a world')
    with node_file.locked(path):
        node_file.write_file(path, data)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        other.name, 'world-a.plworld5', 'world-a.plworld5.lock']
    assert node_file.open_file(path).n == 5


def test_uuids_sql_by_hand_may_write(tmp_path):
    # The column is a string: shorter, longer, non-ASCII or quoted
    # uuids come back exactly as written, and are found by uuid.
    odd = ['short', 'ünïcode-%030d' % 1, 'x' * 40, 'with"quote\\back']
    rows = [(i + 1, u, None, i + 1) for i, u in enumerate(odd)]
    rows.append((9, U % 9, None, 9))
    for snap in _snapshots(tmp_path, (rows, [], [], [], [])):
        for rid, u, _parent, _root in rows:
            pos = snap.pos_of(rid)
            assert snap.uuid_at(pos) == u
            assert snap.uuids_between(pos, pos + 1) == (u.encode(),)
            assert snap.ids_with_uuid(u) == [(True, rid)]
        assert snap.uuids_between(0, 5) == tuple(
            u.encode() for _, u, _p, _r in rows)
        assert not snap.canonical


def test_canonical_uuids(tmp_path):
    # Hex digits and dashes in either case: rendered without a check.
    # One character else (a quote 36 long) and the renderer checks.
    rows = [(1, U % 1, None, 1), (2, (U % 2).upper(), None, 2)]
    for snap in _snapshots(tmp_path, (rows, [], [], [], [])):
        assert snap.canonical
    rows.append((3, 'a"' + 'b' * 34, None, 3))
    for snap in _snapshots(tmp_path, (rows, [], [], [], [])):
        assert not snap.canonical


def test_tree_shapes(tmp_path):
    # Each tree's shape: its providers' parents as positions in its run,
    # and its root's; trees alike share one. A parent in another tree
    # (SQL by hand) leaves the tree without one (-1).
    rows = [(1, U % 1, None, 1), (2, U % 2, 1, 1), (3, U % 3, 2, 1),
            (4, U % 4, None, 4), (5, U % 5, 4, 4), (6, U % 6, 5, 4),
            (7, U % 7, None, 7), (8, U % 8, 2, 7)]
    for snap in _snapshots(tmp_path, (rows, [], [], [], [])):
        one, four = snap.tree_and_shape(1), snap.tree_and_shape(4)
        assert one[:2] == (0, 3) and four[:2] == (3, 6)
        assert one[2] == four[2]
        assert snap.shapes[one[2]] == ((None, 0, 1), 0)
        assert snap.tree_and_shape(7)[2] == -1
        assert snap.tree_and_shape(99) == (0, 0, -1)


def test_file_name_carries_the_format(tmp_path):
    # Two versions on one node (a rolling upgrade) keep a file each: a
    # process of one never maps, nor replaces, the other's.
    engine = sqlalchemy.create_engine('sqlite://')
    path = node_file.path_for(str(tmp_path), engine)
    assert path == node_file.path_for(str(tmp_path), engine)
    assert path.endswith('.' + snapshot.MAGIC.decode('ascii').lower())
    other = sqlalchemy.create_engine('sqlite:///other')
    assert node_file.path_for(str(tmp_path), other) != path


def test_writing_removes_older_formats_of_the_database(tmp_path):
    # What an older version left for the same database goes (it would
    # hold memory in /dev/shm until a reboot); a newer version's file,
    # lock files and other databases' files stay.
    engine = sqlalchemy.create_engine('sqlite://')
    path = node_file.path_for(str(tmp_path), engine)
    stem = os.path.basename(path).rpartition('.')[0]
    older = [stem, stem + '.plworld3']
    kept = [stem + '.plworld99', stem + '.plworld3.lock', stem + '.lock',
            'world-0123456789abcdef01234567.plworld3']
    for name in older + kept:
        (tmp_path / name).write_bytes(b'x')
    node_file.write_file(path, snapshot.build(
        PROVIDERS, INVENTORIES, USAGE, TRAITS, AGGS, 1, {}))
    assert sorted(os.listdir(tmp_path)) == sorted(
        kept + [os.path.basename(path)])


def _rendered_file(tmp_path, blobs):
    data = snapshot.build(PROVIDERS, INVENTORIES, USAGE, TRAITS, AGGS, 1, {})
    path = str(tmp_path / 'world')
    node_file.write_file(path, data, node_file.rendered_section(
        data, ('summaries', 7), iter(blobs)))
    return path, data


def _runs(found):
    runs, missing = found
    return [(first, bytes(view)) for first, view in runs], missing


def test_a_file_may_end_with_each_tree_rendered(tmp_path):
    # Trees 1, 3 and 4 (troot order); 3 not rendered (an empty one).
    path, data = _rendered_file(tmp_path, [b'"one":{},', b'', b'"four":{},'])
    snap = node_file.open_file(path)
    assert snap.rendered_key == ('summaries', 7)
    # Trees one after another in the file come as one run: tree 3 has
    # nothing between them. Roots not here, or not rendered, are missing.
    assert _runs(snap.rendered([0, 1, 2, 3, 4, 99])) == (
        [(1, b'"one":{},"four":{},')], [0, 2, 3, 99])
    assert _runs(snap.rendered([1, 3, 4])) == (
        [(1, b'"one":{},"four":{},')], [3])
    assert _runs(snap.rendered([4])) == ([(4, b'"four":{},')], [])
    assert _runs(snap.rendered([3])) == ([], [3])
    assert _runs(snap.rendered([])) == ([], [])
    # The snapshot itself reads as without them.
    assert snap.n == 5 and list(snap.troot) == [1, 3, 4]
    plain = snapshot.Snapshot(data)
    assert plain.rendered_key is None and plain.rendered([1]) == ([], [1])


def test_rendered_trees_apart_in_the_file_are_runs_apart(tmp_path):
    path, _data = _rendered_file(tmp_path, [b'1,', b'3,', b'4,'])
    snap = node_file.open_file(path)
    assert _runs(snap.rendered([1, 3, 4])) == ([(1, b'1,3,4,')], [])
    assert _runs(snap.rendered([1, 4])) == ([(1, b'1,'), (4, b'4,')], [])
    assert _runs(snap.rendered([3, 4, 7])) == ([(3, b'3,4,')], [7])


@pytest.mark.parametrize('cut', [1, 8, 40, 64])
def test_a_rendered_file_cut_short_is_refused(tmp_path, cut):
    path, _data = _rendered_file(tmp_path, [b'"one":{}', b'', b'"x"' * 9])
    with open(path, 'rb') as f:
        whole = f.read()
    with open(path, 'wb') as f:
        f.write(whole[:-cut])
    assert node_file.open_file(path) is None
