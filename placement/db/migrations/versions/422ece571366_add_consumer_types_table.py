"""Consumer types (microversion 1.38).

Revision ID: 422ece571366
Revises: b5c396305c25
"""
from alembic import op
import sqlalchemy as sa

revision = '422ece571366'
down_revision = 'b5c396305c25'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'consumer_types',
        sa.Column('created_at', sa.DateTime, nullable=True),
        sa.Column('updated_at', sa.DateTime, nullable=True),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('name', sa.Unicode(255), nullable=False),
        sa.UniqueConstraint('name', name='uniq_consumer_types0name'))
    with op.batch_alter_table('consumers') as batch:
        batch.add_column(sa.Column(
            'consumer_type_id', sa.Integer,
            sa.ForeignKey('consumer_types.id',
                          name='consumers_consumer_type_id_fkey'),
            nullable=True))
    op.create_index('consumers_consumer_type_id_idx', 'consumers',
                    ['consumer_type_id'])
