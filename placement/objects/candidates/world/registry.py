"""This process's worlds: one World per database, made on first use and
kept as long as the database's engine.
"""
import threading
import weakref

from placement.objects.candidates import model
from placement.objects.candidates import snapshot
from placement.objects.candidates.world import freshness
from placement.objects.candidates.world import indexes
from placement.objects.candidates.world import rendering
from placement.objects.candidates.world import store
from placement.objects.candidates.world import trees
from placement.objects import changes


class World(freshness.Freshness, store.Store, indexes.SearchIndexes,
            trees.TreeBuilding, rendering.Rendering):
    """Every provider of one database, and the change counters it
    reflects. ``lock`` is held while refreshing and while a search
    reads."""

    def __init__(self):
        self.lock = threading.RLock()
        self.epoch = None
        self.slots = {}
        self.rps = indexes.Providers(self)
        self.trees = indexes.Trees(self)
        self.by_trait = indexes.Members(self, 'trait')
        self.by_agg = indexes.Members(self, 'agg')
        self.by_uuid = indexes.Uuids(self)
        # root id -> frozenset of the trait ids in its tree, on first use.
        self.tree_traits = model.OnFirstUse(self._traits_in_tree)
        self._mysql = False
        self.loads = 0                  # full loads (tests)
        self.loading_apart = False      # see ready_to_answer
        self.reading = False            # see _reading
        self._renewal = None            # (base inode, thread): _renew_apart
        self._file_to_write = None      # (path, inode, n): _load_apart
        self._opened = None             # see first_load_is_long
        self._turns = None              # see database_turn
        self._start_over(snapshot.Snapshot(snapshot.build(
            [], [], [], [], [], None, {})))


# engine -> World
_WORLDS = weakref.WeakKeyDictionary()
_WORLDS_LOCK = threading.Lock()


def for_connection(conn):
    """This process's World of the database ``conn`` reads; None if that
    database does not count its changes (see changes.counted)."""
    if not changes.counted(conn):
        return None
    engine = conn.engine
    world = _WORLDS.get(engine)
    if world is None:
        with _WORLDS_LOCK:
            world = _WORLDS.setdefault(engine, World())
    return world
