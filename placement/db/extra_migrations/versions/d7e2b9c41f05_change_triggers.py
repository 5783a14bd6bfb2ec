"""Triggers that count every write to what allocation candidates read.

Not upstream's: on resource_providers, inventories, allocations,
resource_provider_traits and resource_provider_aggregates they bump the
change counters and log the providers written; a rename of a resource
class or trait moves the epoch. So every writer is counted -- ours,
upstream's nodes during a rolling upgrade, SQL by hand -- with nothing
for it to remember (see placement/db/change_triggers.py). Upstream's
writes keep working; they only log more.

Writes committed before the triggers were not all counted, so the epoch
moves: every API process reloads its world once.

Revision ID: d7e2b9c41f05
Revises: c3a1f0e2d4b7
"""
from alembic import op

from placement.db import change_triggers

revision = 'd7e2b9c41f05'
down_revision = 'c3a1f0e2d4b7'
branch_labels = None
depends_on = None


def upgrade():
    change_triggers.reinstall(op.get_bind())


def downgrade():
    change_triggers.remove(op.get_bind())
