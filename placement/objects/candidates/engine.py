"""GET /allocation_candidates' answer: the one ``find`` the handler calls.

Two engines answer alike (the differential tests hold them to each other
and to upstream); which one runs is chosen here, and only here:

* the world engine (world/, search.py): this process keeps every
  provider in memory and brings it up to date at the start of each
  request with a change check that costs two tiny queries. It needs a
  database that counts its changes (placement.objects.changes: the
  triggers our migrations install);
* the SQL engine (sql.py) for a database that does not -- made by
  upstream's placement-manage, not yet upgraded by ours -- or when
  ``USE_WORLD`` is off (tests of the SQL engine); and while a process
  reads a large world from a database server for the first time with no
  snapshot file of the node to start from (``World.ready_to_answer``:
  a cold node answers in a second, not after the seven a million
  providers take).

The world search applies the rules of rules.py and the ``*_rules.py``
modules it calls; the SQL engine their SQL forms, defined beside them
(test_rulebook_agreement.py holds the two to each other). Both are
sources of one walk (walk.py) and hand their groups to the same combiner
(combine.py). Explain (explain.py) reads the same world through
``snapshot``.
"""
import contextlib

from placement.db import api as db_api
from placement import exception
from placement.objects.candidates import search
from placement.objects.candidates import sql
from placement.objects.candidates import world as world_mod

# Answer from the in-memory world when the database counts its changes;
# tests of the SQL engine turn it off.
USE_WORLD = True


@db_api.replica_reader(recheck=(exception.ResourceClassNotFound,
                                exception.TraitNotFound))
def find(ctx, groups, wide, nested_aware=True, max_candidates=-1,
         strategy='depth-first', randomize=False, rendered_as=None):
    """The allocation candidates for ``groups`` (lib_query.RequestGroup by
    suffix) and ``wide`` (lib_query.RequestWide).

    Returns (candidates, providers, has_trees): a list of
    model.Candidate, {id: model.Provider} for every provider of every
    tree involved, and whether any provider has a parent.

    Without randomization generation stops at ``limit`` (or
    ``max_candidates``). With randomization and a limit, the answer is a
    random sample of the whole answer, drawn without generating the rest
    (upstream samples ``limit`` of up to ``max_candidates`` generated).
    Randomized without a limit, up to ``max_candidates`` are shuffled.
    Raises ResourceClassNotFound or TraitNotFound for a name that does
    not exist (unless an earlier group is empty: names.resolve).
    ``rendered_as``: the caller's key for whole trees' summaries (see
    render_trees_with): the world may give some rendered already.
    """
    options = dict(nested_aware=nested_aware, max_candidates=max_candidates,
                   strategy=strategy, randomize=randomize)
    if USE_WORLD:
        # Twice at most: the world loaded while the request waited its
        # turn at the database (World.database_turn) answers it.
        for _ in range(2):
            found, the_world = _find_in_world(ctx, groups, wide, rendered_as,
                                              options)
            if found is not None:
                return found
            if the_world is None:
                break
            with the_world.database_turn() as turn:
                if turn:
                    return _find_in_database(ctx, groups, wide, options)
    return _find_in_database(ctx, groups, wide, options)


def _find_in_database(ctx, groups, wide, options):
    try:
        return sql.find_in_database(ctx, groups, wide, **options)
    finally:
        world_mod.answered_from_database()


# On a pooled connection not pinged first (a round trip, a tenth of a
# limit=5 answer): the answer is a read, asked again on a checked
# connection when the first finds the database gone.
@db_api.unpinged
@db_api.one_statement_reads
def _find_in_world(ctx, conn, groups, wide, rendered_as, options):
    """(find's answer from this process's world, or None when the SQL
    engine answers (see World.ready_to_answer); the world, None for a
    database that does not count its changes)."""
    the_world = world_mod.for_connection(conn)
    how = the_world.ready_to_answer(ctx, conn) if the_world else None
    if how is None:
        return None, the_world
    with the_world.answering(how) as answers:
        if answers:
            the_world.refresh(ctx, conn)
            return search.find_in_world(
                ctx, conn, the_world, groups, wide,
                rendered_as=rendered_as, **options), the_world
    return None, the_world


def render_trees_with(key, render):
    """Have the world's snapshot files hold every tree's summaries as
    ``render`` renders them, for the requests that ask for ``key``
    (find's ``rendered_as``): see world.render_trees_with."""
    world_mod.render_trees_with(key, render)


@contextlib.contextmanager
def snapshot(ctx):
    """(world, connection): this process's world of the database, brought
    up to date and locked while the block runs, so that several searches
    and whoever reads it (explain) see one state. A database that does
    not count its changes gets a world of its own, read in full."""
    with db_api.reader_connection.using(ctx) as conn:
        the_world = world_mod.for_connection(conn)
        if the_world is None:
            the_world = world_mod.World()
            the_world.read_all(ctx, conn)
            yield the_world, conn
            return
        with the_world.lock:
            the_world.refresh(ctx, conn)
            yield the_world, conn
