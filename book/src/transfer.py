"""Host <-> device copies: bandwidth by size, the cost of pinned allocation,
and the 2x2 experiment of pinned memory and blocking copies (chapter 6).

Copies are timed with the host clock and with a pair of events around them
(`src.timing`); CuPy's own calls are used throughout, so the same code
measures a GPU.
"""
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy

from . import cp, cpx
from .timing import Benchmark, EventTimer

DIRECTIONS = ("H2D", "D2H")


def is_pinned(a):
    """True if NumPy array ``a`` lives in pinned (page-locked) memory."""
    return bool(cp.cuda.pinned_memory.is_memory_pinned(a.ctypes.data))


def host_buffer(nbytes, pinned):
    """``nbytes`` of host memory as a uint8 array, pinned or pageable, with
    every page touched so that no page fault lands inside a timed copy."""
    if pinned:
        a = cpx.empty_pinned(nbytes, dtype=numpy.uint8)
    else:
        a = numpy.empty(nbytes, dtype=numpy.uint8)
    a.fill(1)
    return a


@dataclass(frozen=True)
class CopyTime:
    """Best-of-n times of one host <-> device copy."""

    nbytes: int
    direction: str      # "H2D" or "D2H"
    pinned: bool        # was the host side pinned memory?
    event_s: float      # device time between events around the copy
    host_s: float       # host time from the call until the copy is done

    @property
    def event_gbps(self):
        """Bandwidth in GB/s (1e9 bytes per second), timed with events."""
        return self.nbytes / self.event_s / 1e9


def time_copy(host, dev, direction, stream, repeat=5):
    """Time copying ``host`` into ``dev`` ("H2D") or ``dev`` into ``host``
    ("D2H") on ``stream``: best of ``repeat``, with events and host clock."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, "
                         f"not {direction!r}")

    def copy():
        if direction == "H2D":
            dev.set(host, stream=stream)
        else:
            dev.get(stream=stream, out=host, blocking=False)

    copy()                                  # warm-up, untimed
    stream.synchronize()
    event_s, host_s = [], []
    for _ in range(repeat):
        events = EventTimer(stream)         # events made outside the clock
        with Benchmark() as wall:
            with events:
                copy()
            events.end.synchronize()
        host_s.append(wall.seconds)
        event_s.append(events.seconds)
    return CopyTime(host.nbytes, direction, is_pinned(host),
                    min(event_s), min(host_s))


def bandwidth_sweep(sizes, repeat=5):
    """Time H2D and D2H copies of each size in ``sizes`` (bytes), from
    pageable and from pinned memory; a list of `CopyTime`."""
    largest = max(sizes)
    dev = cp.empty(largest, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    results = []
    for pinned in (False, True):
        host = host_buffer(largest, pinned)
        for direction in DIRECTIONS:
            for n in sizes:
                results.append(time_copy(host[:n], dev[:n], direction,
                                         stream, repeat))
        del host
    return results


def allocation_times(nbytes, repeat=3):
    """Seconds to allocate ``nbytes`` of host memory and touch it, best of
    ``repeat``: pageable, pinned from an empty pool, pinned from the pool."""
    pool = cp.get_default_pinned_memory_pool()

    def best(make, before=lambda: None):
        ts = []
        for _ in range(repeat):
            before()
            with Benchmark() as wall:
                a = make()
                a.fill(0)
            ts.append(wall.seconds)
            del a
        return min(ts)

    def pinned():
        return cpx.empty_pinned(nbytes, dtype=numpy.uint8)

    return {
        "pageable": best(lambda: numpy.empty(nbytes, dtype=numpy.uint8)),
        "pinned, new": best(pinned, before=pool.free_all_blocks),
        "pinned, pooled": best(pinned),
    }


def returns_and_done(copy, stream, repeat=5):
    """Median seconds until ``copy()`` returns and until ``stream`` has
    finished it: how long the host is held, and how long the copy takes."""
    returns, done = [], []
    for _ in range(repeat + 1):                 # the first is a warm-up
        stream.synchronize()
        with Benchmark() as until_done:
            with Benchmark() as until_return:
                copy()
            stream.synchronize()
        returns.append(until_return.seconds)
        done.append(until_done.seconds)
    return statistics.median(returns[1:]), statistics.median(done[1:])


@dataclass(frozen=True)
class Step:
    """Median times of one copy-then-compute step."""

    blocked_s: float    # host time inside CuPy calls, before its own work
    total_s: float      # from the copy call until device and host are done


def copy_then_compute(host, model, host_work, blocking,
                      consume_first=False, repeat=5):
    """Copy ``host`` to the device with ``cp.asarray(host, blocking=...)``,
    queue ``model`` on it and run ``host_work``; the median `Step` of
    ``repeat``. ``consume_first`` fetches the model's result to the host
    before the host work (the mistake); otherwise after it."""
    stream = cp.cuda.get_current_stream()
    blocked, total = [], []
    for _ in range(repeat + 1):                 # the first is a warm-up
        stream.synchronize()
        with Benchmark() as whole:
            with Benchmark() as held:
                x = cp.asarray(host, blocking=blocking)
                y = model(x)
                if consume_first:
                    cp.asnumpy(y)
            host_work()
            if not consume_first:
                cp.asnumpy(y)
            stream.synchronize()
        blocked.append(held.seconds)
        total.append(whole.seconds)
    return Step(statistics.median(blocked[1:]), statistics.median(total[1:]))


def two_by_two(pageable, pinned, model, host_work, repeat=5):
    """The 2x2 experiment: pageable or pinned source, blocking or not.
    Rows of (memory, blocking, CuPy call as the lesson writes it, `Step`)."""
    rows = []
    for memory, host in (("pageable", pageable), ("pinned", pinned)):
        for blocking in (True, False):
            call = f"cp.asarray(x_{memory}, blocking={blocking})"
            step = copy_then_compute(host, model, host_work, blocking,
                                     repeat=repeat)
            rows.append((memory, blocking, call, step))
    return rows


def arrived(got, original, overwritten):
    """Which host data a device copy delivered: ``"the original"``, ``"the
    overwritten"``, ``"a mix of both"`` or ``"neither"``."""
    old = numpy.array_equal(got, original)
    new = numpy.array_equal(got, overwritten)
    if old or new:
        return "the original" if old else "the overwritten"
    parts = numpy.isin(got, numpy.union1d(original, overwritten)).all()
    return "a mix of both" if parts else "neither"


