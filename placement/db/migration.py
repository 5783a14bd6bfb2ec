"""Schema migrations with Alembic: upgrade, stamp and version."""
import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration

from placement.db import api as db_api

_HERE = os.path.dirname(__file__)


def _alembic_config(engine=None):
    cfg = alembic_config.Config(os.path.join(_HERE, 'migrations',
                                             'alembic.ini'))
    cfg.set_main_option('script_location',
                        os.path.join(_HERE, 'migrations'))
    cfg.attributes['engine'] = engine or db_api.get_engine()
    return cfg


def upgrade(version='head', engine=None):
    alembic_command.upgrade(_alembic_config(engine), version)


def stamp(version, engine=None):
    alembic_command.stamp(_alembic_config(engine), version)


def version(engine=None):
    engine = engine or db_api.get_engine()
    with engine.connect() as conn:
        return alembic_migration.MigrationContext.configure(
            conn).get_current_revision()
