"""Initial schema: providers, inventories, allocations, consumers, projects,
users, traits, resource classes and aggregates.

Revision ids follow upstream Placement's migration chain so that a database
created by either service is recognised and upgraded by the other.

Revision ID: b4ed3a175331
Revises:
"""
from alembic import op
import sqlalchemy as sa

revision = 'b4ed3a175331'
down_revision = None
branch_labels = None
depends_on = None


def _table(name, *columns):
    op.create_table(name,
                    sa.Column('created_at', sa.DateTime, nullable=True),
                    sa.Column('updated_at', sa.DateTime, nullable=True),
                    *columns)


def upgrade():
    _table('allocations',
           sa.Column('id', sa.Integer, primary_key=True),
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

    _table('consumers',
           sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
           sa.Column('uuid', sa.String(36), nullable=False),
           sa.Column('project_id', sa.Integer, nullable=False),
           sa.Column('user_id', sa.Integer, nullable=False),
           sa.Column('generation', sa.Integer, nullable=False,
                     server_default=sa.text('0')),
           sa.UniqueConstraint('uuid', name='uniq_consumers0uuid'))
    op.create_index('consumers_project_id_user_id_uuid_idx', 'consumers',
                    ['project_id', 'user_id', 'uuid'])
    op.create_index('consumers_project_id_uuid_idx', 'consumers',
                    ['project_id', 'uuid'])

    _table('inventories',
           sa.Column('id', sa.Integer, primary_key=True),
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
    op.create_index('inventories_resource_provider_id_idx', 'inventories',
                    ['resource_provider_id'])
    op.create_index('inventories_resource_provider_resource_class_idx',
                    'inventories', ['resource_provider_id',
                                    'resource_class_id'])

    _table('placement_aggregates',
           sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
           sa.Column('uuid', sa.String(36), nullable=True),
           sa.UniqueConstraint('uuid', name='uniq_placement_aggregates0uuid'))
    op.create_index('ix_placement_aggregates_uuid', 'placement_aggregates',
                    ['uuid'])

    _table('projects',
           sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
           sa.Column('external_id', sa.String(255), nullable=False),
           sa.UniqueConstraint('external_id',
                               name='uniq_projects0external_id'))

    _table('resource_classes',
           sa.Column('id', sa.Integer, primary_key=True),
           sa.Column('name', sa.String(255), nullable=False),
           sa.UniqueConstraint('name', name='uniq_resource_classes0name'))

    _table('resource_provider_aggregates',
           sa.Column('resource_provider_id', sa.Integer, primary_key=True),
           sa.Column('aggregate_id', sa.Integer, primary_key=True))
    op.create_index('resource_provider_aggregates_aggregate_id_idx',
                    'resource_provider_aggregates', ['aggregate_id'])

    _table('resource_providers',
           sa.Column('id', sa.Integer, primary_key=True),
           sa.Column('uuid', sa.String(36), nullable=False),
           sa.Column('name', sa.Unicode(200), nullable=True),
           sa.Column('generation', sa.Integer, nullable=True),
           sa.Column('root_provider_id', sa.Integer,
                     sa.ForeignKey('resource_providers.id'), nullable=True),
           sa.Column('parent_provider_id', sa.Integer,
                     sa.ForeignKey('resource_providers.id'), nullable=True),
           sa.UniqueConstraint('name', name='uniq_resource_providers0name'),
           sa.UniqueConstraint('uuid', name='uniq_resource_providers0uuid'))
    op.create_index('resource_providers_name_idx', 'resource_providers',
                    ['name'])
    op.create_index('resource_providers_parent_provider_id_idx',
                    'resource_providers', ['parent_provider_id'])
    op.create_index('resource_providers_root_provider_id_idx',
                    'resource_providers', ['root_provider_id'])
    op.create_index('resource_providers_uuid_idx', 'resource_providers',
                    ['uuid'])

    _table('traits',
           sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
           sa.Column('name', sa.Unicode(255), nullable=False),
           sa.UniqueConstraint('name', name='uniq_traits0name'))

    _table('users',
           sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
           sa.Column('external_id', sa.String(255), nullable=False),
           sa.UniqueConstraint('external_id', name='uniq_users0external_id'))

    _table('resource_provider_traits',
           sa.Column('trait_id', sa.Integer, sa.ForeignKey('traits.id'),
                     primary_key=True),
           sa.Column('resource_provider_id', sa.Integer,
                     sa.ForeignKey('resource_providers.id'),
                     primary_key=True))
    op.create_index('resource_provider_traits_resource_provider_trait_idx',
                    'resource_provider_traits',
                    ['resource_provider_id', 'trait_id'])
