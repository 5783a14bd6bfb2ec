"""The world's providers in columns: one immutable copy a node's processes
share.

A ``Snapshot`` is every provider of one database at some change counters,
laid out as flat arrays in one buffer: positions ordered by (root, id), so
that each tree is a run of positions; a provider's inventories (with their
usage), traits and aggregates are one *kind*, stored once however many
providers have it (a cloud's providers are alike). Read in place -- from
a bytes object, or from a file mapped read-only -- nothing is copied into
Python objects but the kinds, so the processes of one API node that map
the same file hold one copy of the world between them (world/ keeps,
per process, only what changed since and the providers it has looked at
lately).

A snapshot may end with every tree's provider summaries, rendered once
for the node by the process that wrote it (node_file.rendered_section),
which the processes copy for the trees that did not change since. What
they are rendered as is the renderer's ``key``; the snapshot does not
read them. Where the file lives, how it is written, sealed and mapped:
node_file.py.
"""
import array
import bisect
import functools
import os
import pickle
import struct
import weakref

MAGIC = b'PLWORLD7'
# The end of a file with rendered trees: this, then three offsets.
RENDERED = b'PLRENDER'
TRAILER = struct.Struct('<8sQQQ')
_UUID = 36
# What a uuid the API wrote is made of (SQL by hand may write others).
_CANONICAL = b'0123456789abcdefABCDEF-'
# The columns, in the order they are laid out: name -> array typecode.
_COLUMNS = (('ids', 'q'), ('parent', 'q'), ('root', 'q'), ('kind', 'i'),
            ('troot', 'q'), ('tstart', 'q'), ('tshape', 'i'), ('byid', 'q'),
            ('byid_pos', 'i'), ('posof', 'i'), ('byuuid_pos', 'i'),
            ('trait_keys', 'q'), ('trait_start', 'q'), ('trait_ids', 'q'),
            ('trait_rstart', 'q'), ('trait_roots', 'q'),
            ('agg_keys', 'q'), ('agg_start', 'q'), ('agg_ids', 'q'),
            ('agg_rstart', 'q'), ('agg_roots', 'q'), ('cls', 'B'))
# Column cls: the index in ``class_sets`` of the classes a provider has
# inventory of; this for a provider whose set came after the first 255
# (its kind says).
MANY_CLASS_SETS = 255


