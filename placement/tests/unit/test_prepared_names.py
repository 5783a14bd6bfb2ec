"""Prepared statement names depend only on the statement and its
parameter types, so that behind a pooler (server sessions shared by
every process) a name never runs another statement."""
from placement.db import prepared


def test_same_statement_same_name():
    assert (prepared._name('SELECT $1', ('bigint',)) ==
            prepared._name('SELECT $1', ('bigint',)))


def test_other_statement_or_types_other_name():
    names = {prepared._name('SELECT $1', ('bigint',)),
             prepared._name('SELECT $1 + 1', ('bigint',)),
             prepared._name('SELECT $1', ('text',)),
             prepared._name('SELECT $1', ())}
    assert len(names) == 4
    # A valid SQL identifier within PostgreSQL's 63 characters.
    assert all(n.isidentifier() and len(n) <= 63 for n in names)


def test_untyped_null_is_not_prepared():
    assert prepared._pg_type(None, None) is None
    assert prepared._pg_type(None, 3) == 'bigint'
    assert prepared._pg_type('INTEGER[]', None) == 'INTEGER[]'
