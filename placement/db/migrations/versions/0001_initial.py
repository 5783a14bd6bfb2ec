"""The initial Placement schema: providers, inventories, allocations,
consumers, traits, resource classes and aggregates.

Revision ID: 0001_initial
Revises:
"""
from alembic import op
import sqlalchemy as sa

revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None


def _stamps():
    return [sa.Column('created_at', sa.DateTime),
            sa.Column('updated_at', sa.DateTime)]


def upgrade():
    op.create_table(
        'resource_classes',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False),
        sa.Column('name', sa.String(255), nullable=False),
        sa.UniqueConstraint('name', name='uniq_resource_classes0name'))
    op.create_table(
        'resource_providers',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('name', sa.Unicode(200), nullable=True),
        sa.Column('generation', sa.Integer),
        sa.Column('root_provider_id', sa.Integer,
                  sa.ForeignKey('resource_providers.id'), nullable=False),
        sa.Column('parent_provider_id', sa.Integer,
                  sa.ForeignKey('resource_providers.id'), nullable=True),
        sa.UniqueConstraint('uuid', name='uniq_resource_providers0uuid'),
        sa.UniqueConstraint('name', name='uniq_resource_providers0name'))
    op.create_index('resource_providers_name_idx', 'resource_providers',
                    ['name'])
    op.create_index('resource_providers_root_provider_id_idx',
                    'resource_providers', ['root_provider_id'])
    op.create_index('resource_providers_parent_provider_id_idx',
                    'resource_providers', ['parent_provider_id'])
    op.create_table(
        'inventories',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False),
        sa.Column('resource_provider_id', sa.Integer, nullable=False),
        sa.Column('resource_class_id', sa.Integer, nullable=False),
        sa.Column('total', sa.Integer, nullable=False),
        sa.Column('reserved', sa.Integer, nullable=False),
        sa.Column('min_unit', sa.Integer, nullable=False),
        sa.Column('max_unit', sa.Integer, nullable=False),
        sa.Column('step_size', sa.Integer, nullable=False),
        sa.Column('allocation_ratio', sa.Float, nullable=False),
        sa.UniqueConstraint(
            'resource_provider_id', 'resource_class_id',
            name='uniq_inventories0resource_provider_resource_class'))
    op.create_index('inventories_resource_class_id_idx', 'inventories',
                    ['resource_class_id'])
    op.create_table(
        'allocations',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False),
        sa.Column('resource_provider_id', sa.Integer, nullable=False),
        sa.Column('consumer_id', sa.String(36), nullable=False),
        sa.Column('resource_class_id', sa.Integer, nullable=False),
        sa.Column('used', sa.Integer, nullable=False))
    op.create_index('allocations_resource_provider_class_used_idx',
                    'allocations',
                    ['resource_provider_id', 'resource_class_id', 'used'])
    op.create_index('allocations_resource_class_id_idx', 'allocations',
                    ['resource_class_id'])
    op.create_index('allocations_consumer_id_idx', 'allocations',
                    ['consumer_id'])
    op.create_table(
        'resource_provider_aggregates',
        *_stamps(),
        sa.Column('resource_provider_id', sa.Integer, primary_key=True,
                  nullable=False),
        sa.Column('aggregate_id', sa.Integer, primary_key=True,
                  nullable=False))
    op.create_index('resource_provider_aggregates_aggregate_id_idx',
                    'resource_provider_aggregates', ['aggregate_id'])
    op.create_table(
        'placement_aggregates',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36)),
        sa.UniqueConstraint('uuid', name='uniq_placement_aggregates0uuid'))
    op.create_index(op.f('ix_placement_aggregates_uuid'),
                    'placement_aggregates', ['uuid'])
    op.create_table(
        'traits',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False,
                  autoincrement=True),
        sa.Column('name', sa.Unicode(255), nullable=False),
        sa.UniqueConstraint('name', name='uniq_traits0name'))
    op.create_table(
        'resource_provider_traits',
        *_stamps(),
        sa.Column('trait_id', sa.Integer, sa.ForeignKey('traits.id'),
                  primary_key=True, nullable=False),
        sa.Column('resource_provider_id', sa.Integer,
                  sa.ForeignKey('resource_providers.id'), primary_key=True,
                  nullable=False))
    op.create_index('resource_provider_traits_resource_provider_trait_idx',
                    'resource_provider_traits',
                    ['resource_provider_id', 'trait_id'])
    op.create_table(
        'projects',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False,
                  autoincrement=True),
        sa.Column('external_id', sa.String(255), nullable=False),
        sa.UniqueConstraint('external_id', name='uniq_projects0external_id'))
    op.create_table(
        'users',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False,
                  autoincrement=True),
        sa.Column('external_id', sa.String(255), nullable=False),
        sa.UniqueConstraint('external_id', name='uniq_users0external_id'))
    op.create_table(
        'consumer_types',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False,
                  autoincrement=True),
        sa.Column('name', sa.Unicode(255), nullable=False),
        sa.UniqueConstraint('name', name='uniq_consumer_types0name'))
    op.create_table(
        'consumers',
        *_stamps(),
        sa.Column('id', sa.Integer, primary_key=True, nullable=False,
                  autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False),
        sa.Column('project_id', sa.Integer, nullable=False),
        sa.Column('user_id', sa.Integer, nullable=False),
        sa.Column('generation', sa.Integer, nullable=False,
                  server_default='0'),
        sa.Column('consumer_type_id', sa.Integer,
                  sa.ForeignKey('consumer_types.id'), nullable=True),
        sa.UniqueConstraint('uuid', name='uniq_consumers0uuid'))
    op.create_index('consumers_project_id_uuid_idx', 'consumers',
                    ['project_id', 'uuid'])
    op.create_index('consumers_project_id_user_id_uuid_idx', 'consumers',
                    ['project_id', 'user_id', 'uuid'])
    op.create_index(op.f('ix_consumers_consumer_type_id'), 'consumers',
                    ['consumer_type_id'])