def pcie_bandwidth(speed, width):
    """Nominal bytes per second, one direction, of a PCIe link from sysfs
    text: ``speed`` like ``"16.0 GT/s PCIe"`` and ``width`` like ``"16"``."""
    gts = float(speed.split()[0])
    lanes = int(width)
    if gts < 8:             # PCIe 1 and 2: 8b/10b line code
        efficiency = 8 / 10
    elif gts <= 32:         # PCIe 3 to 5: 128b/130b
        efficiency = 128 / 130
    else:                   # PCIe 6 and later: 242 of 256 bytes per FLIT
        efficiency = 242 / 256
    return gts * 1e9 * lanes * efficiency / 8


def _max_link(path):
    """``(GT/s, lanes)``: the most a PCIe port at sysfs ``path`` can do
    (``max_link_speed``, ``max_link_width``)."""
    speed = (path / "max_link_speed").read_text()
    width = (path / "max_link_width").read_text()
    return float(speed.split()[0]), int(width)


def nominal_link_bandwidth(device=0, sysfs="/sys/bus/pci/devices"):
    """Nominal one-way bytes/s of the link between host and ``device``, from
    its PCI address and Linux sysfs; None where the device reports no link
    (an integrated device shares host memory) or sysfs has none.

    The link is the fastest the system allows, as ``nvidia-smi``'s
    ``pcie.link.gen.max`` and NVML's ``nvmlDeviceGetMaxPcieLinkGeneration``
    report it: the lesser of the GPU's own maximum and its upstream port's
    (the slot's), generation and width each, since a link trains to what
    both ends can do (a PCIe 5 GPU in a PCIe 4 slot gets PCIe 4). Not the
    link as it runs now (``current_link_*``): an idle GPU trains its link
    down to save power. Where the upstream port has no entry (the GPU sits
    on a root complex) the GPU's own maximum is used."""
    props = cp.cuda.runtime.getDeviceProperties(device)
    if props["integrated"]:
        return None
    address = "{:04x}:{:02x}:{:02x}.0".format(
        props["pciDomainID"], props["pciBusID"], props["pciDeviceID"])
    path = Path(sysfs) / address
    try:
        gts, lanes = _max_link(path)
    except (OSError, ValueError, IndexError):
        return None
    try:
        up_gts, up_lanes = _max_link(path.resolve().parent)
        gts, lanes = min(gts, up_gts), min(lanes, up_lanes)
    except (OSError, ValueError, IndexError):
        pass
    return pcie_bandwidth(f"{gts} GT/s", str(lanes))


def log2_sizes(smallest, largest):
    """Powers of two from ``smallest`` to ``largest`` bytes, both included."""
    lo, hi = int(math.log2(smallest)), int(math.log2(largest))
    return [1 << k for k in range(lo, hi + 1)]


def size_label(nbytes):
    """``nbytes`` as text with a binary unit: ``"1 KiB"``, ``"64 MiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.4g} {unit}"
        nbytes /= 1024
