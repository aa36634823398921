"""``cupy.cuda.graph.Graph``: captured work replayed with one launch."""
from .. import _hardware
from .._hardware import api
from .stream import _queue_of


class Graph:
    """Work recorded by ``Stream.begin_capture``/``end_capture``.

    ``launch`` queues the whole recording as one item, so replaying it costs
    one launch, however many kernels it holds: on the device clock, the
    graph's launch latency, then each node's latency and work in turn. It
    replays on the buffers it was recorded with.
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
        for node in self._nodes:
            node.fn()

    @api("launch")
    def launch(self, stream=None):
        """Queue one replay of the graph on ``stream`` (default: current)."""
        q = _queue_of(stream)
        work = sum(n.latency + n.work for n in self._nodes)
        q.submit(self._replay, q.dev.compute,
                 cost=(_hardware.profile.graph_launch_s, work),
                 real=any(n.real for n in self._nodes))

    def upload(self, stream=None):
        """Nothing to upload on the CPU device model."""
