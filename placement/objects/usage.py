"""Usage sums: per provider, and per project (and user, and from 1.38
consumer type). Every query groups only by what it selects, so it runs on
PostgreSQL's strict GROUP BY as on SQLite and MySQL."""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models

_ALLOC = models.ALLOC
_INV = models.INV
_RC = models.RC
_CONSUMER = models.CONSUMER
_PROJECT = models.PROJECT
_USER = models.USER
_CTYPE = models.CONSUMER_TYPE

# What a consumer without a type is reported as.
UNKNOWN_TYPE = 'unknown'
ALL_TYPES = 'all'


@db_api.reader
def get_for_provider(ctx, rp_id):
    """{class name: used} for every class the provider has inventory of
    (0 when nothing is allocated)."""
    used = (sa.select(_ALLOC.c.resource_class_id,
                      sa.func.sum(_ALLOC.c.used).label('used'))
            .where(_ALLOC.c.resource_provider_id == rp_id)
            .group_by(_ALLOC.c.resource_class_id)
            .subquery('used'))
    rows = ctx.session.execute(
        sa.select(_RC.c.name, sa.func.coalesce(used.c.used, 0))
        .select_from(
            _INV.join(_RC, _INV.c.resource_class_id == _RC.c.id)
            .outerjoin(used, used.c.resource_class_id
                       == _INV.c.resource_class_id))
        .where(_INV.c.resource_provider_id == rp_id))
    return {name: int(amount) for name, amount in rows}


def _project_allocations(project_id, user_id):
    """FROM and WHERE of the allocations of a project (and user, unless
    None): values or bound parameters."""
    source = (_ALLOC.join(_CONSUMER, _ALLOC.c.consumer_id == _CONSUMER.c.uuid)
              .join(_PROJECT, _CONSUMER.c.project_id == _PROJECT.c.id))
    where = [_PROJECT.c.external_id == project_id]
    if user_id is not None:
        source = source.join(_USER, _CONSUMER.c.user_id == _USER.c.id)
        where.append(_USER.c.external_id == user_id)
    return source, where


def _project_sums(with_user):
    source, where = _project_allocations(
        sa.bindparam('project_id'),
        sa.bindparam('user_id') if with_user else None)
    return (sa.select(_RC.c.name, sa.func.sum(_ALLOC.c.used))
            .select_from(source.join(_RC, _ALLOC.c.resource_class_id
                                     == _RC.c.id))
            .where(*where)
            .group_by(_RC.c.name))


# Built once (quota counting asks for every boot): by project, and by
# project and user.
_PROJECT_SUMS = {False: _project_sums(False), True: _project_sums(True)}


def get_for_project(ctx, project_id, user_id=None):
    """{class name: used} over all the project's (user's) consumers, in
    one statement (db_api.one_statement_read)."""
    rows = db_api.one_statement_read(
        ctx, _PROJECT_SUMS[bool(user_id)],
        {'project_id': project_id, 'user_id': user_id})
    return {name: int(amount) for name, amount in rows}


@db_api.reader
def get_for_project_by_type(ctx, project_id, user_id=None,
                            consumer_type=None):
    """{type: {class name: used, 'consumer_count': n}} (1.38).

    consumer_type None: one entry per type (untyped consumers under
    'unknown'); 'all': everything under 'all'; 'unknown': only untyped
    consumers; any other name: only that type.
    """
    source, where = _project_allocations(project_id, user_id or None)
    source = source.outerjoin(_CTYPE,
                              _CONSUMER.c.consumer_type_id == _CTYPE.c.id)
    if consumer_type == ALL_TYPES:
        # One bucket: group by nothing and name it in Python (a bound
        # literal in GROUP BY is refused by PostgreSQL).
        group = []
    else:
        group = [sa.func.coalesce(_CTYPE.c.name, UNKNOWN_TYPE)
                 .label('ctype')]
        if consumer_type == UNKNOWN_TYPE:
            where.append(_CONSUMER.c.consumer_type_id.is_(None))
        elif consumer_type:
            where.append(_CTYPE.c.name == consumer_type)

    def bucket(row):
        return row[0] if group else ALL_TYPES

    # Consumers are counted on their own: one consumer of two classes is
    # still one consumer.
    counts = {}
    for row in ctx.session.execute(
            sa.select(*group,
                      sa.func.count(sa.distinct(_ALLOC.c.consumer_id)))
            .select_from(source).where(*where).group_by(*group)):
        counts[bucket(row)] = int(row[-1])
    result = {}
    for row in ctx.session.execute(
            sa.select(*group, _RC.c.name, sa.func.sum(_ALLOC.c.used))
            .select_from(source.join(_RC, _ALLOC.c.resource_class_id
                                     == _RC.c.id))
            .where(*where)
            .group_by(*group, _RC.c.name)):
        ctype = bucket(row)
        entry = result.setdefault(
            ctype, {'consumer_count': counts.get(ctype, 0)})
        entry[row[-2]] = int(row[-1])
    return result
