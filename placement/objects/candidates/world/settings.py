"""The world's tunables and what the process configures it with, in one
module that the others read at call time (``settings.SHARE_FROM``), so
that ``configure``, ``render_trees_with`` and a test setting one of them
change what every part of the world does.
"""
from placement.objects.candidates import node_file

# Providers read per statement on a partial reload.
CHUNK = 500
# Providers changed since the snapshot past which a new one is made: at
# least this many, at least a tenth of the snapshot (overlay_limit).
OVERLAY = 5000
# Providers made from the snapshot kept between requests, at most.
CACHE = 100000
# Picks of trees' searches kept between requests (World.searches), at
# most; a tree's with more picks are not kept.
SEARCHED = 200000
SEARCHED_PER_TREE = 1024
# Groups' amounts whose fits per kind are kept (see World.fits).
FIT_MEMOS = 256
# Sets of classes whose marks over the snapshot are kept (World._marks).
MARKS = 8
# roots_with_each lists fewer than this share of the trees, for at most
# EACH_MEMOS requests' sets of traits and aggregates (an 8-byte id per
# root: 300 kB for 40,000 roots).
MOST_TREES = 0.75
EACH_MEMOS = 32
# Worlds of at least this many providers are shared through a file by
# the processes of a node (``SHARED_DIR``; None: never).
SHARE_FROM = 10000
# A first load reading at least this many providers from the database
# runs apart from the requests (World.ready_to_answer).
READ_APART_FROM = 10000
# So does one catching up with at least this many providers logged since
# the node's file (a restarted node's: 10,000 took a process 1-1.6 s,
# beside its siblings' imports 2-3 s, before its first answer).
CATCH_UP_APART_FROM = 2000
SHARED_DIR = node_file.default_directory()
# Seconds a first load run apart waits for the request that started it
# to be answered from the database.
LOAD_WAITS = 5.0
# Worlds of at least this many providers have the node's file written
# by a process of its own, not a worker's thread, when read whole or
# renewed (apart.write_in_a_process): below it, starting the process
# (its imports) costs more than the read it spares. None: never.
WRITE_IN_A_PROCESS_FROM = 100000
# Answers from the SQL engine at once on a node while its world is first
# read apart; the other requests wait a turn, or the world
# (World.database_turn).
DATABASE_LANES = 2
# Seconds a request of the process reading its world waits for the read
# before the database answers it (World.answering).
READ_WAITS = 0.5
# (key, render): what renders a model.Tree's provider summaries for the
# node's snapshot file (rendering.render_trees_with).
RENDERER = None


def overlay_limit(n):
    """How much may change since a snapshot of ``n`` providers before a
    new one is better: ``OVERLAY``, or a tenth of it."""
    return max(OVERLAY, n // 10)


def configure(conf):
    """Where this process shares its worlds (``[candidates]`` options)."""
    global SHARED_DIR
    SHARED_DIR = None
    if conf.candidates.share_world:
        SHARED_DIR = (conf.candidates.world_dir or
                      node_file.default_directory())
