"""Rehearse the GPU lane on the CPU device model, before spending device time.

    python tools/gpu/rehearse.py [LESSON ...] [--out DIR] [--no-lane]

LESSON: a notebook's path, or a lesson's name (``05_1_queues``, ``05_1``).

Executes copies of the lessons (default: all of them) on the CPU device
model with ``src.BACKEND`` set to ``"gpu"`` and ``src.pick`` giving the
model's sizes, so every branch a lesson takes only on a GPU (``if BACKEND
== "gpu"``) runs and glues its words, at sizes the model can afford. The
lessons in ``book/`` are not changed; the executed copies go to ``DIR``
(default ``.gpu/rehearsal/``, ignored by git).

It reports, for each lesson, the errors outside cells tagged
``raises-exception`` (the exit status is 1 if there are any), and every
glued text that reads differently from the stored run's: the GPU
branches' words, for a reviewer to read beside the numbers. What it cannot
rehearse: code that only real CuPy runs (NVML's library, real kernels),
and the GPU's own numbers; the lessons' ``%globaltimer`` kernels and NVML
run on the model's stand-ins here.

The copies run with the GPU lane's setting, ``BOOK_LANE=1``, as
``tools/gpu/run.sh`` runs the lessons on a lent machine (02.3 then keeps
its managed memory within the device's free memory, and glues none of
the oversubscribed case's values); ``--no-lane`` rehearses a GPU run
outside the lane, without it.
"""
import json
import os
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
sys.path.insert(0, str(ROOT / "tools"))
from execute import (  # noqa: E402  (tools/execute.py)
    lesson_path, lessons, lessons_parser)

#: The first cell of each rehearsed copy. The kernel, and the processes
#: it starts, run on the model whatever BOOK_BACKEND it inherited (the GPU
#: lane's tests run with gpu); ``src.nvml`` is chosen before BACKEND
#: changes, so the model's stand-in serves the GPU branches.
PATCH = ("import os\n"
         "os.environ['BOOK_BACKEND'] = 'cpu'\n"
         "import src\n"
         "src.nvml\n"
         "src.BACKEND = 'gpu'\n"
         "src.pick = lambda cpu, gpu: cpu\n")


def patch(lane=True, setup=""):
    """The first cell of a rehearsed copy: `PATCH`, ``BOOK_LANE`` set to
    ``1`` (``lane``, as the GPU lane sets it) or unset, then ``setup``
    (code of a test's, such as a spy)."""
    env = ("os.environ['BOOK_LANE'] = '1'\n" if lane else
           "os.environ.pop('BOOK_LANE', None)\n")
    return PATCH + env + setup


def rehearse(path, out_dir, timeout=600, lane=True, setup=""):
    """Execute a copy of lesson ``path`` as on a GPU, on the model (as
    the GPU lane runs it, with ``BOOK_LANE=1``, unless ``lane`` is
    false; ``setup``: code run first, see `patch`); write it to
    ``out_dir``; return ``(errors, changed)``: the unexpected errors as
    ``[(cell index, error name)]`` (indices of the lesson, not the copy)
    and ``{key: text}`` of glued texts that differ from the stored
    run's."""
    import nbformat
    from src.reference import store, writer
    stored = store.read_glued(json.loads(Path(path).read_text()))
    nb = nbformat.read(str(path), as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(patch(lane, setup)))
    try:
        writer.execute_notebook(nb, timeout=timeout)
    finally:
        del nb.cells[0]
        nbformat.write(nb, str(Path(out_dir) / Path(path).name))
    executed = json.loads(nbformat.writes(nb))
    changed = {}
    for key, record in store.read_glued(executed).items():
        value, before = record["value"], stored.get(key, {}).get("value")
        if isinstance(value, str) and value != before:
            changed[key] = value
    return writer.unexpected_errors(executed), changed


def main(argv=None):
    parser = lessons_parser(__doc__)
    parser.add_argument("--out", default=str(ROOT / ".gpu" / "rehearsal"),
                        help="where the executed copies go")
    parser.add_argument("--no-lane", dest="lane", action="store_false",
                        help="without the GPU lane's BOOK_LANE=1")
    args = parser.parse_args(argv)
    os.environ["BOOK_BACKEND"] = "cpu"      # the model, even beside a GPU
    sys.path.insert(0, str(BOOK))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    failed = False
    for path in lessons(args):
        t = time.time()
        errors, changed = rehearse(path, args.out, args.timeout,
                                   args.lane)
        failed = failed or bool(errors)
        print(f"{path.name}: {'errors ' + str(errors) if errors else 'ok'}"
              f" in {time.time() - t:.0f} s")
        for key, text in sorted(changed.items()):
            print(textwrap.fill(f"{key}: {text}", 78,
                                initial_indent="  ",
                                subsequent_indent="      "))
    print(f"executed copies in {args.out}"
          + (", with the GPU lane's BOOK_LANE=1" if args.lane else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