class Snapshot:
    """Columns of one buffer (see the module). ``kinds`` is the list of
    distinct (inventories, trait ids, aggregate ids): inventories as
    sorted (class id, total, reserved, allocation_ratio, min_unit,
    max_unit, step_size, used) rows."""

    def __init__(self, buf, path=None, ino=None, length=None):
        self._buf = buf
        self.path = path
        self.ino = ino
        self._fd = self._stat = None
        mv = memoryview(buf)[:length]
        if bytes(mv[:8]) != MAGIC:
            raise ValueError('not a world snapshot')
        hlen, = struct.unpack_from('<Q', buf, 8)
        head = pickle.loads(mv[16:16 + hlen])
        if head['size'] != len(mv):
            if head['size'] > len(mv):
                raise ValueError('a snapshot cut short')
            self._rendered_from(mv, head['size'])
        else:
            self.rendered_key = None
        self.epoch = head['epoch']
        self.slots = head['slots']
        self.n = head['n']
        self.children = head['children']
        self.kinds = head['kinds']
        for name, (code, off, count) in head['cols'].items():
            size = array.array(code).itemsize
            setattr(self, name, mv[off:off + count * size].cast(code))
        self.id_lo = head['id_lo']
        self._uuid_off = head['uuid_off']
        self.uuids = mv[self._uuid_off:self._uuid_off + self.n * _UUID]
        # position -> uuid, for the uuids not 36 ASCII characters (SQL
        # by hand can write any string there): not in the column.
        self.odd_uuids = head['odd_uuids']
        # Every uuid is hex digits and dashes (JSON takes them as they are).
        self.canonical = head['canonical']
        # Tree shapes: (parent per provider, as an index into the tree's
        # run, None for none; the root's index), for column tshape.
        self.shapes = head['shapes']
        # Column cls's sets of class ids (frozensets), by index.
        self.class_sets = head['class_sets']

    def watch(self, fd, stat):
        """Keep ``fd``, the mapped file's (closed with the snapshot), to
        tell by ``intact`` whether it changed since ``stat``."""
        self._fd, self._stat = fd, (stat.st_size, stat.st_mtime_ns)
        weakref.finalize(self, os.close, fd)

    def intact(self):
        """Whether the mapped file is as it was when checked (its size and
        modification time; True for a snapshot in memory). The writer
        never changes a file it renamed into place, so a change is an
        outside hand's: a file cut short kills with SIGBUS the process
        that touches a page past its end (CPython cannot catch it), so
        the caller asks before each request and leaves the mapping
        unread when not. A cut between this and the read still kills;
        this narrows it to a request's time."""
        if self._fd is None:
            return True
        try:
            stat = os.fstat(self._fd)
        except OSError:
            # Its descriptor closed by another hand: not known, so not.
            return False
        return (stat.st_size, stat.st_mtime_ns) == self._stat

    def _rendered_from(self, mv, size):
        """Read the rendered section after the snapshot's ``size`` bytes
        (see rendered_section)."""
        if len(mv) - size < TRAILER.size:
            raise ValueError('a snapshot cut short')
        magic, blobs, offs, key = TRAILER.unpack_from(
            mv, len(mv) - TRAILER.size)
        if magic != RENDERED:
            raise ValueError('a snapshot cut short')
        self.rendered_key = pickle.loads(mv[key:len(mv) - TRAILER.size])
        self._blobs = mv[blobs:offs]
        self._blob_ends = mv[offs:key].cast('q')

    # -- lookups -----------------------------------------------------------

    def rendered(self, roots):
        """(runs, missing) for ``roots`` (ascending ids): ``runs``, a list
        of (first root, memoryview of the buffer): the renderings of trees
        one after another in the file, one view for each run of them (a
        walk's thousand trees are one); ``missing``, the roots with none
        (not here, or not rendered: see rendered_section).
        The renderer makes its renderings such that trees one after
        another make one (see the handler's _render_whole_trees)."""
        if self.rendered_key is None or not roots:
            return [], list(roots)
        at = list(map(self.tree_at.get, roots))
        if None not in at and at[-1] - at[0] == len(at) - 1:
            # Trees one after another: one run, unless some are missing.
            ends = self._blob_ends[at[0]:at[-1] + 2].tolist()
            if all(map(int.__ne__, ends, ends[1:])):
                return [(roots[0], self._blobs[ends[0]:ends[-1]])], []
        return self._runs(roots, at)

    def _runs(self, roots, at):
        """rendered() of ``roots`` at tree indices ``at`` (None: not
        here), a tree at a time."""
        ends, blobs = self._blob_ends, self._blobs
        runs, missing = [], []
        first = start = end = None
        for root, i in zip(roots, at):
            if i is not None:
                lo, hi = ends[i], ends[i + 1]
                if lo != hi:
                    if lo != end:
                        if first is not None:
                            runs.append((first, blobs[start:end]))
                        first, start = root, lo
                    end = hi
                    continue
            missing.append(root)
        if first is not None:
            runs.append((first, blobs[start:end]))
        return runs, missing

    def uuid_at(self, pos):
        if self.odd_uuids and pos in self.odd_uuids:
            return self.odd_uuids[pos]
        off = self._uuid_off + pos * _UUID
        return self._buf[off:off + _UUID].decode('ascii')

    def uuids_between(self, start, end):
        """The uuids at positions ``start`` to ``end`` (a tree's),
        encoded (UTF-8; the column's are ASCII)."""
        out = _uuids_struct(end - start).unpack_from(
            self._buf, self._uuid_off + start * _UUID)
        odd = self.odd_uuids
        if odd and any(pos in odd for pos in range(start, end)):
            out = tuple(odd[pos].encode() if pos in odd else u
                        for pos, u in zip(range(start, end), out))
        return out

    @functools.cached_property
    def tree_at(self):
        """{root: index in troot}, made on first use: how a tree is found
        (a random sample's scattered roots, without a search each)."""
        return dict(zip(self.troot.tolist(), range(len(self.troot))))

    def pos_of(self, rid):
        """Position of provider ``rid``; None if it is not here."""
        if type(rid) is not int:
            return None
        posof = self.posof
        if posof:
            # Ids are mostly dense: a position per id from the lowest.
            i = rid - self.id_lo
            if 0 <= i < len(posof):
                pos = posof[i]
                return pos if pos >= 0 else None
            return None
        i = bisect.bisect_left(self.byid, rid)
        if i < self.n and self.byid[i] == rid:
            return self.byid_pos[i]
        return None

    def tree(self, root):
        """(start, end) positions of the tree under ``root``; (0, 0) if
        there is none."""
        return self.tree_and_shape(root)[:2]

    def tree_and_shape(self, root):
        """(start, end, shape): tree(), and the index of its shape in
        ``shapes`` (-1: a parent or the root is in another run)."""
        i = self.tree_at.get(root) if type(root) is int else None
        if i is None:
            return 0, 0, -1
        return self.tstart[i], self.tstart[i + 1], self.tshape[i]

    def ids_with_uuid(self, uuid):
        """(exact, id) of the providers whose uuid is ``uuid`` in any
        case, exact matches first."""
        wanted = uuid.lower()
        order = self.byuuid_pos

        def key(i):
            return self.uuid_at(order[i]).lower()

        i = bisect.bisect_left(range(self.n), wanted, key=key)
        out = []
        while i < self.n and key(i) == wanted:
            pos = order[i]
            out.append((self.uuid_at(pos) == uuid, self.ids[pos]))
            i += 1
        return sorted(out, reverse=True)

    def members(self, of, key, what='ids'):
        """Ids of the providers with trait (``of`` 'trait') or aggregate
        (``of`` 'agg') ``key``; with ``what`` 'roots', the roots of the
        trees with such a provider."""
        if type(key) is not int:
            return ()
        keys = getattr(self, of + '_keys')
        i = bisect.bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            start = getattr(self, of + ('_start' if what == 'ids'
                                        else '_rstart'))
            return getattr(self, of + '_' + what)[start[i]:start[i + 1]]
        return ()


