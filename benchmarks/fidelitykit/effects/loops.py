"""03, fori_loop: a loop's steps launched eagerly, replayed as a graph or
fused into one kernel, on small arrays and large ones."""
from src import cp

from ..effect import DEVICE_ONLY, MIXED, Effect
from ..experiment import experiment, sync
from ..sizes import SIZES


@experiment
def loops():
    """03: seconds per step of `fori_loop`. On 1,000 floats and at the
    smallest size (mixed effects), as the lesson times them: host clock,
    fastest of nine calls from an idle device. At the large size (device-only
    effects), on the device clock: after a warm-up call, events on the
    calling stream around one call (start, queue the loop, end, then wait),
    fastest of two."""
    from src.loops import DOUBLE, fori_loop, seconds   # the lesson's clock
    from src.timing import EventTimer

    def device_seconds(fn, repeat=2):
        fn()                                # warm-up: loads, captures
        sync()
        times = []
        for _ in range(repeat):
            timer = EventTimer()            # on the current stream
            with timer:
                fn()
            times.append(timer.seconds)     # waits, after the end event
        return min(times)

    def per_step(strategy, body, x, n, clock=seconds):
        return clock(lambda: fori_loop(0, n, body, x,
                                       strategy=strategy)) / n

    def double_in_place(_, x):
        return cp.add(x, x, out=x)

    small = cp.zeros(SIZES["small"], dtype=cp.float32)
    out = {f"{s}_s": per_step(s, DOUBLE, small, SIZES["steps"])
           for s in ("eager", "graph", "fused")}
    trips = SIZES["size_trips"]
    x = cp.zeros(SIZES["small_size"], dtype=cp.float32)
    out["small_size_eager_s"] = per_step("eager", DOUBLE, x, trips)
    out["small_size_fused_s"] = per_step("fused", DOUBLE, x, trips)
    big = cp.zeros(SIZES["big_size"], dtype=cp.float32)
    for name, strategy, body in (("eager", "eager", DOUBLE),
                                 ("fused", "fused", DOUBLE),
                                 ("graph", "graph", DOUBLE),
                                 ("graph_in_place", "graph",
                                  double_in_place)):
        out[f"big_size_{name}_s"] = per_step(strategy, body, big, trips,
                                             device_seconds)
    return out


# what several effects below share
LARGE, SMALL = ("big_size", "size_trips"), ("small", "steps")
EAGER_IS_REAL = ("eager steps are real Python launches; the fused loop's "
                 "device time is modelled")
EFFECTS = [
    Effect("big_eager_over_fused",
           "loop of x + x at the large size: eager over fused",
           DEVICE_ONLY, "loops", "big_size_eager_s / big_size_fused_s",
           ("03_2_costs/big_eager_over_fused",), "big_eager_over_fused",
           sizes=LARGE),
    Effect("graph_copy_cost",
           "graph at the large size: pure body over in place",
           DEVICE_ONLY, "loops",
           "big_size_graph_s / big_size_graph_in_place_s",
           ("03_2_costs/copy_cost",), "copy_cost",
           gain=True, sizes=LARGE),
    Effect("eager_over_fused_small",
           "loop of x + x on 1,000 floats: eager over fused, per step",
           MIXED, "loops", "eager_s / fused_s",
           ("03_1_loops/fused_speedup",), "fused_speedup",
           EAGER_IS_REAL,
           sizes=SMALL),
    Effect("eager_over_graph_small",
           "loop of x + x on 1,000 floats: eager over graph, per step",
           MIXED, "loops", "eager_s / graph_s",
           ("03_1_loops/graph_speedup",), "graph_speedup",
           "a replay is one queue item on the model, but its kernels still "
           "run one by one on a worker thread",
           sizes=SMALL),
    Effect("eager_over_fused_smallest",
           "loop of x + x at the smallest size: eager over fused",
           MIXED, "loops", "small_size_eager_s / small_size_fused_s",
           ("03_2_costs/small_eager_over_fused",), "small_eager_over_fused",
           EAGER_IS_REAL,
           sizes=("small_size", "size_trips")),
]
