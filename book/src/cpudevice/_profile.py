"""The device profile of the CPU device model, and its configuration.

* ``BOOK_CPU_DEVICES`` (default 2) and ``BOOK_CPU_DEVICE_MEMORY`` (default
  1GiB): how many devices the model has and the memory of each;
* the **device profile** (``profiles/h100.json`` by default, another JSON
  file with ``BOOK_CPU_PROFILE=path``): the device's properties and the
  costs of its operations, calibrated from a real GPU's measurements, and
  the **cost model** that turns an operation into seconds of device time.

``profile`` is rebound by `set_profile`: read it as ``_profile.profile`` (or
``_hardware.profile``) at the time of use, never import the name.
"""
import json
import os

# -- configuration: devices and memory ---------------------------------------


def _parse_bytes(text):
    """``'2GiB'`` / ``'512MiB'`` / ``'1e9'`` -> bytes."""
    text = str(text).strip()
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
             "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "B": 1}
    upper = text.upper()
    for unit, scale in units.items():
        if upper.endswith(unit):
            return int(float(text[:-len(unit)]) * scale)
    return int(float(text))


def _config():
    n = int(os.environ.get("BOOK_CPU_DEVICES", "2"))
    if n < 1:
        raise ValueError(f"BOOK_CPU_DEVICES={n}: need at least one device")
    mem = _parse_bytes(os.environ.get("BOOK_CPU_DEVICE_MEMORY", "1GiB"))
    if mem < 2**20:
        raise ValueError(f"BOOK_CPU_DEVICE_MEMORY={mem} bytes: need 1 MiB "
                         "or more")
    return n, mem


N_DEVICES, CAPACITY = _config()

# -- the device profile ------------------------------------------------------
DEFAULT_PROFILE = os.path.join(os.path.dirname(__file__), "profiles",
                               "h100.json")


