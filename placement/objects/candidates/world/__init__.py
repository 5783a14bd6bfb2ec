"""The world allocation candidates are searched in, kept in memory.

Each process holds, per database, every provider with its place in its
tree, inventories with usage, traits and aggregates (``World``), and
refreshes it at the start of every request by an exact change check that
costs the database two tiny queries instead of a search.

How it is held: a ``snapshot.Snapshot`` (columns, read in place) of the
whole world at some counters -- on a large world a file every process of
the node maps, so they share one copy and a new process starts by mapping
it -- plus, per process, what changed since (``changed``: providers read
again) and the providers looked at lately (``_cache``). ``rps``,
``trees``, ``by_trait``, ``by_agg`` and ``by_uuid`` read both as one.

The parts, each a module of this package (World is made of their
classes):

* ``registry``: one World per database of this process (for_connection);
* ``freshness``: the change check and the full loads (refresh), and who
  answers while a world is first loaded (ready_to_answer);
* ``reads``: what is read from the database;
* ``store``: the snapshot and what changed since, as records and kinds;
* ``indexes``: what a search looks providers up by, and its memos;
* ``trees``: a tree's providers for a walk, its model.Tree for an answer;
* ``rendering``: the trees rendered ahead into the node's file;
* ``settings``: the tunables and configuration, read at call time: set
  them there (``settings.SHARE_FROM``), not on this package.
"""
from placement.objects.candidates.world import freshness
from placement.objects.candidates.world import registry
from placement.objects.candidates.world import rendering
from placement.objects.candidates.world import settings
from placement.objects.candidates.world import store

World = registry.World
for_connection = registry.for_connection
_WORLDS = registry._WORLDS
configure = settings.configure
answered_from_database = freshness.answered_from_database
render_trees_with = rendering.render_trees_with
Kind, Rec, ProviderModels = store.Kind, store.Rec, store.ProviderModels
FULL_LOADS = freshness.FULL_LOADS
PARTIAL_LOADS = freshness.PARTIAL_LOADS
PROVIDERS_READ = freshness.PROVIDERS_READ
REFRESH_SECONDS = freshness.REFRESH_SECONDS
