"""Traits: the standard ones of os-traits plus CUSTOM_* ones."""
import os_traits
from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models


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
    from several processes at once."""
    for _attempt in range(3):
        try:
            return _sync_standard_traits(ctx)
        except db_exc.DBDuplicateEntry:
            continue
    return 0
