"""Resource classes: os-resource-classes' standard ones keep their
library index as id; CUSTOM_* ones get ids from 10000 up."""
import os_resource_classes as orc
from oslo_db import exception as db_exc
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models

CUSTOM_ID_START = 10000


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
    for _attempt in range(3):
        try:
            return _sync_standard_classes(ctx)
        except db_exc.DBDuplicateEntry:
            continue
    return 0
