"""``cupy.cuda.graph.Graph``: captured work replayed with one launch."""
from .. import _hardware
from .._hardware import api


class Graph:
    """Work recorded by ``Stream.begin_capture``/``end_capture``.

    ``launch`` queues the whole recording as one item, so replaying it costs
    one launch, however many kernels it holds: on the device clock, the
    graph's launch latency, then each node's latency (a kernel node's is
    the profile's ``graph_node_us``, less than a launch's) and work in
    turn. It replays on the buffers it was recorded with.
    """

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "Graph is created by Stream.end_capture(), not directly")

    @classmethod
    def _from_nodes(cls, nodes, queue_of):
        """The graph of a capture's ``nodes``. ``queue_of(stream)`` is
        `cuda.stream._queue_of`, the queue a launch goes to: ``end_capture``,
        in `cuda.stream` above this module, makes graphs and hands it over."""
        g = cls.__new__(cls)
        g._nodes = tuple(nodes)
        g._queue_of = queue_of
        return g

    def _replay(self):
        for node in self._nodes:
            node.fn()

    @api("graph")
    def launch(self, stream=None):
        """Queue one replay of the graph on ``stream`` (default: current)."""
        q = self._queue_of(stream)
        node_s = _hardware.profile.graph_node_s     # a kernel node's
        work = sum((node_s if n.kind == "kernel" else n.latency) + n.work
                   for n in self._nodes)
        q.submit(self._replay, q.dev.compute,
                 cost=(_hardware.profile.graph_launch_s, work),
                 real=any(n.real for n in self._nodes))

    def upload(self, stream=None):
        """Nothing to upload on the CPU device model."""
