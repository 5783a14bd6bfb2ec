"""The tests here reach no database, so they run once, in the SQLite run
(../conftest.py). Each is held to it: a connection to a database other
than SQLite's in-memory one fails the test; such a test belongs in
functional/."""
import pytest
import sqlalchemy as sa


@pytest.fixture(autouse=True)
def no_database():
    reached = []

    def connected(conn):
        url = conn.engine.url
        if not (url.get_backend_name() == 'sqlite'
                and url.database in (None, '', ':memory:')):
            reached.append(url.render_as_string(hide_password=True))

    sa.event.listen(sa.engine.Engine, 'engine_connect', connected)
    try:
        yield
    finally:
        sa.event.remove(sa.engine.Engine, 'engine_connect', connected)
    assert not reached, (
        'a test under unit/ reached a database (%s): it runs on SQLite only; '
        'move it to functional/' % reached[0])
