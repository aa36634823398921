"""``cupy.cuda.graph.Graph``: captured work replayed with one launch."""
from .stream import _queue_of


class Graph:
    """Work recorded by ``Stream.begin_capture``/``end_capture``.

    ``launch`` queues the whole recording as one item, so replaying it costs
    one launch, however many kernels it holds. It replays on the buffers it
    was recorded with.
    """

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "Graph is created by Stream.end_capture(), not directly")

    @classmethod
    def _from_nodes(cls, nodes):
        g = cls.__new__(cls)
        g._nodes = tuple(nodes)
        return g

    def _replay(self):
        for engine, fn in self._nodes:
            if engine is None:
                fn()
            else:
                with engine:
                    fn()

    def launch(self, stream=None):
        """Queue one replay of the graph on ``stream`` (default: current)."""
        _queue_of(stream).submit(self._replay)

    def upload(self, stream=None):
        """Nothing to upload on the CPU device model."""