class Profile:
    """A device profile: properties and costs, read from a JSON file.

    Costs are kept in seconds and bytes per second; ``kernels`` maps a
    kernel name to its own cost data (``ns_per_item``).
    """

    def __init__(self, data, path=None):
        self.path = path
        self.data = data
        self.name = data["name"]
        self.device = data.get("device", self.name)
        self.properties = dict(data.get("properties", {}))
        host, kern, copy = data["host"], data["kernel"], data["copy"]
        self.context_create_s = host["context_create_ms"] * 1e-3
        self.module_load_s = host["module_load_ms"] * 1e-3
        self.stage_bps = host["pageable_stage_gbps"] * 1e9
        self.issue = {kind: us * 1e-6 for kind, us in
                      host.get("issue_us", {}).items()
                      if isinstance(us, (int, float))}
        # a profile that does not time a reduction's launch apart: a launch
        self.issue.setdefault("reduction", self.issue.get("launch", 0.0))
        self.issue.setdefault("graph", self.issue.get("launch", 0.0))
        # what an explicit synchronize costs the host beyond the wait
        self.sync_s = host.get("sync_us", 0.0) * 1e-6
        self.launch_s = kern["launch_us"] * 1e-6
        self.memory_bps = kern["memory_gbps"] * 1e9
        self.flops = kern["flops_tflops"] * 1e12
        self.graph_launch_s = kern.get("graph_launch_us",
                                       kern["launch_us"]) * 1e-6
        # a kernel node's latency inside a replayed graph
        self.graph_node_s = kern.get("graph_node_us",
                                     kern["launch_us"]) * 1e-6
        self.copy_latency_s = copy["latency_us"] * 1e-6
        self.h2d_bps = copy["h2d_pinned_gbps"] * 1e9
        self.d2h_bps = copy["d2h_pinned_gbps"] * 1e9
        alloc = data.get("alloc", {})
        self.malloc_s = alloc.get("malloc_us", 0.0) * 1e-6
        self.free_s = alloc.get("free_us", 0.0) * 1e-6
        self.fault_bps = (alloc.get("managed_fault_gbps") or
                          copy["h2d_pinned_gbps"]) * 1e9
        self.kernels = {name: dict(v) for name, v in
                        data.get("kernels", {}).items()}
        streams = data.get("streams", {})
        # cudaDeviceGetStreamPriorityRange: (least, greatest); lower numbers
        # are higher priorities. Reported, not used to schedule.
        self.priority_range = (streams.get("least_priority", 0),
                               streams.get("greatest_priority", 0))

    def scaled(self, time=1.0, copies=1.0):
        """This profile with every device cost ``time`` times as long (all
        their ratios kept) and copies ``copies`` times as fast. The host's
        costs to issue a call (``issue_us``) are the host's: they stay."""
        data = json.loads(json.dumps(self.data))
        host, kern, copy = data["host"], data["kernel"], data["copy"]
        host["pageable_stage_gbps"] /= time
        kern["launch_us"] *= time
        kern["graph_launch_us"] = kern.get("graph_launch_us",
                                           kern["launch_us"] / time) * time
        kern["graph_node_us"] = kern.get("graph_node_us",
                                         kern["launch_us"] / time) * time
        kern["memory_gbps"] /= time
        kern["flops_tflops"] /= time
        copy["latency_us"] *= time / copies
        copy["h2d_pinned_gbps"] *= copies / time
        copy["d2h_pinned_gbps"] *= copies / time
        host["pageable_stage_gbps"] *= copies
        if data.get("alloc", {}).get("managed_fault_gbps"):
            data["alloc"]["managed_fault_gbps"] *= copies / time
        for own in data.get("kernels", {}).values():
            own["ns_per_item"] *= time
            if "ns_per_step" in own:
                own["ns_per_step"] *= time
        return Profile(data, self.path)

    @classmethod
    def load(cls, path=None):
        path = path or os.environ.get("BOOK_CPU_PROFILE") or DEFAULT_PROFILE
        with open(path) as f:
            return cls(json.load(f), path)

    # -- the cost model (seconds of device time) --
    def kernel_cost(self, nbytes=0, flops=0, items=0, name=None, steps=1):
        """``(latency, work)`` of a kernel moving ``nbytes`` bytes, doing
        ``flops`` operations over ``items`` elements. A kernel the profile
        lists has its own rate: ``ns_per_item`` for each element and each
        of its ``steps`` (a loop inside the kernel, whose length its
        argument named ``per`` gives, or for a RawKernel its argument at
        place ``per``), and at least ``ns_per_step`` for
        each step (a chain of dependent operations)."""
        work = max(nbytes / self.memory_bps, flops / self.flops)
        own = self.kernels.get(name) if name is not None else None
        if own is not None and items:
            ns = max(items * own["ns_per_item"], own.get("ns_per_step", 0))
            work = max(work, steps * ns * 1e-9)
        return self.launch_s, work

    def issue_s(self, kind):
        """Host seconds CuPy takes to issue a call of ``kind`` ("launch",
        "reduction", "copy", "event", "call"): the time it costs a host
        thread's view of the device clock (`_clock.api`)."""
        return self.issue.get(kind, 0.0)

    def copy_cost(self, nbytes, direction):
        """``(latency, work)`` of a DMA copy of ``nbytes`` (``"H2D"`` or
        ``"D2H"``) between pinned host memory and the device."""
        bps = self.h2d_bps if direction == "H2D" else self.d2h_bps
        return self.copy_latency_s, nbytes / bps

    def stage_cost(self, nbytes):
        """Host seconds to copy ``nbytes`` of pageable memory through the
        driver's bounce buffer (the host does it, the host waits)."""
        return nbytes / self.stage_bps


profile = Profile.load()


def set_profile(new):
    """Use ``new`` (a `Profile`, a dict or a path) from now on; return the
    previous profile. For tests and experiments: work already queued keeps
    the costs it was given."""
    global profile
    old = profile
    if isinstance(new, dict):
        new = Profile(new)
    elif not isinstance(new, Profile):
        new = Profile.load(new)
    profile = new
    return old

