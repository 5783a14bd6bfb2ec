"""The change triggers also log a provider renamed.

Not upstream's. A provider's name is not read by allocation candidates,
but the web view shows it and asks the change log what changed
(``GET /ops/ui/providers?since=``): with d7e2b9c41f05's triggers a
rename made anywhere stayed unseen by an open view. The triggers are
installed again as placement/db/change_triggers.py now writes them;
writes made while they were being replaced (MySQL commits each DDL
statement) may not be logged, so the epoch moves: every API process
reloads once.

Going back to d7e2b9c41f05 keeps these triggers: they only log more.

Revision ID: e4b8d2a6c913
Revises: d7e2b9c41f05
"""
from alembic import op

from placement.db import change_triggers

revision = 'e4b8d2a6c913'
down_revision = 'd7e2b9c41f05'
branch_labels = None
depends_on = None


def upgrade():
    change_triggers.reinstall(op.get_bind())


def downgrade():
    pass
