"""An inventory's capacity and unit rules, defined once.

Everything that judges whether an amount fits an inventory asks here:
the candidate filters (candidates/rules.py for the world and explain,
candidates/sql.py for the SQL engine), ``GET /resource_providers?
resources=``, the claim check (allocation.py), the capacity report, the
audit and the inventory checks. Each rule has a Python form over values
and, where a statement needs it, a SQL form over an inventories table
(``inv``: ``models.INV`` or an alias of it).

Rows written by hand in SQL may hold what the API never writes. They are
answered alike everywhere, and never with a database error:

* ``step_size`` 0 or negative: no amount fits (SQL: ``amount %
  NULLIF(step_size, 0)`` never divides by zero; ``step_size > 0`` refuses
  the row in the same conjunction);
* ``min_unit`` above ``max_unit``: no amount fits;
* ``reserved`` above ``total`` or a ratio of 0 or less: the capacity is
  negative or 0, nothing fits;
* ``allocation_ratio`` is a FLOAT column: MySQL computes with its single
  precision value, other databases and every driver's value with the
  double (``stored_ratio``).
"""
import struct

import sqlalchemy as sa


def float32(value):
    """``value`` as MySQL computes with a FLOAT column: single precision,
    widened to double."""
    return struct.unpack('f', struct.pack('f', value))[0]


def stored_ratio(allocation_ratio, mysql):
    """The ratio a SQL statement multiplies by. MySQL's FLOAT column holds
    single precision and computes with it, while its driver hands Python
    the shortest decimal (1.1, not 1.100000023841858): a Python figure
    meant to match a statement's must be rounded here on MySQL."""
    return float32(allocation_ratio) if mysql else allocation_ratio


def capacity(total, reserved, allocation_ratio):
    """``(total - reserved) * allocation_ratio``, a float: what the claim
    check, the audit and the SQL filters compare usage with."""
    return (total - reserved) * allocation_ratio


def usable(total, reserved, allocation_ratio):
    """The capacity truncated to an integer, as upstream's
    Inventory.capacity: the inventory checks, the provider summaries'
    ``capacity`` and the combiner's room."""
    return int(capacity(total, reserved, allocation_ratio))


def has_room(used, amount, capacity_):
    """``amount`` more fits on ``used`` within ``capacity_``."""
    return used + amount <= capacity_


def reduces_overage(used, amount, used_before):
    """A claim over capacity is let through when it leaves the provider
    less over than before (``used_before``: the usage without the
    consumers rewritten), as upstream's."""
    return used_before is not None and used + amount <= used_before


def units_allow(amount, min_unit, max_unit, step_size):
    """``min_unit <= amount <= max_unit`` and ``amount`` a multiple of
    ``step_size``; a step of 0 or less (SQL by hand) admits nothing.
    (One expression, no calls: the world's search runs it per provider.)"""
    return (min_unit <= amount <= max_unit and step_size > 0
            and amount % step_size == 0)


def step_fits(amount, step_size):
    """units_allow's step rule alone, for a reason's wording."""
    return units_allow(amount, amount, amount, step_size)


def unit_bound(amount, min_unit, max_unit):
    """The bound of units_allow ``amount`` breaks, for a reason's wording:
    ('min_unit', min_unit), ('max_unit', max_unit) or None."""
    if amount < min_unit:
        return ('min_unit', min_unit)
    if amount > max_unit:
        return ('max_unit', max_unit)
    return None


def largest_amount(left, min_unit, max_unit, step_size):
    """The largest amount units_allow with at most ``left`` free; 0 when
    there is none."""
    if step_size <= 0:
        return 0
    most = min(left, max_unit)
    most -= most % step_size
    return most if most >= min_unit and most > 0 else 0


# -- the same as SQL expressions over an inventories table ----------------

def capacity_sql(inv):
    """capacity over ``inv``'s columns."""
    return (inv.c.total - inv.c.reserved) * inv.c.allocation_ratio


def has_room_sql(inv, used, amount):
    """has_room: ``used`` (an expression) plus ``amount`` within
    capacity_sql."""
    return used + amount <= capacity_sql(inv)


def units_allow_sql(inv, amount):
    """units_allow over ``inv``'s columns; never NULL (its negation is
    the audit's finding)."""
    step = inv.c.step_size
    return sa.and_(inv.c.min_unit <= amount, inv.c.max_unit >= amount,
                   step > 0, amount % sa.func.nullif(step, 0) == 0)
