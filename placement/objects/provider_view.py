"""Every provider at once, and then only what changed: the data of the web
view (``/ops/ui/providers``, handlers/provider_view.py).

An open view must show a write made anywhere (another API node, the CLI,
SQL by hand) within seconds, without re-reading 20,000 providers every few
seconds. The change counters the database triggers keep
(``objects/changes.py``) say which providers changed since a position; the
view holds that position as an opaque ``token`` and asks again with it.

The token is the epoch and every slot's counter, each with its mark
(a restored database does not repeat them), read *before* the providers: a write committed between the two reads is in the data and in
the next answer too (shown twice, never missed).

Sizes: at 20,000 providers a full answer is some 4 MB, so it is compact:
each inventory is one list ``[total, reserved, allocation_ratio,
min_unit, max_unit, step_size, used]``, and traits and aggregates are
indexes into the answer's ``trait_names`` and ``aggregate_uuids``.
"""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement.objects import changes

_RP = models.RP
_INV = models.INV
_ALLOC = models.ALLOC
_RPT = models.RPT
_RPA = models.RPA
_RC = models.RC
_TRAIT = models.TRAIT
_AGG = models.AGG
_CONSUMER = models.CONSUMER
_PROJECT = models.PROJECT
_USER = models.USER
_CTYPE = models.CONSUMER_TYPE

# Providers read per statement when only some changed.
_CHUNK = 500


class BadToken(ValueError):
    """A token this service did not hand out."""


def encode_token(epoch, slots):
    """``counter.mark`` in hex, for the epoch and then each slot."""
    return '-'.join('%x.%x' % pair for pair in [epoch] + [
        slots.get(s, (0, 0)) for s in range(changes.SLOTS)])


def decode_token(token):
    """(epoch, {slot: (counter, mark)}); BadToken when malformed. A token
    of a release before the marks (counters alone) decodes with no marks:
    an answer to it is full."""
    parts = token.split('-')
    if len(parts) != changes.SLOTS + 1:
        raise BadToken(token)
    try:
        pairs = [tuple(int(n, 16) for n in p.split('.')) for p in parts]
    except ValueError:
        raise BadToken(token)
    if all(len(p) == 1 for p in pairs):
        pairs = [(p[0], None) for p in pairs]
    elif any(len(p) != 2 for p in pairs):
        raise BadToken(token)
    if any(p[0] < 0 or (p[1] or 0) < 0 for p in pairs):
        raise BadToken(token)
    return pairs[0], dict(enumerate(pairs[1:]))


def _changed_ids(conn, since, current):
    """Ids of the providers changed between counters ``since`` and
    ``current``, or None when the log cannot say (pruned past them)."""
    if changes.behind(since, current) is None:
        return None
    return changes.logged(conn, since, current)


