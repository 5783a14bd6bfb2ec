"""The whole Placement data model, table for table as upstream's schema
(as its migrations leave it at revision a082b8bb98d0), plus our own change
counters for the allocation-candidates index (revision c3a1f0e2d4b7 of our
own track, placement/db/extra_migrations).

Keeping upstream's table and column names means a database that upstream's
``placement-manage db sync`` created can be served by us, and the other way.
Indexes are chosen for the allocation-candidate queries: capacity lookups by
(provider, class), usage sums by (provider, class), trait and aggregate
membership by either side.
"""

import sqlalchemy as sa
from sqlalchemy import orm

from oslo_db.sqlalchemy import models as oslo_models
from oslo_utils import timeutils

from placement.db import change_triggers


def _now():
    return timeutils.utcnow()


class _Base(oslo_models.ModelBase):
    created_at = sa.Column(sa.DateTime, default=_now)
    updated_at = sa.Column(sa.DateTime, onupdate=_now)


BASE = orm.declarative_base(cls=_Base)


class ResourceClass(BASE):
    """Standard classes use os-resource-classes ids; custom ones 10000+."""
    __tablename__ = 'resource_classes'
    __table_args__ = (
        sa.UniqueConstraint('name', name='uniq_resource_classes0name'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False)
    name = sa.Column(sa.String(255), nullable=False)


class ResourceProvider(BASE):
    __tablename__ = 'resource_providers'
    __table_args__ = (
        sa.Index('resource_providers_root_provider_id_idx',
                 'root_provider_id'),
        sa.Index('resource_providers_parent_provider_id_idx',
                 'parent_provider_id'),
        sa.UniqueConstraint('uuid', name='uniq_resource_providers0uuid'),
        sa.UniqueConstraint('name', name='uniq_resource_providers0name'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False)
    uuid = sa.Column(sa.String(36), nullable=False)
    name = sa.Column(sa.Unicode(200), nullable=True)
    generation = sa.Column(sa.Integer, default=0)
    # Nullable in the schema (as upstream's); every provider we write has one.
    root_provider_id = sa.Column(
        sa.Integer, sa.ForeignKey('resource_providers.id'), nullable=True)
    parent_provider_id = sa.Column(
        sa.Integer, sa.ForeignKey('resource_providers.id'), nullable=True)


class Inventory(BASE):
    __tablename__ = 'inventories'
    __table_args__ = (
        sa.Index('inventories_resource_class_id_idx', 'resource_class_id'),
        sa.UniqueConstraint(
            'resource_provider_id', 'resource_class_id',
            name='uniq_inventories0resource_provider_resource_class'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False)
    resource_provider_id = sa.Column(sa.Integer, nullable=False)
    resource_class_id = sa.Column(sa.Integer, nullable=False)
    total = sa.Column(sa.Integer, nullable=False)
    reserved = sa.Column(sa.Integer, nullable=False)
    min_unit = sa.Column(sa.Integer, nullable=False)
    max_unit = sa.Column(sa.Integer, nullable=False)
    step_size = sa.Column(sa.Integer, nullable=False)
    allocation_ratio = sa.Column(sa.Float, nullable=False)


class Allocation(BASE):
    __tablename__ = 'allocations'
    __table_args__ = (
        sa.Index('allocations_resource_provider_class_used_idx',
                 'resource_provider_id', 'resource_class_id', 'used'),
        sa.Index('allocations_resource_class_id_idx', 'resource_class_id'),
        sa.Index('allocations_consumer_id_idx', 'consumer_id'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False)
    resource_provider_id = sa.Column(sa.Integer, nullable=False)
    consumer_id = sa.Column(sa.String(36), nullable=False)
    resource_class_id = sa.Column(sa.Integer, nullable=False)
    used = sa.Column(sa.Integer, nullable=False)


class ResourceProviderAggregate(BASE):
    __tablename__ = 'resource_provider_aggregates'
    __table_args__ = (
        sa.Index('resource_provider_aggregates_aggregate_id_idx',
                 'aggregate_id'),
    )
    resource_provider_id = sa.Column(sa.Integer, primary_key=True,
                                     nullable=False)
    aggregate_id = sa.Column(sa.Integer, primary_key=True, nullable=False)


class PlacementAggregate(BASE):
    __tablename__ = 'placement_aggregates'
    __table_args__ = (
        sa.UniqueConstraint('uuid', name='uniq_placement_aggregates0uuid'),
    )
    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    uuid = sa.Column(sa.String(36))


class Trait(BASE):
    __tablename__ = 'traits'
    __table_args__ = (
        sa.UniqueConstraint('name', name='uniq_traits0name'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False,
                   autoincrement=True)
    name = sa.Column(sa.Unicode(255), nullable=False)


class ResourceProviderTrait(BASE):
    __tablename__ = 'resource_provider_traits'
    __table_args__ = (
        sa.Index('resource_provider_traits_resource_provider_trait_idx',
                 'resource_provider_id', 'trait_id'),
    )
    trait_id = sa.Column(sa.Integer, sa.ForeignKey('traits.id'),
                         primary_key=True, nullable=False)
    resource_provider_id = sa.Column(
        sa.Integer, sa.ForeignKey('resource_providers.id'),
        primary_key=True, nullable=False)


class Project(BASE):
    __tablename__ = 'projects'
    __table_args__ = (
        sa.UniqueConstraint('external_id', name='uniq_projects0external_id'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False,
                   autoincrement=True)
    external_id = sa.Column(sa.String(255), nullable=False)


class User(BASE):
    __tablename__ = 'users'
    __table_args__ = (
        sa.UniqueConstraint('external_id', name='uniq_users0external_id'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False,
                   autoincrement=True)
    external_id = sa.Column(sa.String(255), nullable=False)


class Consumer(BASE):
    __tablename__ = 'consumers'
    __table_args__ = (
        sa.Index('consumers_project_id_uuid_idx', 'project_id', 'uuid'),
        sa.Index('consumers_project_id_user_id_uuid_idx', 'project_id',
                 'user_id', 'uuid'),
        sa.Index('consumers_consumer_type_id_idx', 'consumer_type_id'),
        sa.UniqueConstraint('uuid', name='uniq_consumers0uuid'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False,
                   autoincrement=True)
    uuid = sa.Column(sa.String(36), nullable=False)
    project_id = sa.Column(sa.Integer, nullable=False)
    user_id = sa.Column(sa.Integer, nullable=False)
    generation = sa.Column(sa.Integer, nullable=False, server_default='0',
                           default=0)
    consumer_type_id = sa.Column(
        sa.Integer, sa.ForeignKey('consumer_types.id',
                                  name='consumers_consumer_type_id_fkey'),
        nullable=True)


class ConsumerType(BASE):
    __tablename__ = 'consumer_types'
    __table_args__ = (
        sa.UniqueConstraint('name', name='uniq_consumer_types0name'),
    )
    id = sa.Column(sa.Integer, primary_key=True, nullable=False,
                   autoincrement=True)
    name = sa.Column(sa.Unicode(255), nullable=False)


class ChangeSlot(BASE):
    """Counters of committed changes to what allocation candidates read,
    one per slot of providers (provider id mod change_triggers.SLOTS),
    bumped by the triggers of placement/db/change_triggers.py; slot -1
    holds a random epoch, new with every database, that a bulk load or a
    rename moves (see placement.objects.changes). ``mark`` is random, new
    with every bump: a restored copy that counts to the same ``seq``
    again does not repeat it. Not upstream's."""
    __tablename__ = 'placement_change_slots'
    slot = sa.Column(sa.Integer, primary_key=True, autoincrement=False)
    seq = sa.Column(sa.BigInteger, nullable=False)
    mark = sa.Column(sa.BigInteger, nullable=False, server_default='0')


class Change(BASE):
    """Which providers each counted change touched: (slot, seq) is the
    slot's counter after the change, ``mark`` the bump's. Not
    upstream's."""
    __tablename__ = 'placement_changes'
    slot = sa.Column(sa.Integer, primary_key=True, autoincrement=False)
    seq = sa.Column(sa.BigInteger, primary_key=True, autoincrement=False)
    resource_provider_id = sa.Column(sa.Integer, primary_key=True,
                                     autoincrement=False)
    mark = sa.Column(sa.BigInteger, nullable=False, server_default='0')


# Core Table objects for the read paths: no ORM instances on hot paths.
RP = ResourceProvider.__table__
INV = Inventory.__table__
ALLOC = Allocation.__table__
RPA = ResourceProviderAggregate.__table__
AGG = PlacementAggregate.__table__
TRAIT = Trait.__table__
RPT = ResourceProviderTrait.__table__
RC = ResourceClass.__table__
CONSUMER = Consumer.__table__
PROJECT = Project.__table__
USER = User.__table__
CONSUMER_TYPE = ConsumerType.__table__
CHANGE_SLOT = ChangeSlot.__table__
CHANGE = Change.__table__

# How many counters the writers of candidates' data spread over.
CHANGE_SLOTS = change_triggers.SLOTS


def change_slot_rows():
    """The rows a new placement_change_slots table starts with: every
    counter at 0, and a random epoch that tells this database from any
    other (or from a re-created one) at the same counters; each with a
    random mark."""
    mark = change_triggers.random_mark
    return ([{'slot': -1, 'seq': mark(), 'mark': mark()}] +
            [{'slot': s, 'seq': 0, 'mark': mark()}
             for s in range(CHANGE_SLOTS)])


@sa.event.listens_for(CHANGE_SLOT, 'after_create')
def _fill_change_slots(target, connection, **kw):
    connection.execute(target.insert(), change_slot_rows())


@sa.event.listens_for(BASE.metadata, 'after_create')
def _install_change_triggers(target, connection, tables=(), **kw):
    """create_all (tests, a new SQLite database) gets the triggers the
    migrations install, once every table they watch exists."""
    if CHANGE_SLOT in tables:
        change_triggers.install(connection)
