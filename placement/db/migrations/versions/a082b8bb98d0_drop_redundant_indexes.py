"""Drop indexes that duplicate unique constraints.

Revision ID: a082b8bb98d0
Revises: 422ece571366
"""
from alembic import op

revision = 'a082b8bb98d0'
down_revision = '422ece571366'
branch_labels = None
depends_on = None


def upgrade():
    op.drop_index('inventories_resource_provider_id_idx',
                  table_name='inventories')
    op.drop_index('inventories_resource_provider_resource_class_idx',
                  table_name='inventories')
    op.drop_index('ix_placement_aggregates_uuid',
                  table_name='placement_aggregates')
    op.drop_index('resource_providers_name_idx',
                  table_name='resource_providers')
    op.drop_index('resource_providers_uuid_idx',
                  table_name='resource_providers')
