"""The node's file of the world's snapshot (snapshot.py): one per
database, in ``[candidates] world_dir`` (by default a directory of
/dev/shm), that the node's processes map read-only and share.

Written whole under a lock and renamed into place: a reader maps either
the old file or the new one, never a half-written one. It ends with its
length and checksum (the seal), checked before anything in it is read:
a file damaged by an outside hand (cut short, a byte changed) is
refused, logged, and written again by its reader. It may end with every
tree's provider summaries rendered ahead (``rendered_section``), a
function of the snapshot alone (a random sample's thousand trees are new
ones each time).
"""
import array
import contextlib
import fcntl
import hashlib
import mmap
import os
import pickle
import struct
import tempfile
import time
import zlib

from oslo_log import log as logging

from placement.objects.candidates import snapshot

LOG = logging.getLogger(__name__)

# The end of every file: this, the length before it, its CRC-32.
_SEALED = b'PLSEALED'
_SEAL = struct.Struct('<8sQQ')
_POPULATE = getattr(mmap, 'MAP_POPULATE', 0)


def path_for(directory, engine):
    """The snapshot file of the database ``engine`` connects to, in this
    version's format: processes of two versions on one node (a rolling
    upgrade) each keep a file they can read rather than replace the
    other's."""
    url = engine.url.render_as_string(hide_password=True)
    name = hashlib.sha256(url.encode()).hexdigest()[:24]
    return os.path.join(directory, 'world-%s.%s' % (
        name, snapshot.MAGIC.decode('ascii').lower()))


def default_directory():
    """/dev/shm (memory, shared by the node's processes) when there is one,
    else the temporary directory; a directory of this user's."""
    base = '/dev/shm' if os.access('/dev/shm', os.W_OK) else \
        tempfile.gettempdir()
    return os.path.join(base, 'placement-world-%d' % os.getuid())


def shareable(engine):
    """Whether other processes can reach the same database: not an
    in-memory SQLite one."""
    url = engine.url
    if url.get_backend_name() != 'sqlite':
        return True
    database = url.database or ''
    return database not in ('', ':memory:') and \
        'mode=memory' not in str(url)


@contextlib.contextmanager
def locked(path):
    """The file's lock, held while one process builds or checks it: the
    others wait (they would build the same). Yields the lock's file
    descriptor: a child process given it holds the lock with this one."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path + '.lock', os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def turn(path, waiting, lanes=1, poll=0.05):
    """``lanes`` callers at a time per node (lock files ``path`` % lane,
    each call its own open files, so threads of one process take turns
    too): yields True once a lane is this caller's, held until the block
    ends; False as soon as ``waiting()`` is false, no lane taken (what it
    waited for is done). True at once when the files cannot be opened."""
    fds = []
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        for lane in range(lanes):
            fds.append(os.open(path % lane, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError:
        for fd in fds:
            os.close(fd)
        yield True
        return
    try:
        while waiting():
            for fd in fds:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                yield True
                return
            time.sleep(poll)
        yield False
    finally:
        for fd in fds:
            os.close(fd)


def open_file(path):
    """The Snapshot in file ``path``, mapped read-only; None if there is
    none, or it is damaged or not one (logged: the caller writes it
    again)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        # None yet, or not ours to read: the caller reads the database.
        return None
    try:
        stat = os.fstat(fd)
        # Mapped whole at once (MAP_POPULATE): the pages are the node's
        # already; touching them one by one later costs a fault each (a
        # random answer's rendered trees are scattered over the file).
        buf = mmap.mmap(fd, stat.st_size, flags=mmap.MAP_SHARED | _POPULATE,
                        prot=mmap.PROT_READ) if stat.st_size else None
    except (OSError, ValueError):
        os.close(fd)
        return None
    why = _unsealed(buf)
    if why is None:
        try:
            snap = snapshot.Snapshot(buf, path, stat.st_ino, len(buf) - _SEAL.size)
        except Exception as exc:
            why = 'unreadable (%s)' % exc
    if why is not None:
        os.close(fd)
        _damaged(path, stat, why)
        return None
    snap.watch(fd, stat)
    return snap


