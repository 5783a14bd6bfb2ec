"""capacity_rules: the capacity formula and the unit rules, as values and
as SQL (run on SQLite here; the functional agreement test runs them on
every database)."""
import pytest
import sqlalchemy as sa

from placement.objects import capacity_rules as cr
from placement.objects.candidates import rules

_META = sa.MetaData()
_INV = sa.Table('inv', _META,
                sa.Column('total', sa.Integer), sa.Column('reserved',
                                                          sa.Integer),
                sa.Column('allocation_ratio', sa.Float),
                sa.Column('min_unit', sa.Integer),
                sa.Column('max_unit', sa.Integer),
                sa.Column('step_size', sa.Integer))

# (total, reserved, ratio, min_unit, max_unit, step_size): valid ones and
# the odd rows only SQL by hand writes.
ROWS = [
    (8, 0, 1.0, 1, 8, 1), (10, 2, 1.5, 2, 12, 2), (10, 0, 0.9, 1, 10, 3),
    (16, 16, 1.0, 1, 16, 1), (4, 6, 1.0, 1, 4, 1), (8, 0, 0.0, 1, 8, 1),
    (8, 0, 1.0, 1, 8, 0), (8, 0, 1.0, 1, 8, -2), (8, 0, 1.0, 6, 2, 1),
    (8, 0, -1.0, 1, 8, 1),
]
AMOUNTS = [1, 2, 3, 4, 6, 8, 9, 12]


def test_capacity_and_usable():
    assert cr.capacity(10, 2, 1.5) == 12.0
    assert cr.usable(10, 3, 1.5) == 10        # 10.5 truncated
    assert cr.usable(4, 6, 1.0) == -2
    assert cr.has_room(5, 3, 8.0) and not cr.has_room(5, 4, 8.0)


def test_mysql_float_ratio():
    """MySQL computes with the FLOAT's single precision: 10 * 0.9 is
    just under 9 there, 9 elsewhere."""
    assert cr.stored_ratio(0.9, mysql=False) == 0.9
    assert cr.capacity(10, 0, cr.stored_ratio(0.9, mysql=True)) < 9
    assert cr.stored_ratio(1.5, mysql=True) == 1.5
    inv = rules.inventory(10, 0, 0.9, 1, 10, 1, 0, single_precision=True)
    assert rules.capacity_left(inv, 9) is not None
    inv = rules.inventory(10, 0, 0.9, 1, 10, 1, 0)
    assert rules.capacity_left(inv, 9) is None


@pytest.mark.parametrize('step', [0, -1, -2])
def test_a_step_of_zero_or_less_admits_nothing(step):
    for amount in AMOUNTS:
        assert not cr.units_allow(amount, 1, 100, step)
        assert not cr.step_fits(amount, step)
    assert cr.largest_amount(50, 1, 100, step) == 0
    inv = rules.inventory(100, 0, 1.0, 1, 100, step, 0)
    assert not rules.serves(inv, 4)
    assert rules.step_size(inv, 4) == step
    assert rules.amount_level({1: inv}, 1, 4) == rules.OUTSIDE_UNITS


def test_units():
    assert cr.units_allow(4, 2, 8, 2)
    assert cr.units_allow(5, 2, 8, 1) and not cr.units_allow(5, 2, 8, 2)
    assert cr.unit_bound(1, 2, 8) == ('min_unit', 2)
    assert cr.unit_bound(9, 2, 8) == ('max_unit', 8)
    assert cr.unit_bound(3, 6, 2) == ('min_unit', 6)     # min > max
    assert not any(cr.units_allow(a, 6, 2, 1) for a in AMOUNTS)
    assert cr.largest_amount(7, 2, 8, 3) == 6
    assert cr.largest_amount(1, 2, 8, 1) == 0
    assert cr.largest_amount(-3, 1, 8, 1) == 0


def test_sql_forms_answer_as_the_python_ones():
    engine = sa.create_engine('sqlite://')
    _META.create_all(engine)
    with engine.begin() as conn:
        for row in ROWS:
            conn.execute(_INV.delete())
            conn.execute(_INV.insert().values(dict(zip(
                ('total', 'reserved', 'allocation_ratio', 'min_unit',
                 'max_unit', 'step_size'), row))))
            total, reserved, ratio, lo, hi, step = row
            for used in (0, 3):
                for amount in AMOUNTS:
                    got = conn.execute(sa.select(
                        sa.and_(cr.has_room_sql(_INV, sa.literal(used),
                                                amount),
                                cr.units_allow_sql(_INV, amount)),
                        sa.not_(cr.units_allow_sql(_INV, amount)),
                        cr.capacity_sql(_INV))).one()
                    want = (cr.has_room(used, amount, cr.capacity(
                        total, reserved, ratio))
                        and cr.units_allow(amount, lo, hi, step))
                    assert bool(got[0]) == want, (row, used, amount)
                    assert bool(got[1]) == (not cr.units_allow(
                        amount, lo, hi, step)), (row, amount)
                    assert got[2] == cr.capacity(total, reserved, ratio)
