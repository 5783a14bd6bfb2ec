"""Each bump of a change counter leaves a random mark.

Not upstream's. A database restored from a backup, recovered to a point
in time or failed over to a lagging standby has its counters back where
they were; new writes then count them up to values an API process has
already seen, with other changes behind them, and "the counter is what I
last saw" no longer meant "nothing changed". With a random mark per bump
beside the counter (and on the log's rows), a process compares
(counter, mark): a copy of the database cannot repeat the mark of a bump
it does not hold (see placement/objects/changes.py). The triggers are
installed again to set the marks, which moves the epoch: every API
process reloads once.

Going back drops the marks and installs the triggers without them.

Revision ID: f2c6a8e1d9b4
Revises: e4b8d2a6c913
"""
from alembic import op
import sqlalchemy as sa

from placement.db import change_triggers

revision = 'f2c6a8e1d9b4'
down_revision = 'e4b8d2a6c913'
branch_labels = None
depends_on = None


def upgrade():
    for table in ('placement_change_slots', 'placement_changes'):
        op.add_column(table, sa.Column('mark', sa.BigInteger,
                                       nullable=False, server_default='0'))
    conn = op.get_bind()
    slots = sa.table('placement_change_slots', sa.column('slot'),
                     sa.column('mark'))
    for (slot,) in conn.execute(sa.select(slots.c.slot)).all():
        conn.execute(slots.update().where(slots.c.slot == slot).values(
            mark=change_triggers.random_mark()))
    change_triggers.reinstall(conn)


def downgrade():
    conn = op.get_bind()
    change_triggers.remove(conn)
    with op.batch_alter_table('placement_changes') as batch:
        batch.drop_column('mark')
    with op.batch_alter_table('placement_change_slots') as batch:
        batch.drop_column('mark')
    # Without the columns, install writes the triggers without marks.
    change_triggers.install(conn)
