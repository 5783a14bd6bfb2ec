"""Alembic environment: run migrations on the engine placement configured."""
from alembic import context

from placement.db import models

config = context.config
target_metadata = models.BASE.metadata


def run_migrations_online():
    engine = config.attributes['engine']
    with engine.connect() as connection:
        context.configure(connection=connection,
                          target_metadata=target_metadata,
                          render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
