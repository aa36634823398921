"""01, devices: a process's first operation, a host round trip against a
copy on the device."""
import numpy as np
from src import cp, cpx

from ..effect import MIXED, Effect
from ..experiment import experiment
from ..sizes import SIZES


@experiment
def first_use():
    """01: ten small operations in fresh processes (`in_fresh_processes`)."""
    from src.startup import in_fresh_processes
    runs = in_fresh_processes(runs=3, n_ops=10)
    op = np.array([r["op_s"] for r in runs])
    return {"first_s": float(np.median(op[:, 0])),
            "later_s": float(np.median(op[:, 1:]))}


@experiment
def round_trip():
    """01: a host round trip (host clock) against a copy on the device
    (events), with `cpx.profiler.benchmark`, smallest and largest size."""
    def trip(h):
        return cp.asnumpy(cp.asarray(h))

    out = {}
    for name in ("trip_small", "trip_large"):
        nbytes = SIZES[name]
        h = np.ones(nbytes // 8)
        d = cp.asarray(h)
        b = cpx.profiler.benchmark(trip, (h,), n_repeat=10, n_warmup=2)
        out[f"{name}_s"] = float(np.median(b.cpu_times))
        b = cpx.profiler.benchmark(d.copy, (), n_repeat=10, n_warmup=2)
        out[f"{name}_device_s"] = float(np.median(b.gpu_times[0]))
        out[f"{name}_bytes"] = nbytes
    return out


EFFECTS = [
    Effect("first_over_later",
           "first operation of a process over a later one",
           MIXED, "first_use", "first_s / later_s",
           ("01_1_runtime/first_ratio",), "first_ratio",
           "the model has no driver context or kernel compilation to pay "
           "for, so its first use can drown in a busy host's noise"),
    Effect("round_trip_over_device_copy",
           "host round trip over a copy on the device (largest size)",
           MIXED, "round_trip", "trip_large_s / trip_large_device_s",
           ("01_2_transfers/trip_vs_device",), "trip_vs_device",
           "the round trip is real host time: two staged copies by the "
           "CPU, however fast the modelled link is",
           sizes=("trip_large",)),
    Effect("small_trip_over_its_bytes",
           "1 KiB round trip over its bytes at the large-copy rate",
           MIXED, "round_trip",
           "trip_small_s * trip_large_bytes"
           " / (trip_small_bytes * trip_large_s)",
           ("01_2_transfers/trip_small_us",
            "01_2_transfers/small_bytes_us"),
           "trip_small_us / small_bytes_us",
           "a small round trip is Python and thread hand-offs on the host, "
           "which the model does not scale",
           sizes=("trip_small", "trip_large")),
]