def _read(conn, ids):
    """The providers ``ids`` (all if None) as the answer lists them."""
    parent = _RP.alias('parent')
    chunks = [None] if ids is None else [
        sorted(ids)[i:i + _CHUNK] for i in range(0, len(ids), _CHUNK)]
    rps, invs, used, traits, aggs = [], [], [], [], []
    for chunk in chunks:
        def only(col):
            return [] if chunk is None else [col.in_(chunk)]
        rps += conn.execute(sa.select(
            _RP.c.id, _RP.c.uuid, _RP.c.name, _RP.c.generation,
            parent.c.uuid).select_from(_RP.outerjoin(
                parent, _RP.c.parent_provider_id == parent.c.id)).where(
            *only(_RP.c.id))).all()
        invs += conn.execute(sa.select(
            _INV.c.resource_provider_id, _RC.c.name, _INV.c.total,
            _INV.c.reserved, _INV.c.allocation_ratio, _INV.c.min_unit,
            _INV.c.max_unit, _INV.c.step_size).select_from(_INV.join(
                _RC, _RC.c.id == _INV.c.resource_class_id)).where(
            *only(_INV.c.resource_provider_id))).all()
        used += conn.execute(sa.select(
            _ALLOC.c.resource_provider_id, _RC.c.name,
            sa.func.sum(_ALLOC.c.used)).select_from(_ALLOC.join(
                _RC, _RC.c.id == _ALLOC.c.resource_class_id)).where(
            *only(_ALLOC.c.resource_provider_id)).group_by(
            _ALLOC.c.resource_provider_id, _RC.c.name)).all()
        traits += conn.execute(sa.select(
            _RPT.c.resource_provider_id, _TRAIT.c.name).select_from(
            _RPT.join(_TRAIT, _TRAIT.c.id == _RPT.c.trait_id)).where(
            *only(_RPT.c.resource_provider_id))).all()
        aggs += conn.execute(sa.select(
            _RPA.c.resource_provider_id, _AGG.c.uuid).select_from(
            _RPA.join(_AGG, _AGG.c.id == _RPA.c.aggregate_id)).where(
            *only(_RPA.c.resource_provider_id))).all()

    by_id = {}
    out = []
    for rp_id, uuid, name, generation, parent_uuid in rps:
        rec = {'id': rp_id, 'uuid': uuid, 'name': name,
               'generation': generation,
               'parent_provider_uuid': parent_uuid,
               'inventories': {}, 'traits': [], 'aggregates': []}
        by_id[rp_id] = rec
        out.append(rec)
    for rp_id, rc, total, reserved, ratio, lo, hi, step in invs:
        if rp_id in by_id:
            by_id[rp_id]['inventories'][rc] = [
                total, reserved, ratio, lo, hi, step, 0]
    for rp_id, rc, amount in used:
        inv = by_id.get(rp_id, {}).get('inventories', {}).get(rc)
        if inv is not None:
            inv[6] = int(amount)
        elif rp_id in by_id:
            # Used without inventory (upstream allows deleting none such,
            # but SQL by hand may): shown, with no capacity.
            by_id[rp_id]['inventories'][rc] = [0, 0, 1.0, 1, 0, 1,
                                               int(amount)]
    trait_index, agg_index = {}, {}
    for rp_id, name in traits:
        if rp_id in by_id:
            by_id[rp_id]['traits'].append(
                trait_index.setdefault(name, len(trait_index)))
    for rp_id, agg in aggs:
        if rp_id in by_id:
            by_id[rp_id]['aggregates'].append(
                agg_index.setdefault(agg, len(agg_index)))
    return out, list(trait_index), list(agg_index)


@db_api.reader
def providers(ctx, since=None):
    """Every provider, or (with a ``since`` token) only those changed
    since; see the module's docstring for the answer's shape."""
    conn = ctx.session.connection()
    counted = changes.counted(conn)
    token = None
    ids = None
    removed_from = None
    if counted:
        epoch, current = changes.counters(conn)
        epoch = epoch or (0, 0)
        token = encode_token(epoch, current)
        if since is not None:
            old_epoch, old = since
            if old_epoch == epoch:
                ids = _changed_ids(conn, old, current)
                removed_from = ids
    rps, trait_names, agg_uuids = _read(conn, ids)
    removed = []
    if removed_from:
        removed = sorted(removed_from - {rp['id'] for rp in rps})
    return {
        'token': token,
        'full': ids is None,
        'providers': rps,
        'removed': removed,
        'trait_names': trait_names,
        'aggregate_uuids': agg_uuids,
    }


@db_api.reader
def consumers_of(ctx, rp_uuid):
    """The consumers of provider ``rp_uuid`` with their project, user,
    type and what they hold on it; None when there is no such provider."""
    rp_id = ctx.session.execute(sa.select(_RP.c.id).where(
        _RP.c.uuid == rp_uuid)).scalar()
    if rp_id is None:
        return None
    rows = ctx.session.execute(sa.select(
        _ALLOC.c.consumer_id, _RC.c.name, _ALLOC.c.used,
        _PROJECT.c.external_id, _USER.c.external_id, _CTYPE.c.name,
        _CONSUMER.c.generation).select_from(
        _ALLOC.join(_RC, _RC.c.id == _ALLOC.c.resource_class_id)
        .outerjoin(_CONSUMER, _CONSUMER.c.uuid == _ALLOC.c.consumer_id)
        .outerjoin(_PROJECT, _PROJECT.c.id == _CONSUMER.c.project_id)
        .outerjoin(_USER, _USER.c.id == _CONSUMER.c.user_id)
        .outerjoin(_CTYPE, _CTYPE.c.id == _CONSUMER.c.consumer_type_id))
        .where(_ALLOC.c.resource_provider_id == rp_id)).all()
    out = {}
    for consumer, rc, n, project, user, ctype, gen in rows:
        rec = out.setdefault(consumer, {
            'consumer_uuid': consumer, 'project_id': project,
            'user_id': user, 'consumer_type': ctype,
            'consumer_generation': gen, 'resources': {}})
        rec['resources'][rc] = rec['resources'].get(rc, 0) + int(n)
    return sorted(out.values(), key=lambda c: c['consumer_uuid'])
