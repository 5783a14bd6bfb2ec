"""Name <-> id caches for the lookup tables (resource classes, traits).

Every request maps names to ids and back, so these lookups must not cost a
query each. Two kinds of rows are treated differently:

* standard rows (from os-resource-classes / os-traits) are never renamed or
  deleted, so once seen they are cached for the life of the process;
* custom (``CUSTOM_*``) rows can be created, renamed or deleted by any
  process sharing the database at any time, so they are only trusted for
  the length of one request: they live on the request context.

Any miss reloads the whole table once (one small query) and asks again, so
rows another process added are found; rows it deleted or renamed are
never served from a previous request. ``reset()`` drops the process-wide
part; it runs whenever an application is (re)built over a database.
"""
import threading

import sqlalchemy as sa

from placement.db import api as db_api

_CTX_ATTR = '_placement_attribute_cache'


class NameIdCache:
    """A two-way name/id cache over ``table`` (which has id and name)."""

    def __init__(self, table, is_custom, not_found):
        self._table = table
        self._is_custom = is_custom     # f(id, name) -> bool
        self._not_found = not_found     # f(missing_names_or_ids) -> error
        self._lock = threading.Lock()
        self._std_by_name = {}
        self._std_by_id = {}

    def reset(self):
        with self._lock:
            self._std_by_name = {}
            self._std_by_id = {}

    # -- per-request custom part ------------------------------------------

    def _custom(self, ctx):
        caches = getattr(ctx, _CTX_ATTR, None)
        if caches is None:
            caches = {}
            setattr(ctx, _CTX_ATTR, caches)
        key = self._table.name
        if key not in caches:
            caches[key] = ({}, {})
        return caches[key]

    def forget_custom(self, ctx):
        """Drop this request's view of custom rows (after a write to them)."""
        caches = getattr(ctx, _CTX_ATTR, None)
        if caches is not None:
            caches.pop(self._table.name, None)

    # -- loading --------------------------------------------------------------

    @db_api.reader
    def _rows(self, ctx):
        return ctx.session.execute(
            sa.select(self._table.c.id, self._table.c.name)).all()

    def _reload(self, ctx):
        std_by_name, std_by_id = {}, {}
        by_name, by_id = self._custom(ctx)
        by_name.clear()
        by_id.clear()
        for row_id, name in self._rows(ctx):
            if self._is_custom(row_id, name):
                by_name[name] = row_id
                by_id[row_id] = name
            else:
                std_by_name[name] = row_id
                std_by_id[row_id] = name
        with self._lock:
            self._std_by_name = std_by_name
            self._std_by_id = std_by_id

    def _lookup(self, ctx, keys, by_id):
        """Split keys into {key: value} found and a list of missing keys;
        ``by_id`` says whether keys are ids (else names)."""
        std = self._std_by_id if by_id else self._std_by_name
        custom = self._custom(ctx)[1 if by_id else 0]
        found, missing = {}, []
        for key in keys:
            value = std.get(key)
            if value is None:
                value = custom.get(key)
            if value is None:
                missing.append(key)
            else:
                found[key] = value
        return found, missing

    def _resolve(self, ctx, keys, by_id):
        keys = list(dict.fromkeys(keys))
        found, missing = self._lookup(ctx, keys, by_id)
        if missing:
            self._reload(ctx)
            more, missing = self._lookup(ctx, missing, by_id)
            found.update(more)
        if missing:
            raise self._not_found(missing)
        return found

    # -- the API ------------------------------------------------------------

    def ids_for_names(self, ctx, names):
        """{name: id} for every name; the not-found error lists unknowns."""
        return self._resolve(ctx, names, False)

    def names_for_ids(self, ctx, ids):
        """{id: name} for every id; the not-found error lists unknowns."""
        return self._resolve(ctx, ids, True)

    def id_for_name(self, ctx, name):
        return self._resolve(ctx, [name], False)[name]

    def name_for_id(self, ctx, row_id):
        return self._resolve(ctx, [row_id], True)[row_id]