NO_KIND = ((), (), ())


@functools.lru_cache(maxsize=256)
def _uuids_struct(count):
    return struct.Struct('%ds' % _UUID * count)


def canonical(uuid):
    """Whether ``uuid`` (encoded) is a uuid's length of hex digits and
    dashes only, as a snapshot says of all of its own (``canonical``):
    rendered as it is, no quoting check."""
    return len(uuid) == _UUID and not uuid.translate(None, _CANONICAL)


def root_or_self(rid, root):
    """A provider's root: a provider written before nested providers, not
    migrated yet, has none and is its own."""
    return root if root is not None else rid


def _grouped(rows, whole=True):
    """{provider id: tuple of the rest of its rows (``whole``; else of
    their second values), sorted}, of rows (provider id, ...)."""
    out = {}
    get = out.get
    for row in sorted(rows):
        rid = row[0]
        rest = row[1:] if whole else row[1]
        have = get(rid)
        out[rid] = (rest,) if have is None else have + (rest,)
    return out


def kinds_of(invs, usage, traits, aggs):
    """{provider id: its kind} (see Snapshot.kinds) of the rows
    world.reads.provider_rows gives; a provider with none of them is
    NO_KIND."""
    used = {(rid, rc): int(n) for rid, rc, n in usage if n}
    inv_of = _grouped([
        (rid, rc, total, reserved, ratio, min_unit, max_unit, step,
         used.get((rid, rc), 0))
        for rid, rc, total, reserved, ratio, min_unit, max_unit, step in
        invs])
    traits_of = _grouped([(rid, t) for rid, t in traits], whole=False)
    aggs_of = _grouped([(rid, a) for rid, a in aggs], whole=False)
    out = dict.fromkeys(set(inv_of) | set(traits_of) | set(aggs_of))
    for rid in out:
        out[rid] = (inv_of.get(rid, ()), traits_of.get(rid, ()),
                    aggs_of.get(rid, ()))
    return out


