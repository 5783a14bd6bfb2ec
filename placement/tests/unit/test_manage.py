"""placement-manage's argument handling and the online data migration
loop, with the database replaced by fakes."""
import contextlib

import pytest

from placement.cmd import manage
from placement.db import migration
from placement.db import startup
from placement.objects import data_migration


@pytest.fixture
def no_db(monkeypatch, tmp_path):
    """main() runs without touching a database."""
    for name in ('OS_PLACEMENT_CONFIG_DIR',):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(manage.db_api, 'configure', lambda conf: None)
    conf_file = tmp_path / 'placement.conf'
    conf_file.write_text('[placement_database]\nconnection = sqlite://\n')
    return ['--config-file', str(conf_file)]


def _fake_migrations(monkeypatch, *funcs):
    monkeypatch.setattr(data_migration, 'ONLINE_MIGRATIONS', funcs)


def _draining(name, total, calls=None):
    """A migration with ``total`` rows to migrate, done in batches."""
    left = [total]

    def migrate(ctx, count):
        if calls is not None:
            calls.append((name, count))
        done = min(left[0], count)
        found = done
        left[0] -= done
        return found, done
    migrate.__name__ = name
    return migrate


def test_no_command_prints_help_and_exits_1(no_db, capsys):
    assert manage.main(no_db) == 1
    assert 'usage:' in capsys.readouterr().out


def test_db_alone_prints_its_help_and_exits_0(no_db, capsys):
    assert manage.main(no_db + ['db']) == 0
    out = capsys.readouterr().out
    for sub in ('sync', 'version', 'stamp', 'online_data_migrations'):
        assert sub in out


def test_stamp_needs_a_version(no_db, capsys):
    with pytest.raises(SystemExit) as exc:
        manage.main(no_db + ['db', 'stamp'])
    assert exc.value.code == 2


def test_unknown_command_is_an_argument_error(no_db, capsys):
    with pytest.raises(SystemExit) as exc:
        manage.main(no_db + ['bogus'])
    assert exc.value.code == 2


def test_sync_version_and_stamp_call_the_migration_module(no_db, monkeypatch,
                                                          capsys):
    calls = []
    monkeypatch.setattr(migration, 'upgrade', lambda v: calls.append(
        ('upgrade', v)))
    monkeypatch.setattr(migration, 'stamp', lambda v: calls.append(
        ('stamp', v)))
    monkeypatch.setattr(migration, 'version', lambda track='upstream': {
        'upstream': 'a082b8bb98d0', 'extra': 'c3a1f0e2d4b7'}[track])
    monkeypatch.setattr(startup, 'startup_lock', contextlib.nullcontext)
    assert manage.main(no_db + ['db', 'sync']) == 0
    assert manage.main(no_db + ['db', 'stamp', 'b4ed3a175331']) == 0
    assert manage.main(no_db + ['db', 'version']) == 0
    assert calls == [('upgrade', 'head'), ('stamp', 'b4ed3a175331')]
    assert capsys.readouterr().out == 'a082b8bb98d0\n'
    assert manage.main(no_db + ['db', 'version', '--extra']) == 0
    assert capsys.readouterr().out == 'c3a1f0e2d4b7\n'


@pytest.mark.parametrize('value', ['0', '-3', 'many'])
def test_max_count_must_be_a_positive_integer(no_db, monkeypatch, capsys,
                                              value):
    _fake_migrations(monkeypatch, _draining('m', 3))
    rc = manage.main(no_db + ['db', 'online_data_migrations',
                              '--max-count', value])
    assert rc == 127
    assert 'Must supply a positive value for max_count' in (
        capsys.readouterr().out)


def test_unlimited_runs_batches_until_nothing_is_left(no_db, monkeypatch,
                                                      capsys):
    calls = []
    _fake_migrations(monkeypatch, _draining('first', 120, calls),
                     _draining('second', 7, calls))
    rc = manage.main(no_db + ['db', 'online_data_migrations'])
    out = capsys.readouterr().out
    assert rc == 0
    assert 'Running batches of 50 until complete' in out
    assert '50 rows matched query first, 50 migrated' in out
    # The summary table adds the batches up.
    row = [line for line in out.splitlines() if ' first ' in line][-1]
    assert [c.strip() for c in row.strip('|').split('|')] == [
        'first', '120', '120']
    row = [line for line in out.splitlines() if ' second ' in line][-1]
    assert [c.strip() for c in row.strip('|').split('|')] == [
        'second', '7', '7']
    # A batch stops calling migrations once max_count rows were migrated.
    assert calls[:2] == [('first', 50), ('first', 50)]


def test_limited_run_exits_1_while_work_was_done(no_db, monkeypatch, capsys):
    _fake_migrations(monkeypatch, _draining('m', 10))
    args = no_db + ['db', 'online_data_migrations', '--max-count', '4']
    assert manage.main(args) == 1
    assert manage.main(args) == 1
    assert manage.main(args) == 1   # the last 2
    assert manage.main(args) == 0   # nothing left


def test_nothing_to_migrate_exits_0_with_a_table(no_db, monkeypatch, capsys):
    _fake_migrations(monkeypatch, _draining('m', 0))
    assert manage.main(no_db + ['db', 'online_data_migrations']) == 0
    out = capsys.readouterr().out
    assert 'Total Found' in out and 'Completed' in out


def _broken(ctx, count):
    raise RuntimeError('boom')


def test_a_failing_migration_exits_2(no_db, monkeypatch, capsys):
    _fake_migrations(monkeypatch, _broken, _draining('m', 0))
    assert manage.main(no_db + ['db', 'online_data_migrations']) == 2
    out = capsys.readouterr().out
    assert 'Error attempting to run _broken' in out
    assert 'Some migrations failed unexpectedly. Check log for details.' in (
        out)


def test_a_failure_is_not_final_while_a_limited_batch_progresses(
        no_db, monkeypatch, capsys):
    _fake_migrations(monkeypatch, _broken, _draining('m', 5))
    args = no_db + ['db', 'online_data_migrations', '--max-count', '10']
    assert manage.main(args) == 1
    assert manage.main(args) == 2


def test_os_traits_sync_reports_counts(no_db, monkeypatch, capsys):
    monkeypatch.setattr(manage.trait_obj, 'ensure_sync', lambda ctx: 3)
    monkeypatch.setattr(manage.rc_obj, 'ensure_sync', lambda ctx: 0)
    assert manage.main(no_db + ['os-traits', 'sync']) == 0
    out = capsys.readouterr().out
    assert 'Standard traits: 3 added' in out
    assert 'Standard resource classes: 0 added' in out
