"""A placement database for other projects' tests (nova's functional tests
use it with ``placement.conf.register_opts`` to keep one database across
several ``PlacementFixture`` runs). Needs the ``fixtures`` library (the
``fixtures`` extra)."""
import os

import fixtures

from placement.db import api as db_api
from placement.db import models


class Database(fixtures.Fixture):
    """An empty placement schema in the database ``conf_fixture``'s
    ``[placement_database] connection`` names, with the enginefacade
    pointed at it; with ``set_config=True``, in a new SQLite file of its
    own that it sets there (removed at cleanup).

    ``conf_fixture`` is an oslo.config ``Config`` fixture whose
    ConfigOpts has placement's options registered.
    """

    def __init__(self, conf_fixture, set_config=False):
        super().__init__()
        self.conf_fixture = conf_fixture
        self.set_config = set_config

    def _setUp(self):
        if self.set_config:
            tmp = self.useFixture(fixtures.TempDir()).path
            self.conf_fixture.config(
                group='placement_database',
                connection='sqlite:///' + os.path.join(tmp, 'placement.db'))
        conf = self.conf_fixture.conf
        if not conf.placement_database.connection:
            raise ValueError('Database(set_config=False) needs '
                             '[placement_database] connection set')
        db_api.configure(conf)
        # Cleanups run last-in first-out: connections close before the
        # temporary directory goes.
        self.addCleanup(db_api.context_manager.dispose_pool)
        models.BASE.metadata.create_all(db_api.get_engine())
