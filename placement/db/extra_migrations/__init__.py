"""Our own schema track: what this service adds to upstream's schema.

Upstream's revisions (``placement/db/migrations``) are recorded in
``alembic_version``, the table upstream's ``placement-manage db sync``
reads: it must only ever hold revisions upstream knows, or upstream's
nodes stop syncing and booting. Ours are recorded in their own table,
``placement_extra_version`` (``migration.EXTRA_VERSION_TABLE``), and run
after upstream's by ``placement-manage db sync`` and ``sync_on_startup``
(``migration.upgrade('head')``). Upstream's code never looks at them.

Adding a revision::

    alembic -c placement/db/extra_migrations/alembic.ini revision -m "..."

writes ``versions/<id>_<message>.py`` from ``script.py.mako``, its
``down_revision`` the current head of this track (``c3a1f0e2d4b7``, the
change log, is the first; ``migration.head(migration.EXTRA)`` says which
is newest). Fill in ``upgrade()`` and a ``downgrade()`` that undoes it
(``placement-manage db drop_extra`` walks them back to nothing); both may
rely on upstream's track being at its head. Then: the models
(``placement/db/models.py``) that ``test_migrations`` compares the result
with, the new id at the end of ``EXTRA_CHAIN`` there, and ``EXTRA_HEAD``
in ``tests_installed/test_installed.py``.
"""
