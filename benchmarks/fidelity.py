"""The effects the book teaches, measured here, beside a real GPU's.

    python benchmarks/fidelity.py [--json OUT.json] [--markdown PAGE.md]
                                  [--reference PATH] [--only KEY ...]
                                  [--judge STORED.json]

Each *effect* is a unitless ratio that a lesson measures (pinned over
pageable bandwidth, a graph's speedup over eager launches, ...). This script
measures it on whichever backend `src` picks, the way the lesson does and
with the lesson's helpers (`src.transfer`, `src.timeline`, `src.pipeline`,
`src.loops`, `src.timing`, `src.startup`), at the same sizes on either
backend. The sizes follow one rule: **the size the GPU lesson used (the size
the H100 reference was measured at) where the model can afford it, else the
largest the model can afford**. The model does every operation's real work
on the CPU, so "afford" means that an experiment's real work fits in about
ten seconds on 2 idle cores and its device arrays fit the model's 1 GiB
device; a size is never chosen to make an effect agree. `SIZE_SPECS` lists
each size here and the GPU lesson's; every row of the output says what its
effect was measured at, the reference's size, and why they differ where
they do (`SIZE_WHY`).

Device-only effects are read on the device clock, as a GPU benchmark reads
them: events on a stream after a warm-up, recorded around work that is only
queued (start, queue the work, end, then wait), so that no host wait sits
between the two events. The exception is a copy from pageable memory, which
holds the host between its events on a GPU too.

Beside each value, the GPU reference:

* by default, the same device's: the GPU this run is on, or on the CPU
  device model the GPU its profile was measured on (the H100's profile:
  ``nvidia-h100``). That GPU's own run of fidelity.py,
  ``benchmarks/fidelity-gpu-<device>.json`` (``--json`` on a GPU, which
  ``tools/gpu/refresh-reference.sh`` copies there), compared size for
  size, where there is one; else what its lessons glued,
  ``book/reference/<device>.json``, combined by the formula each effect
  states, values taken at the lessons' *GPU* sizes; else none;
* with ``--reference PATH``, that file instead: a lessons reference of the
  same form, or the ``--json`` output of fidelity.py run on a GPU.

Run on a GPU, the live values are that GPU's own, and ``--json`` saves them
to become the reference.

Each effect has a class:

* **device-only**: measured with CUDA events, or dominated by device time
  (copy against compute, pinned against pageable bandwidth, overlap on a
  timeline, fused against eager at a large size). It *agrees* when it is
  within a factor of `FACTOR` (2) of the reference, either way; for a
  speedup (``gain=True``) the factor applies to its gain, the ratio less 1
  (below 1, its inverse's), so a reference of 1.5 needs 1.25 to 2, not
  merely anything from 0.75; a reference within `BAND` of 1 gained nothing
  beyond noise and needs a value within `BAND` of 1 too.
* **mixed** host/device: host clocks around device work, first use in a
  fresh process, a host held by a copy. It *agrees* when it points the
  reference's way: both above 1, both below 1, or both "about 1", within a
  factor of `BAND` (1.3) of 1. One that does not is *flagged*, with the
  reason written beside the effect below.

Run in full (no ``--only``), it also runs `issue_costs`, which no effect
reads: the host's time to issue an event's record, a view, a launch and a
reduction's launch, from which `calibrate.py` solves the profile's issue
costs on a GPU's run (the page shows them beside the profile's); and
`copy_duplex`, copies in both directions at once against each alone.

The parts live in `benchmarks/fidelitykit/`: the effects, one module a
lesson with the experiments that measure them (`fidelitykit.effects`), the
sizes (`fidelitykit.sizes`), the comparison with the reference
(`fidelitykit.compare`), the runner and the table writer. This script is
the command line, and gives the package's names to the tests.

Nothing here is asserted: ``tests/test_fidelity.py`` checks the table's
structure and the verdicts' logic, not the numbers.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelitykit import calibration, compare  # noqa: E402, F401
from fidelitykit.calibration import CALIBRATION  # noqa: E402, F401
from fidelitykit.compare import (  # noqa: E402, F401
    AGREES, BAND, DIFFERS, FACTOR, FLAGGED, NO_REFERENCE, NOT_MEASURED,
    default_reference, direction, evaluate, gpu_run_path, load_reference,
    names_in, refs, run_device, summarize, verdict)
from fidelitykit.effect import DEVICE_ONLY, MIXED  # noqa: E402, F401
from fidelitykit.effects import EFFECT_SIZES, EFFECTS  # noqa: E402, F401
from fidelitykit.experiment import EXPERIMENTS  # noqa: E402, F401
from fidelitykit.runner import (  # noqa: E402, F401
    assemble, judge, measure, run)
from fidelitykit.sizes import (  # noqa: E402, F401
    SIZE_SPECS, SIZE_WHY, SMALLER, size_label, sizes_of)
from fidelitykit.table import (  # noqa: E402, F401
    ISSUE_ROWS, duplex, markdown, table)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--markdown", help="write the table as a book page here")
    p.add_argument("--reference",
                   help="the GPU reference: a book/reference/*.json file or "
                        "the --json of fidelity.py run on a GPU (default: "
                        "the same device's, benchmarks/fidelity-gpu-"
                        "<device>.json, else book/reference/<device>.json)")
    p.add_argument("--only", nargs="*", help="measure only these effects")
    p.add_argument("--judge", metavar="STORED",
                   help="measure nothing: judge a stored --json again by "
                        "today's rules and reference (e.g. after a new "
                        "capture, or a change of the rules)")
    args = p.parse_args(argv)
    if args.judge:
        result = judge(json.loads(Path(args.judge).read_text()),
                       args.reference)
    else:
        result = run(args.only, args.reference)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(result))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
