"""Alembic environment of our own track: its revisions are recorded in
placement_extra_version, never in upstream's alembic_version."""
from alembic import context

from placement.db import migration
from placement.db import models

config = context.config


def run_migrations_online():
    engine = config.attributes['engine']
    with engine.connect() as connection:
        context.configure(connection=connection,
                          target_metadata=models.BASE.metadata,
                          version_table=migration.EXTRA_VERSION_TABLE,
                          render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
