"""Resource providers: the rows, trees and generations that every other
resource hangs off."""
import sqlalchemy as sa

from placement.db import api as db_api
from placement.db import models
from placement import exception

_RP = models.RP
_PARENT = _RP.alias('parent')
_ROOT = _RP.alias('root')

_PROVIDER_COLUMNS = (
    _RP.c.id, _RP.c.uuid, _RP.c.name, _RP.c.generation,
    _RP.c.parent_provider_id, _RP.c.root_provider_id,
    _RP.c.created_at, _RP.c.updated_at,
    _PARENT.c.uuid.label('parent_provider_uuid'),
    _ROOT.c.uuid.label('root_provider_uuid'),
)
_PROVIDER_FROM = _RP.outerjoin(
    _PARENT, _RP.c.parent_provider_id == _PARENT.c.id).join(
    _ROOT, _RP.c.root_provider_id == _ROOT.c.id)


def provider_select():
    """SELECT of provider rows with parent and root uuids, for reuse."""
    return sa.select(*_PROVIDER_COLUMNS).select_from(_PROVIDER_FROM)


@db_api.reader
def get_by_uuid(ctx, uuid):
    """One provider as a Row (id, uuid, name, generation, parent/root ids
    and uuids, timestamps); ResourceProviderNotFound if there is none."""
    row = ctx.session.execute(
        provider_select().where(_RP.c.uuid == uuid)).first()
    if row is None:
        raise exception.ResourceProviderNotFound(uuid=uuid)
    return row


def increment_generation(ctx, rp_id, expected_generation):
    """Compare-and-swap the provider generation inside the caller's writer
    transaction; the new generation, or ResourceProviderConcurrentUpdate-
    Detected when someone else changed the provider first. Every write to a
    provider's inventories, traits, aggregates or allocations goes through
    here, which is what makes concurrent writers safe."""
    result = ctx.session.execute(
        _RP.update()
        .where(_RP.c.id == rp_id)
        .where(_RP.c.generation == expected_generation)
        .values(generation=expected_generation + 1,
                updated_at=models._now()))
    if result.rowcount != 1:
        raise exception.ResourceProviderConcurrentUpdateDetected()
    return expected_generation + 1
