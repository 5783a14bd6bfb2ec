"""Traits: the standard ones of os-traits plus CUSTOM_* ones, and which
providers have them.

Other modules map names and ids with the cached lookups here
(``ids_for_names``, ``id_for_name``, ``name_for_id``, ``names_for_ids``),
which cost no query once warm; see ``placement.objects.attribute_cache``.
Giving a provider its traits moves the provider's generation, so that
write is ``resource_provider.set_traits``: this module knows nothing of
providers beyond the association table.
"""
import collections

import os_traits
from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception
from placement.objects import attribute_cache
from placement.objects import provider_rows

CUSTOM_NAMESPACE = 'CUSTOM_'

_TRAIT = models.TRAIT
_RPT = models.RPT
_COLUMNS = (_TRAIT.c.id, _TRAIT.c.name, _TRAIT.c.created_at,
            _TRAIT.c.updated_at)

# oslo.db turns unique violations into DBDuplicateEntry on the engines it
# builds; an engine made by plain SQLAlchemy (as tests may) raises
# IntegrityError instead.
_DUPLICATE = (db_exc.DBDuplicateEntry, sa.exc.IntegrityError)


def is_custom(name):
    return name.startswith(CUSTOM_NAMESPACE)


def _not_found(missing):
    return exception.TraitNotFound(
        names=', '.join(str(m) for m in missing))


_CACHE = attribute_cache.NameIdCache(
    _TRAIT, lambda _id, name: is_custom(name), _not_found)


# --- cached lookups for everyone ---------------------------------------

def ids_for_names(ctx, names):
    """{name: id} for every name; TraitNotFound (404, "No such trait(s):
    A, B.") naming every unknown one, in the order given."""
    return _CACHE.ids_for_names(ctx, names)


def id_for_name(ctx, name):
    return _CACHE.id_for_name(ctx, name)


def names_for_ids(ctx, ids):
    """{id: name} for every id; TraitNotFound for unknown ids."""
    return _CACHE.names_for_ids(ctx, ids)


def name_for_id(ctx, trait_id):
    return _CACHE.name_for_id(ctx, trait_id)


# --- the resource ------------------------------------------------------

@db_api.reader
def get_all(ctx, name_in=None, prefix=None, associated=None):
    """Trait rows (id, name, created_at, updated_at), optionally only
    those named in ``name_in``, starting with ``prefix``, and/or
    associated (True) or not (False) with some provider."""
    sel = sa.select(*_COLUMNS)
    order = _TRAIT.c.id
    if name_in is not None:
        sel = sel.where(_TRAIT.c.name.in_(list(name_in)))
        order = _TRAIT.c.name
    if prefix is not None:
        sel = sel.where(_TRAIT.c.name.startswith(prefix, autoescape=True))
    if associated is not None:
        used = sa.exists().where(_RPT.c.trait_id == _TRAIT.c.id)
        sel = sel.where(used if associated else ~used)
    return ctx.session.execute(sel.order_by(order)).all()


@db_api.replica_reader()
def listing(ctx, **filters):
    """get_all for GET /traits, which may lag the primary (a replica's
    answer): writes that depend on traits read them with get_all."""
    return get_all(ctx, **filters)


@db_api.reader
def get_by_name(ctx, name):
    """One trait row; TraitNotFound if there is none."""
    row = ctx.session.execute(
        sa.select(*_COLUMNS).where(_TRAIT.c.name == name)).first()
    if row is None:
        raise exception.TraitNotFound(names=name)
    return row


@db_api.retry_on_deadlock
@db_api.writer
def _insert(ctx, name):
    ctx.session.execute(_TRAIT.insert().values(name=name))
    return ctx.session.execute(
        sa.select(*_COLUMNS).where(_TRAIT.c.name == name)).one()


def create(ctx, name):
    """Create trait ``name``; its row. TraitExists if it already exists."""
    try:
        row = _insert(ctx, name)
    except _DUPLICATE:
        raise exception.TraitExists(name=name)
    _CACHE.forget_custom(ctx)
    return row


@db_api.retry_on_deadlock
@db_api.writer
def _delete(ctx, trait_id, name):
    used = ctx.session.execute(
        sa.select(_RPT.c.trait_id).where(
            _RPT.c.trait_id == trait_id).limit(1)).first()
    if used is not None:
        raise exception.TraitInUse(name=name)
    result = ctx.session.execute(_TRAIT.delete().where(
        _TRAIT.c.id == trait_id))
    if result.rowcount != 1:
        raise exception.TraitNotFound(names=name)


def destroy(ctx, name):
    """Delete custom trait ``name``. TraitNotFound,
    TraitCannotDeleteStandard, or TraitInUse while a provider has it."""
    row = get_by_name(ctx, name)
    if not is_custom(name):
        raise exception.TraitCannotDeleteStandard(name=name)
    try:
        _delete(ctx, row.id, name)
    finally:
        _CACHE.forget_custom(ctx)


# --- provider traits ---------------------------------------------------

_PROVIDER_TRAITS_FROM = _RPT.join(_TRAIT, _RPT.c.trait_id == _TRAIT.c.id)


_OF_PROVIDER = provider_rows.statement(
    _COLUMNS, _TRAIT.c.id,
    (_RPT, _RPT.c.resource_provider_id == models.RP.c.id),
    (_TRAIT, _RPT.c.trait_id == _TRAIT.c.id))


def get_for_provider(ctx, rp_uuid):
    """(the provider's generation, its trait rows: id, name, created_at,
    updated_at), in one statement (provider_rows);
    ResourceProviderNotFound."""
    return provider_rows.read(ctx, _OF_PROVIDER, rp_uuid, 'id')


@db_api.reader
def names_by_provider_ids(ctx, rp_ids):
    """{provider id: set of trait names} for the given provider ids (those
    without traits are absent)."""
    result = collections.defaultdict(set)
    rp_ids = list(rp_ids)
    if not rp_ids:
        return result
    rows = ctx.session.execute(
        sa.select(_RPT.c.resource_provider_id, _RPT.c.trait_id).where(
            _RPT.c.resource_provider_id.in_(
                sa.bindparam('rp_ids', expanding=True))),
        {'rp_ids': rp_ids})
    rows = rows.all()
    names = names_for_ids(ctx, {r[1] for r in rows}) if rows else {}
    for rp_id, trait_id in rows:
        result[rp_id].add(names[trait_id])
    return result


# --- start-up ----------------------------------------------------------

@db_api.retry_on_deadlock
@db_api.writer
def _sync_standard_traits(ctx):
    have = {r[0] for r in ctx.session.execute(sa.select(models.TRAIT.c.name))}
    missing = sorted(set(os_traits.get_traits()) - have)
    if missing:
        ctx.session.execute(models.TRAIT.insert(),
                            [{'name': name} for name in missing])
    return len(missing)


def ensure_sync(ctx):
    """Add the standard traits the installed os-traits knows and the
    database lacks; custom traits are left alone. Safe to run often and
    from several processes at once. Runs whenever an application is built
    over a database, so it also drops this process's cached lookups."""
    _CACHE.reset()
    for _attempt in range(3):
        try:
            return _sync_standard_traits(ctx)
        except _DUPLICATE:
            continue
    return 0
