"""Workers import the application in turns, as many at once as CPUs."""
import os
import subprocess
import sys
import tempfile
import time

import pytest

from placement.wsgi import turns


@pytest.fixture(autouse=True)
def own_slots(monkeypatch, tmp_path):
    """Slots of these tests' own (the lock files live in the temporary
    directory): processes of other tests starting meanwhile keep theirs."""
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    monkeypatch.setenv('TMPDIR', str(tmp_path))


def _holding_every_slot():
    held = [turns._try(slot) for slot in range(turns._slots())]
    assert all(held), 'a start-up slot is held by another process'
    return held


def _release(held):
    for f in held:
        f.close()


def test_a_turn_is_free_when_a_slot_is():
    held = _holding_every_slot()
    _release(held[:1])
    start = time.monotonic()
    with turns.turn():
        assert turns._try(0) is None  # this process holds it now
    assert time.monotonic() - start < 1
    _release(held[1:])


def test_a_turn_waits_for_a_slot_and_never_longer_than_wait(monkeypatch):
    held = _holding_every_slot()
    monkeypatch.setattr(turns, 'WAIT', 0.3)
    start = time.monotonic()
    with turns.turn():
        waited = time.monotonic() - start
    assert 0.3 <= waited < 2
    _release(held)


def test_no_waiting_where_the_lock_files_cannot_be_made(monkeypatch,
                                                       tmp_path):
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'missing'))
    start = time.monotonic()
    with turns.turn():
        pass
    assert time.monotonic() - start < 1


def test_the_entry_point_imports_the_application_in_a_turn():
    """Importing placement.wsgi.api waits while every slot is held by
    other processes, and goes on as soon as one is free."""
    held = _holding_every_slot()
    child = subprocess.Popen(
        [sys.executable, '-c',
         'import time; import placement.wsgi.api; print(time.time())'],
        stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    time.sleep(2)
    released = time.time()
    _release(held)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert float(out.split()[-1]) >= released
