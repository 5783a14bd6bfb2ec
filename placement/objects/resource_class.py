"""Resource classes: os-resource-classes' standard ones keep their
library index as id; CUSTOM_* ones get ids from 10000 up.

Other modules map names and ids with the cached lookups here
(``id_for_name``, ``name_for_id``, ``ids_for_names``, ``names_for_ids``),
which cost no query once warm; see ``placement.objects.attribute_cache``.
"""
import os_resource_classes as orc
from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import attribute_cache

CUSTOM_ID_START = 10000
# A racing creator can take the id we computed; try again this many times.
_CREATE_ATTEMPTS = 20

_RC = models.RC
_COLUMNS = (_RC.c.id, _RC.c.name, _RC.c.created_at, _RC.c.updated_at)

# oslo.db turns unique violations into DBDuplicateEntry on the engines it
# builds; an engine made by plain SQLAlchemy (as tests may) raises
# IntegrityError instead.
_DUPLICATE = (db_exc.DBDuplicateEntry, sa.exc.IntegrityError)


def is_custom_id(rc_id):
    return rc_id >= CUSTOM_ID_START


def _not_found(missing):
    return exception.ResourceClassNotFound(
        resource_class=', '.join(str(m) for m in missing))


_CACHE = attribute_cache.NameIdCache(
    _RC, lambda rc_id, _name: is_custom_id(rc_id), _not_found)


# --- cached lookups for everyone ---------------------------------------

def id_for_name(ctx, name):
    """The id of resource class ``name``; ResourceClassNotFound (404,
    "No such resource class NAME.") if there is none."""
    return _CACHE.id_for_name(ctx, name)


def name_for_id(ctx, rc_id):
    """The name of resource class ``rc_id``; ResourceClassNotFound."""
    return _CACHE.name_for_id(ctx, rc_id)


def ids_for_names(ctx, names):
    """{name: id} for every name; ResourceClassNotFound naming all the
    unknown ones (comma separated)."""
    return _CACHE.ids_for_names(ctx, names)


def names_for_ids(ctx, ids):
    """{id: name} for every id; ResourceClassNotFound for unknown ids."""
    return _CACHE.names_for_ids(ctx, ids)


# --- the resource ------------------------------------------------------

@db_api.reader
def get_all(ctx):
    """Every resource class as rows (id, name, created_at, updated_at),
    standard ones first in library order, then custom ones as created."""
    return ctx.session.execute(
        sa.select(*_COLUMNS).order_by(_RC.c.id)).all()


@db_api.replica_reader()
def listing(ctx):
    """get_all for GET /resource_classes, which may lag the primary (a
    replica's answer)."""
    return get_all(ctx)


@db_api.reader
def get_by_name(ctx, name):
    """One resource class row; ResourceClassNotFound if there is none."""
    row = ctx.session.execute(
        sa.select(*_COLUMNS).where(_RC.c.name == name)).first()
    if row is None:
        raise exception.ResourceClassNotFound(resource_class=name)
    return row


@db_api.retry_on_deadlock
@db_api.writer
def _insert(ctx, name):
    max_id = ctx.session.execute(sa.select(sa.func.max(_RC.c.id))).scalar()
    next_id = max(CUSTOM_ID_START, (max_id or 0) + 1)
    ctx.session.execute(_RC.insert().values(id=next_id, name=name))
    return ctx.session.execute(
        sa.select(*_COLUMNS).where(_RC.c.id == next_id)).one()


@db_api.reader
def _exists(ctx, name):
    return ctx.session.execute(
        sa.select(_RC.c.id).where(_RC.c.name == name)).first() is not None


