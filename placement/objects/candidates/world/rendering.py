"""Trees rendered ahead, in the node's snapshot file: the handler
registers how it renders a tree's provider summaries
(render_trees_with), and the file is written ending with every tree of
the snapshot so rendered, which the processes then copy into answers
instead of rendering (World.answer).
"""
from oslo_log import log as logging

from placement.objects.candidates import node_file
from placement.objects.candidates import snapshot
from placement.objects.candidates.world import settings

LOG = logging.getLogger(__name__)


def render_trees_with(key, render):
    """Have the snapshot files written from now on end with every tree
    rendered by ``render`` (an iterable of model.Tree, or None for a tree
    it need not render -> one bytes each), as ``key`` (see
    World.answer). The handler registers its rendering at the current
    microversions: the objects know no JSON."""
    settings.RENDERER = (key, render)


class Rendering:
    """World's part that writes the node's file with its trees rendered."""

    def _write_node_file(self, ctx, path, data):
        """Write the node's file of snapshot ``data``, ending with its
        trees rendered (_rendered_trees); without them if rendering fails: they
        only spare the processes work, the world is whole without them."""
        try:
            node_file.write_file(path, data, self._rendered_trees(ctx, data))
        except OSError:
            raise
        except Exception:
            LOG.exception('Allocation candidates: rendering the trees for '
                          '%s failed; the file goes without them.', path)
            node_file.write_file(path, data)

    def _rendered_trees(self, ctx, data):
        """The chunks ending a snapshot file of ``data`` with its trees
        rendered by the registered renderer (render_trees_with); none if
        there is none. Each tree whose providers are all in its run
        (tree()'s Layout of the snapshot) is rendered; the others are
        rendered by the processes, as the trees changed since."""
        if settings.RENDERER is None:
            return ()
        key, render = settings.RENDERER
        self._base_on(ctx, snapshot.Snapshot(data))
        base = self.base
        starts, shapes = base.tstart, base.tshape

        def trees():
            for i in range(len(base.troot)):
                shape = shapes[i]
                yield None if shape < 0 else self._base_tree(
                    starts[i], starts[i + 1], shape)
        return node_file.rendered_section(data, key, render(trees()))
