"""A claim's rows, once allocation.apply_in_txn has checked them (its
steps 4 to 7): the consumers created, the old allocations deleted, the
new ones inserted and every generation compare-and-swapped, providers in
id order. A statement each; on PostgreSQL one round trip, a statement of
data-modifying CTEs, while the providers' lock is held.
"""
import sqlalchemy as sa

from placement.db import models
from placement import exception
from placement.objects import consumer as consumer_obj
from placement.objects import resource_provider as rp_obj

_ALLOC = models.ALLOC
_DELETE_ALLOCATIONS = _ALLOC.delete().where(
    _ALLOC.c.id.in_(sa.bindparam('ids', expanding=True)))


def write(ctx, now, created, old_ids, rows, touched, to_bump, in_one):
    """Write what apply_in_txn decided; ``in_one``: as one statement
    (PostgreSQL, when no consumer is left empty: removing those reads
    what the statement writes)."""
    if in_one:
        _write_in_one(ctx, now, created, old_ids, rows, touched, to_bump)
    else:
        _write_one_by_one(ctx, now, created, old_ids, rows, touched,
                          to_bump)


def _write_one_by_one(ctx, now, created, old_ids, rows, touched, to_bump):
    """Steps 4 to 7 of allocation.apply_in_txn, a statement each (a consumer
    creation and a generation per statement); providers in id order."""
    for uuid, project_id, user_id, type_id in created:
        consumer_obj.create_in_txn(
            ctx, uuid, project_id, user_id, type_id, generation=1)
    if old_ids:
        ctx.session.execute(_DELETE_ALLOCATIONS, {'ids': old_ids})
    if rows:
        ctx.session.execute(_ALLOC.insert(), rows)
    for rp_id in sorted(touched):
        rp = touched[rp_id]
        rp_obj.increment_generation(ctx, rp.id, rp.generation)
    for consumer_id, generation in to_bump:
        consumer_obj.increment_generation(ctx, consumer_id, generation)


def _write_in_one(ctx, now, created, old_ids, rows, touched, to_bump):
    """Steps 4 to 7 of allocation.apply_in_txn as one statement of
    data-modifying CTEs: the same rows and compare-and-swaps as
    _write_one_by_one, in one round trip while the providers' lock is
    held. Rows come as arrays (unnest). The CTEs share one snapshot: none
    reads what another writes, and none needs to (the emptied consumers'
    removal, which does, is left to its own statement)."""
    shape = (bool(created), bool(old_ids), bool(rows), bool(touched),
             bool(to_bump))
    if not any(shape):
        return
    params = {'now': now}
    if created:
        (params['c_uuids'], params['c_projects'], params['c_users'],
         params['c_types']) = (list(col) for col in zip(*created))
    if old_ids:
        params['old_ids'] = old_ids
    if rows:
        params['a_rps'] = [r['resource_provider_id'] for r in rows]
        params['a_consumers'] = [r['consumer_id'] for r in rows]
        params['a_rcs'] = [r['resource_class_id'] for r in rows]
        params['a_used'] = [r['used'] for r in rows]
    if touched:
        ids = sorted(touched)
        params['rp_ids'] = ids
        params['rp_gens'] = [touched[i].generation for i in ids]
    if to_bump:
        params['cg_ids'] = [c for c, _g in to_bump]
        params['cg_gens'] = [g for _c, g in to_bump]
    found = ctx.session.execute(_write_statement(shape), params).one()
    if found.providers != len(touched):
        raise exception.ResourceProviderConcurrentUpdateDetected()
    if found.consumers != len(to_bump):
        raise exception.ConcurrentUpdateDetected()


def _write_statement(shape):
    """The statement of _write_in_one, built once per shape (which of
    its parts the write needs)."""
    statement = _WRITE_STATEMENTS.get(shape)
    if statement is not None:
        return statement
    created, deleted, inserted, providers, bumped = shape
    ctes = []
    if created:
        ctes.append(
            'created AS (INSERT INTO consumers (uuid, project_id, user_id, '
            'consumer_type_id, generation, created_at) '
            'SELECT v.uuid, v.project_id, v.user_id, v.type_id, 1, :now '
            'FROM unnest(CAST(:c_uuids AS VARCHAR[]), '
            'CAST(:c_projects AS INTEGER[]), CAST(:c_users AS INTEGER[]), '
            'CAST(:c_types AS INTEGER[])) '
            'AS v(uuid, project_id, user_id, type_id))')
    if deleted:
        ctes.append('deleted AS (DELETE FROM allocations '
                    'WHERE id = ANY(CAST(:old_ids AS INTEGER[])))')
    if inserted:
        ctes.append(
            'inserted AS (INSERT INTO allocations (resource_provider_id, '
            'consumer_id, resource_class_id, used, created_at) '
            'SELECT v.rp, v.consumer, v.rc, v.used, :now '
            'FROM unnest(CAST(:a_rps AS INTEGER[]), '
            'CAST(:a_consumers AS VARCHAR[]), CAST(:a_rcs AS INTEGER[]), '
            'CAST(:a_used AS INTEGER[])) AS v(rp, consumer, rc, used))')
    counts = []
    for name, table, ids, gens, wanted in (
            ('providers', 'resource_providers', 'rp_ids', 'rp_gens',
             providers),
            ('consumers', 'consumers', 'cg_ids', 'cg_gens', bumped)):
        if not wanted:
            counts.append('0 AS %s' % name)
            continue
        ctes.append(
            'bumped_%(name)s AS (UPDATE %(table)s AS t '
            'SET generation = v.generation + 1, updated_at = :now '
            'FROM unnest(CAST(:%(ids)s AS INTEGER[]), '
            'CAST(:%(gens)s AS INTEGER[])) AS v(id, generation) '
            'WHERE t.id = v.id AND t.generation = v.generation '
            'RETURNING t.id)'
            % {'name': name, 'table': table, 'ids': ids, 'gens': gens})
        counts.append('(SELECT count(*) FROM bumped_%s) AS %s'
                      % (name, name))
    statement = sa.text('WITH %s SELECT %s' % (
        ', '.join(ctes), ', '.join(counts)))
    _WRITE_STATEMENTS[shape] = statement
    return statement


_WRITE_STATEMENTS = {}
