"""Worker start-up in turns: at most as many importing at once as CPUs.

A WSGI server starts its workers together, and each spends about a second
of CPU importing the application's libraries. Four workers on two CPUs
then all become ready after two seconds, none after the first half
second; so a node's first answer waits for every worker's import.
Taking turns (one file lock per CPU, held while importing), the first
workers are ready as soon as one import is done and the others follow.

Locks are advisory and released by the kernel if a worker dies; a worker
that waits longer than ``WAIT`` goes ahead anyway, so a stuck neighbour
never stops a node from starting. Only this start-up CPU is ordered:
requests never wait for a turn.
"""
import contextlib
import fcntl
import os
import tempfile
import time

# Seconds a process waits for a turn before it imports anyway.
WAIT = 20.0
_POLL = 0.01


def _slots():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _lock_path(slot):
    return os.path.join(tempfile.gettempdir(), 'placement-start-%d-%d.lock'
                        % (os.getuid(), slot))


class _NoLocks(Exception):
    """The lock files cannot be opened here."""


def _try(slot):
    """An open file holding ``slot``'s lock, or None if it is taken."""
    try:
        f = open(_lock_path(slot), 'a')
    except OSError as exc:
        raise _NoLocks() from exc
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    except OSError as exc:
        f.close()
        raise _NoLocks() from exc
    return f


@contextlib.contextmanager
def turn():
    """Hold one of the node's start-up slots while the block runs (or go
    ahead without one after ``WAIT`` seconds, or at once where the files
    cannot be opened or locked)."""
    slots = _slots()
    deadline = time.monotonic() + WAIT
    held = None
    try:
        while held is None and time.monotonic() < deadline:
            for slot in range(slots):
                held = _try(slot)
                if held is not None:
                    break
            else:
                time.sleep(_POLL)
    except _NoLocks:
        pass
    try:
        yield
    finally:
        if held is not None:
            held.close()
