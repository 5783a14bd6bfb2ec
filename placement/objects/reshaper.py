"""Reshape: replace the inventories of some providers and the allocations
of some consumers in one transaction, as nova does when it moves VGPU
inventory (and the allocations against it) from a compute node to child
providers.

Inventory cannot be removed while allocated and allocations cannot be made
against inventory that does not exist yet, so the work goes in three steps
inside one writer transaction: an interim inventory that is the union of
the old and the new, then the allocations, then the final inventory. If
the end state is over capacity or still allocates removed inventory, the
whole thing rolls back.
"""
import types

from placement.db import api as db_api
from placement import exception
from placement.objects import allocation as alloc_obj
from placement.objects import inventory as inv_obj
from placement.objects import resource_provider as rp_obj


def _current(ctx, rp_uuid):
    """The provider as seen inside this transaction (its generation moves
    as each step bumps it)."""
    row = rp_obj.get_by_uuid(ctx, rp_uuid)
    return types.SimpleNamespace(id=row.id, uuid=row.uuid,
                                 generation=row.generation)


def reshape(ctx, inventories, writes):
    """``inventories``: {provider uuid: (expected generation,
    {class: record})}; ``writes``: [alloc_obj.ConsumerWrite].

    Raises ResourceProviderConcurrentUpdateDetected when a provider's
    generation is not the expected one (or moves under us),
    InventoryInUse, ResourceClassNotFound, and whatever the allocation
    write raises.
    """
    owners = alloc_obj.resolve_owners(ctx, writes)
    return _reshape_txn(ctx, inventories, writes, owners)


@db_api.retry_on_deadlock
@db_api.writer
def _reshape_txn(ctx, inventories, writes, owners):
    # 1. Interim inventory: every class old or new, new values winning.
    for rp_uuid, (generation, new) in inventories.items():
        rp = _current(ctx, rp_uuid)
        if rp.generation != generation:
            raise exception.ResourceProviderConcurrentUpdateDetected()
        if not new:
            continue
        union = {r['resource_class']: {f: r[f] for f in inv_obj.FIELDS}
                 for r in inv_obj.get_all(ctx, rp.id)}
        union.update(new)
        inv_obj.set_all(ctx, rp, union)

    # 2. The allocations, against the interim inventory.
    alloc_obj.apply_in_txn(ctx, writes, owners)

    # 3. Final inventory: exactly what was asked for; removing a class
    # that is still allocated fails with InventoryInUse.
    for rp_uuid, (_generation, new) in inventories.items():
        inv_obj.set_all(ctx, _current(ctx, rp_uuid), new)