def _unsealed(buf):
    """Why the mapped file ``buf`` is not whole (None if it is): its size
    is not the one its seal says, or its checksum differs. The whole
    file is summed, not its head alone: a byte changed in a column is a
    wrong answer, not an error (the cost: candidates-engine.rst)."""
    if buf is None or len(buf) < _SEAL.size:
        return 'cut short (%d bytes)' % (0 if buf is None else len(buf))
    magic, length, crc = _SEAL.unpack_from(buf, len(buf) - _SEAL.size)
    if magic != _SEALED or length != len(buf) - _SEAL.size:
        return 'cut short or not sealed (%d bytes)' % len(buf)
    if zlib.crc32(memoryview(buf)[:length]) != crc:
        return 'checksum differs'
    return None


# (path, inode, size, mtime) of the damaged files this process warned of.
_WARNED = set()


def _damaged(path, stat, why):
    """Log damaged file ``path`` at WARNING, once per process and state
    of it (a process may open it several times before it is rewritten)."""
    key = (path, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _WARNED:
        _WARNED.add(key)
        LOG.warning('Allocation candidates: the node file %s is damaged '
                    '(%s); not used, the world is read from the database '
                    'and the file written again.', path, why)


def inode(path):
    """The inode the file ``path`` now is (None if none): a new one means
    another process wrote a newer snapshot."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def rendered_section(data, key, blobs):
    """The chunks that end a snapshot file of ``data`` with its trees
    rendered: ``blobs`` gives one bytes per tree, in the order of column
    troot (empty: none for that tree), streamed to the file as they come
    (a million providers render to 225 MB); then where each one ends,
    ``key`` (what the renderer calls its rendering, pickled) and the
    trailer."""
    pad = -len(data) % 8
    yield b'\0' * pad
    start = len(data) + pad
    ends = array.array('q', [0])
    at = 0
    chunk = []
    for blob in blobs:
        at += len(blob)
        ends.append(at)
        chunk.append(blob)
        if len(chunk) >= 1024:
            yield b''.join(chunk)
            chunk = []
    yield b''.join(chunk)
    pad = -at % 8
    yield b'\0' * pad
    offs = start + at + pad
    yield ends.tobytes()
    key_at = offs + len(ends) * ends.itemsize
    yield pickle.dumps(key, protocol=5)
    yield snapshot.TRAILER.pack(snapshot.RENDERED, start, offs, key_at)


def write_file(path, data, more=()):
    """Write ``data`` (then the chunks of ``more``, then the seal: their
    length and CRC-32) to ``path`` whole: to
    a temporary file beside it, then renamed over it; then remove the
    files an older version left for the same database (in /dev/shm they
    hold memory until a reboot). The caller holds the file's lock
    (``locked``), so a temporary file of ``path`` found here is a dead
    writer's (a process that ended while its thread renewed the file):
    removed first."""
    directory, name = os.path.split(path)
    prefix = '.%s.' % name
    with contextlib.suppress(OSError):
        for other in os.listdir(directory):
            if other.startswith(prefix):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, other))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            length, crc = len(data), zlib.crc32(data)
            for chunk in more:
                f.write(chunk)
                length, crc = length + len(chunk), zlib.crc32(chunk, crc)
            f.write(_SEAL.pack(_SEALED, length, crc))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _remove_older_formats(path)


def _remove_older_formats(path):
    """Remove the snapshot files of ``path``'s database in older formats
    (``world-<db>`` before formats were named, ``world-<db>.plworldN``);
    a process still mapping one keeps its mapping. Newer ones are left to
    the newer version (a rollback: each keeps its own)."""
    directory, ours = os.path.split(path)
    stem, _dot, fmt = ours.rpartition('.')
    if not (stem and fmt.startswith('plworld') and fmt[7:].isdigit()):
        return
    version = int(fmt[7:])
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            if name == stem:
                older = True
            elif name.startswith(stem + '.plworld'):
                digits = name[len(stem) + len('.plworld'):]
                older = digits.isdigit() and int(digits) < version
            else:
                older = False
            if older:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))
