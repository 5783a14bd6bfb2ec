"""Where configuration comes from: files, directories, the environment,
and the embedded SQLite default."""
import os

from oslo_config import cfg
import pytest

from placement import conf as placement_conf


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No OS_* placement settings leak in from the caller's environment."""
    for name in list(os.environ):
        if name.startswith('OS_'):
            monkeypatch.delenv(name)
    monkeypatch.setenv('OS_DEFAULT__STATE_PATH', str(tmp_path / 'state'))
    return monkeypatch


def _write_conf(directory, text):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / 'placement.conf'
    path.write_text(text)
    return path


def test_config_dir_env_names_the_directory_holding_placement_conf(
        clean_env, tmp_path):
    confdir = tmp_path / 'etc'
    _write_conf(confdir, '[api]\nauth_strategy = noauth2\n'
                         '[placement_database]\nconnection = sqlite:///x.db\n')
    clean_env.setenv('OS_PLACEMENT_CONFIG_DIR', str(confdir))
    conf = placement_conf.build_conf()
    assert conf.api.auth_strategy == 'noauth2'
    assert conf.placement_database.connection == 'sqlite:///x.db'


def test_config_dir_env_without_placement_conf_is_an_error(clean_env,
                                                           tmp_path):
    # As upstream: naming a directory promises a placement.conf in it.
    clean_env.setenv('OS_PLACEMENT_CONFIG_DIR', str(tmp_path / 'nothing'))
    with pytest.raises(cfg.ConfigFilesNotFoundError):
        placement_conf.build_conf()


def test_files_from_environ_argument(tmp_path):
    assert placement_conf.config_files_from_env(
        {'OS_PLACEMENT_CONFIG_DIR': str(tmp_path)}) == [
            str(tmp_path / 'placement.conf')]
    assert placement_conf.config_files_from_env({}) is None
    assert placement_conf.config_files_from_env(
        {'OS_PLACEMENT_CONFIG_DIR': '  '}) is None


def test_environment_variable_overrides_an_option(clean_env):
    clean_env.setenv('OS_API__AUTH_STRATEGY', 'noauth2')
    conf = placement_conf.build_conf(default_config_files=[])
    assert conf.api.auth_strategy == 'noauth2'


def test_proxy_headers_parsing_is_off_and_set_from_the_environment(
        clean_env):
    conf = placement_conf.build_conf(default_config_files=[])
    assert conf.oslo_middleware.enable_proxy_headers_parsing is False
    clean_env.setenv('OS_OSLO_MIDDLEWARE__ENABLE_PROXY_HEADERS_PARSING',
                     'true')
    conf = placement_conf.build_conf(default_config_files=[])
    assert conf.oslo_middleware.enable_proxy_headers_parsing is True


def test_environment_variable_beats_the_config_file(clean_env, tmp_path):
    confdir = tmp_path / 'etc'
    _write_conf(confdir, '[placement]\nmax_allocation_candidates = 5\n')
    clean_env.setenv('OS_PLACEMENT_CONFIG_DIR', str(confdir))
    clean_env.setenv('OS_PLACEMENT__MAX_ALLOCATION_CANDIDATES', '7')
    conf = placement_conf.build_conf()
    assert conf.placement.max_allocation_candidates == 7


def test_environment_variable_sets_the_database_connection(clean_env):
    clean_env.setenv('OS_PLACEMENT_DATABASE__CONNECTION',
                     'postgresql+psycopg2://u:p@db/placement')
    clean_env.setenv('OS_PLACEMENT_DATABASE__SYNC_ON_STARTUP', 'true')
    conf = placement_conf.build_conf(default_config_files=[])
    assert placement_conf.database_url(conf) == (
        'postgresql+psycopg2://u:p@db/placement')
    assert conf.placement_database.sync_on_startup is True
    assert not placement_conf.uses_embedded_database(conf)


def test_config_file_argument_is_honoured(clean_env, tmp_path):
    path = _write_conf(tmp_path / 'a', '[api]\nauth_strategy = noauth2\n')
    conf = placement_conf.build_conf(args=['--config-file', str(path)],
                                     default_config_files=[])
    assert conf.api.auth_strategy == 'noauth2'


def test_config_dir_argument_is_honoured(clean_env, tmp_path):
    confdir = tmp_path / 'conf.d'
    confdir.mkdir()
    (confdir / '10-db.conf').write_text(
        '[placement_database]\nconnection = sqlite:///from-dir.db\n')
    conf = placement_conf.build_conf(args=['--config-dir', str(confdir)],
                                     default_config_files=[])
    assert conf.placement_database.connection == 'sqlite:///from-dir.db'


def test_no_connection_means_embedded_sqlite_under_state_path(clean_env,
                                                              tmp_path):
    conf = placement_conf.build_conf(default_config_files=[])
    assert placement_conf.uses_embedded_database(conf)
    url = placement_conf.database_url(conf)
    expected = os.path.join(str(tmp_path / 'state'), 'placement.sqlite')
    assert url == 'sqlite:///' + expected
    # The state directory is created so SQLite can make its file there.
    assert os.path.isdir(str(tmp_path / 'state'))


def test_a_connection_replaces_the_embedded_database(clean_env, tmp_path):
    path = _write_conf(tmp_path / 'c', '[placement_database]\n'
                       'connection = mysql+pymysql://u:p@db/placement\n')
    conf = placement_conf.build_conf(default_config_files=[str(path)])
    assert not placement_conf.uses_embedded_database(conf)
    assert placement_conf.database_url(conf) == (
        'mysql+pymysql://u:p@db/placement')
    assert not (tmp_path / 'state').exists()


def test_upstream_defaults(clean_env):
    conf = placement_conf.build_conf(default_config_files=[])
    assert conf.api.auth_strategy == 'keystone'
    assert conf.placement.incomplete_consumer_project_id == (
        '00000000-0000-0000-0000-000000000000')
    assert conf.placement.incomplete_consumer_user_id == (
        '00000000-0000-0000-0000-000000000000')
    assert conf.placement.allocation_conflict_retry_count == 10
    assert conf.placement.max_allocation_candidates == -1
    assert conf.placement_database.sync_on_startup is False
    assert conf.placement_database.max_retries == 10


def test_an_invalid_choice_is_refused(clean_env):
    clean_env.setenv('OS_API__AUTH_STRATEGY', 'bogus')
    conf = placement_conf.build_conf(default_config_files=[])
    with pytest.raises(ValueError):
        conf.api.auth_strategy