def create(ctx, name):
    """Create custom class ``name``; its row. ResourceClassExists when the
    name is taken (standard names always are)."""
    if name in orc.STANDARDS:
        raise exception.ResourceClassExists(resource_class=name)
    for _attempt in range(_CREATE_ATTEMPTS):
        try:
            row = _insert(ctx, name)
        except _DUPLICATE:
            # Either the name is taken, or a concurrent create took the id
            # we computed: only the latter is worth another try.
            if _exists(ctx, name):
                raise exception.ResourceClassExists(resource_class=name)
            continue
        _CACHE.forget_custom(ctx)
        return row
    raise exception.Conflict(
        'Max retries of DB transaction exceeded attempting to create '
        'resource class: %s, please try again.' % name)


@db_api.retry_on_deadlock
@db_api.writer
def _rename(ctx, rc_id, new_name):
    ctx.session.execute(
        _RC.update().where(_RC.c.id == rc_id).values(
            name=new_name, updated_at=models._now()))
    return ctx.session.execute(
        sa.select(*_COLUMNS).where(_RC.c.id == rc_id)).one()


def rename(ctx, name, new_name):
    """Rename custom class ``name`` (microversions 1.2-1.6); the new row.
    ResourceClassNotFound, ResourceClassCannotUpdateStandard, or
    ResourceClassExists when ``new_name`` is taken."""
    row = get_by_name(ctx, name)
    if not is_custom_id(row.id):
        raise exception.ResourceClassCannotUpdateStandard(resource_class=name)
    try:
        new_row = _rename(ctx, row.id, new_name)
    except _DUPLICATE:
        raise exception.ResourceClassExists(resource_class=new_name)
    _CACHE.forget_custom(ctx)
    return new_row


@db_api.retry_on_deadlock
@db_api.writer
def _delete(ctx, rc_id, name):
    for table in (models.INV, models.ALLOC):
        used = ctx.session.execute(
            sa.select(table.c.id).where(
                table.c.resource_class_id == rc_id).limit(1)).first()
        if used is not None:
            raise exception.ResourceClassInUse(resource_class=name)
    result = ctx.session.execute(_RC.delete().where(_RC.c.id == rc_id))
    if result.rowcount != 1:
        raise exception.ResourceClassNotFound(resource_class=name)


def destroy(ctx, name):
    """Delete custom class ``name``. ResourceClassNotFound,
    ResourceClassCannotDeleteStandard, or ResourceClassInUse while any
    inventory (or allocation) refers to it."""
    row = get_by_name(ctx, name)
    if not is_custom_id(row.id):
        raise exception.ResourceClassCannotDeleteStandard(resource_class=name)
    try:
        _delete(ctx, row.id, name)
    finally:
        _CACHE.forget_custom(ctx)


# --- start-up ----------------------------------------------------------

@db_api.retry_on_deadlock
@db_api.writer
def _sync_standard_classes(ctx):
    have = {r[0] for r in ctx.session.execute(sa.select(models.RC.c.id))}
    rows = [{'id': idx, 'name': name}
            for idx, name in enumerate(orc.STANDARDS) if idx not in have]
    if rows:
        conn = ctx.session.connection()
        mysql = conn.dialect.name == 'mysql'
        if mysql:
            # VCPU's id is 0, which MySQL/MariaDB otherwise treat as "next
            # auto-increment value" (and then collide on id 1).
            old_mode = conn.execute(sa.text('SELECT @@SESSION.sql_mode')
                                    ).scalar()
            conn.execute(sa.text(
                "SET SESSION sql_mode = CONCAT_WS(',', @@SESSION.sql_mode, "
                "'NO_AUTO_VALUE_ON_ZERO')"))
        try:
            ctx.session.execute(models.RC.insert(), rows)
        finally:
            if mysql:
                conn.execute(sa.text('SET SESSION sql_mode = :m'),
                             {'m': old_mode})
    return len(rows)


def ensure_sync(ctx):
    """Add the standard classes the database lacks. Runs whenever an
    application is built over a database, so it also drops this process's
    cached lookups (they may describe another database)."""
    _CACHE.reset()
    for _attempt in range(3):
        try:
            return _sync_standard_classes(ctx)
        except _DUPLICATE:
            continue
    return 0
