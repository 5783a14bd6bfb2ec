"""Change counters and change log for the allocation-candidates index.

Not upstream's: every write to what allocation candidates read
(inventories, allocations, traits, aggregates, providers) counts itself
here, so each API process can keep the world in memory and refresh it
exactly (see placement/objects/candidates/world/). Upstream's
placement-manage ignores these tables.

The first revision of our own track. Releases before the track existed
recorded it in upstream's alembic_version, after upstream's a082b8bb98d0;
``migration.upgrade`` moves such a stamp here.

Revision ID: c3a1f0e2d4b7
Revises:
"""
from alembic import op
import sqlalchemy as sa

from placement.db import models

revision = 'c3a1f0e2d4b7'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    slots = op.create_table(
        'placement_change_slots',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('slot', sa.Integer, primary_key=True, autoincrement=False),
        sa.Column('seq', sa.BigInteger, nullable=False))
    op.create_table(
        'placement_changes',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('slot', sa.Integer, primary_key=True, autoincrement=False),
        sa.Column('seq', sa.BigInteger, primary_key=True,
                  autoincrement=False),
        sa.Column('resource_provider_id', sa.Integer, primary_key=True,
                  autoincrement=False))
    # Without the marks a later revision adds (f2c6a8e1d9b4).
    op.bulk_insert(slots, [{'slot': r['slot'], 'seq': r['seq']}
                           for r in models.change_slot_rows()])


def downgrade():
    op.drop_table('placement_changes')
    op.drop_table('placement_change_slots')
