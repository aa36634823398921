"""The sizes the effects are measured at, here and in the GPU lesson."""

# Sizes. Each effect is measured at the same size on either backend, chosen
# by one rule: the size the GPU lesson used (``pick(gpu=...)``, the size the
# H100 reference was measured at) if the model can afford it, else the
# largest it can afford. The model does every operation's real work on the
# CPU, so "afford" means: the experiment's real work fits in about ten
# seconds on 2 idle cores, and its device arrays fit the model's default
# device memory (BOOK_CPU_DEVICE_MEMORY, 1 GiB). Sizes are never chosen to
# make an effect agree. Where a size differs from the GPU lesson's, the
# effect's row says so, with the reason below.
MIB = 2**20
# name: (size used here, the GPU lesson's size, unit)
SIZE_SPECS = {
    "trip_small": (2**10, 2**10, "bytes"),              # 01: sizes[0]
    "trip_large": (2**28, 2**28, "bytes"),              # 01: sizes[-1]
    "dot_n": (4000, 4000, "matrix"),                    # 04: n
    "add_n": (2**17, 2**22, "float32"),                 # 04: v
    "adds": (10000, 10000, "additions"),                    # 04: counts[-1]
    "overlap_n": (2**24, 2**26, "float64"),             # 04: z
    "small": (1000, 1000, "float32"),                   # 03: small
    "steps": (1024, 1024, "steps"),                     # 03: n_steps
    "small_size": (4**5, 4**5, "float32"),              # 03: sizes[0]
    "big_size": (4**12, 4**13, "float32"),              # 03: sizes[-1]
    "size_trips": (32, 32, "steps"),                    # 03: size_trips
    "carry": (4**13, 4**13, "float32"),                 # 03/06: big_size
    "chunk": (4 * 1024 * 256, 4 * 1024 * 256, "float32"),   # 05: chunk
    "n_streams": (4, 4, "streams"),                     # 05: demo streams
    "kernel_n": (32 * 2**20, 32 * 2**20, "float32"),    # 05: d_big
    "energy_n": (2**27, 2**27, "float32"),              # 05: n_x
    "energy_chunk": (2**20, 2**20, "float32"),          # 05: per chunk
    "alloc": (64 * MIB, 64 * MIB, "bytes"),             # 06: alloc_big
    "bw_small": (2**10, 2**10, "bytes"),                # 06: sizes[0]
    "bw_large": (256 * MIB, 256 * MIB, "bytes"),        # 06: largest
    "set_m": (2**26, 2**26, "float32"),                 # 06: m
    "batch_m": (2**26, 2**26, "float32"),               # 06: m2
    "next_batch": (2**22, 2**22, "float32"),            # 06: next_batch
}
# Why a size is smaller than the GPU lesson's (the rule's "else").
SIZE_WHY = {
    "add_n": "60,000 additions of 16 MiB would take minutes of real CPU "
             "work",
    "overlap_n": "64 Mi float64 and its temporaries do not fit the model's "
                 "1 GiB device",
    "big_size": "a 256 MiB carry, its copy and each step's result do not "
                "fit the model's 1 GiB device, and the four loops' real "
                "work there is about a minute on 2 cores",
}
SIZES = {name: used for name, (used, _, _) in SIZE_SPECS.items()}
GPU_SIZES = {name: gpu for name, (_, gpu, _) in SIZE_SPECS.items()}


SMALLER = "smaller than the GPU's: "


def size_label(name, value):
    """``value`` of size ``name`` in words: "256 MiB", "16 Mi float32"."""
    unit = SIZE_SPECS[name][2]

    def amount(n):
        for step, suffix in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
            if n >= step and n % step == 0:
                return f"{n // step} {suffix}"
        return f"{n:,}"
    if unit == "bytes":
        return amount(value) + "B" if value >= 2**10 else f"{value} B"
    if unit == "matrix":
        return f"{value} x {value} float64"
    if unit in ("streams", "steps", "additions"):
        return f"{value:,} {unit}"
    return f"{amount(value)} {unit}".replace("  ", " ")


def sizes_of(names):
    """``(here, gpu, note)``: the sizes ``names`` as text, here and in the
    GPU lesson, and why they differ (empty when they do not)."""
    here = ", ".join(size_label(n, SIZES[n]) for n in names) or "-"
    gpu = ", ".join(size_label(n, GPU_SIZES[n]) for n in names) or "-"
    why = [SMALLER + SIZE_WHY[n] for n in names
           if SIZES[n] != GPU_SIZES[n]]
    return here, gpu, "; ".join(why)