def build(rps, invs, usage, traits, aggs, epoch, slots):
    """The bytes of a Snapshot of the rows world.reads.provider_rows gives.

    Column by column (list comprehensions, C-speed sorts): a million
    providers in a few seconds."""
    kind_by_id = kinds_of(invs, usage, traits, aggs)
    rows = sorted((root_or_self(rid, root), rid, uuid, parent)
                  for rid, uuid, parent, root in rps)
    n = len(rows)
    cols = {name: array.array(code) for name, code in _COLUMNS}
    ids = [row[1] for row in rows]
    roots = [row[0] for row in rows]
    cols['ids'].extend(ids)
    cols['root'].extend(roots)
    cols['parent'].extend([row[3] or 0 for row in rows])
    children = sum(1 for row in rows if row[3] is not None)
    get = kind_by_id.get
    kind_of = {}
    per_provider = [kind_of.setdefault(get(rid, NO_KIND), len(kind_of))
                    for rid in ids]
    kinds = list(kind_of)
    cols['kind'].extend(per_provider)
    class_sets = {}
    kind_cls = [min(class_sets.setdefault(frozenset(row[0] for row in inv),
                                          len(class_sets)), MANY_CLASS_SETS)
                for inv, _tids, _aids in kinds]
    cols['cls'].extend([kind_cls[k] for k in per_provider])
    uuid_list = [row[2] for row in rows]
    joined = ''.join(uuid_list)
    is_canonical = False
    if joined.isascii() and all(len(u) == _UUID for u in uuid_list):
        odd = {}
        uuids = joined.encode('ascii')
        is_canonical = not uuids.translate(None, _CANONICAL)
    else:
        odd = {pos: u for pos, u in enumerate(uuid_list)
               if len(u) != _UUID or not u.isascii()}
        uuids = b''.join(b'\0' * _UUID if pos in odd else u.encode('ascii')
                         for pos, u in enumerate(uuid_list))
    # Trees: where each root's run of positions starts.
    starts = [pos for pos in range(n) if pos == 0 or
              roots[pos] != roots[pos - 1]]
    cols['troot'].extend([roots[pos] for pos in starts])
    cols['tstart'].extend(starts)
    cols['tstart'].append(n)
    shapes = _tree_shapes(ids, [row[3] for row in rows], roots, starts,
                          cols['tshape'])
    by_id = sorted(range(n), key=ids.__getitem__)
    cols['byid'].extend([ids[p] for p in by_id])
    cols['byid_pos'].extend(by_id)
    id_lo = ids[by_id[0]] if n else 0
    span = ids[by_id[-1]] - id_lo + 1 if n else 0
    if n and span <= 4 * n + 1024:
        posof = [-1] * span
        for rid, pos in zip(cols['byid'], by_id):
            posof[rid - id_lo] = pos
        cols['posof'].extend(posof)
    lowered = [u.lower() for u in uuid_list]
    cols['byuuid_pos'].extend(sorted(range(n), key=lowered.__getitem__))
    # Providers and roots per trait and per aggregate, from the kinds
    # that have any.
    by_trait, by_agg = {}, {}
    for pos, k in enumerate(per_provider):
        _inv, tids, aids = kinds[k]
        if tids or aids:
            member = (ids[pos], roots[pos])
            for tid in tids:
                by_trait.setdefault(tid, []).append(member)
            for aid in aids:
                by_agg.setdefault(aid, []).append(member)
    for of, index in (('trait', by_trait), ('agg', by_agg)):
        for key in sorted(index):
            cols[of + '_keys'].append(key)
            cols[of + '_start'].append(len(cols[of + '_ids']))
            cols[of + '_ids'].extend(sorted(rid for rid, _ in index[key]))
            cols[of + '_rstart'].append(len(cols[of + '_roots']))
            cols[of + '_roots'].extend(sorted({r for _, r in index[key]}))
        cols[of + '_start'].append(len(cols[of + '_ids']))
        cols[of + '_rstart'].append(len(cols[of + '_roots']))
    return _pack(cols, uuids, dict(epoch=epoch, slots=slots, n=n,
                                   children=children, kinds=kinds,
                                   id_lo=id_lo, odd_uuids=odd,
                                   canonical=is_canonical, shapes=shapes,
                                   class_sets=list(class_sets)[
                                       :MANY_CLASS_SETS]))


def _tree_shapes(ids, parents, roots, starts, column):
    """The distinct shapes of the trees (see Snapshot.shapes), each
    tree's index among them appended to ``column``: worked out once per
    node here, not per tree a process renders (a random sample's thousand
    trees are new each time)."""
    shapes = {}
    ends = starts[1:] + [len(ids)]
    for start, end in zip(starts, ends):
        run = ids[start:end]
        index = dict(zip(run, range(end - start)))
        tree_parents = parents[start:end]
        shape = (tuple(map(index.get, tree_parents)), index.get(roots[start]))
        if shape[1] is None or shape[0].count(None) != (
                tree_parents.count(None) + tree_parents.count(0)):
            column.append(-1)
        else:
            column.append(shapes.setdefault(shape, len(shapes)))
    return list(shapes)


def _pack(cols, uuids, head):
    """One buffer: magic, header length, header (pickled), then each
    column 8-byte aligned."""
    def layout(start):
        offsets, off = {}, start
        for name, code in _COLUMNS:
            off = (off + 7) & ~7
            offsets[name] = (code, off, len(cols[name]))
            off += len(cols[name]) * cols[name].itemsize
        return offsets, (off + 7) & ~7

    # The header holds the offsets, which depend on its length: lay out
    # twice, with room to spare.
    offsets, _end = layout(0)
    probe = pickle.dumps(dict(head, cols=offsets, uuid_off=0, size=0),
                         protocol=5)
    start = (16 + len(probe) + 256 + 7) & ~7
    offsets, end = layout(start)
    header = pickle.dumps(dict(head, cols=offsets, uuid_off=end,
                               size=end + len(uuids)), protocol=5)
    assert 16 + len(header) <= start
    out = bytearray(end + len(uuids))
    out[:8] = MAGIC
    struct.pack_into('<Q', out, 8, len(header))
    out[16:16 + len(header)] = header
    for name, (code, off, count) in offsets.items():
        out[off:off + count * cols[name].itemsize] = cols[name].tobytes()
    out[end:] = uuids
    return bytes(out)


# -- sharing through a file -------------------------------------------------
