"""The GPU lane on a lent machine (tools/gpu/): what it may ask of the GPU,
and what it brings.

The lent machine's rule: never ask for more managed memory than the device
has free, which can hang it. 02.3's GPU branch, as the lane runs it
(``BOOK_LANE=1``, which tools/gpu/run.sh sets), keeps to it; rehearsed on
the model (tools/gpu/rehearse.py) with a spy on every managed allocation.
The lent machine has no package index: the wheels prepare.sh packs must
run there beside only the image's packages.
"""
import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

import scripts
import subproc
from src.reference import store, writer

ROOT = scripts.ROOT
LESSON = ROOT / "book" / "02_3_allocators.ipynb"

#: Code run first in a rehearsed copy: every managed allocation, whatever
#: calls it, appends ``[bytes asked for, bytes free]`` to LOG.
SPY = """
import json as _json
from src.cpudevice.cuda import managed as _managed
from src.cpudevice.cuda import runtime as _runtime
_init = _managed.ManagedMemory.__init__


def _spied(self, size, *args, **kwargs):
    with open({log!r}, "a") as _log:
        _log.write(_json.dumps([int(size), int(_runtime.memGetInfo()[0])])
                   + "\\n")
    _init(self, size, *args, **kwargs)


_managed.ManagedMemory.__init__ = _spied
"""


def rehearse_02_3(tmp_path, lane):
    """Rehearse 02.3's GPU branch with or without the lane's setting;
    return ``(errors, asked, nb)``: its unexpected errors, the managed
    allocations ``[(bytes, free bytes)]`` and the executed copy."""
    rehearse = scripts.load("tools/gpu/rehearse.py")
    log, out = tmp_path / "managed.jsonl", tmp_path / "out"
    out.mkdir()
    errors, _ = rehearse.rehearse(LESSON, out, timeout=300, lane=lane,
                                  setup=SPY.format(log=str(log)))
    asked = [tuple(json.loads(line)) for line in
             log.read_text().splitlines()] if log.exists() else []
    nb = json.loads((out / LESSON.name).read_text())
    return errors, asked, nb


def oversubscribed_keys(nb):
    """The keys the cell that glues the managed-memory case's numbers
    glues (the one that glues ``managed_ms``), read from ``nb``."""
    glued = store.read_glued(nb)
    cell = glued["managed_ms"]["index"]
    return {k for k, r in glued.items()
            if r["index"] == cell and not k.endswith(store.REF_SUFFIX)}


def test_02_3_on_the_lane_asks_for_no_more_managed_memory_than_is_free(
        tmp_path):
    errors, asked, nb = rehearse_02_3(tmp_path, lane=True)
    assert errors == []
    assert asked, "the lane's run allocated no managed memory"
    assert all(size <= free for size, free in asked), asked
    # and it glues none of the oversubscribed case's numbers nor keeps its
    # figure (the reference keeps a GPU's that ran it as written), but
    # everything else the lesson measures
    stored = json.loads(LESSON.read_text())
    skipped = oversubscribed_keys(stored)
    assert {"managed_ms", "big_mib", "room_mib"} <= skipped
    glued = {k for k in store.read_glued(nb)
             if not k.endswith(store.REF_SUFFIX)}
    assert not glued & skipped
    assert set(store.read_glued(stored)) - skipped - glued <= {
        k for k in store.read_glued(stored) if k.endswith(store.REF_SUFFIX)}
    assert len(writer.figures(nb)) == len(writer.figures(stored)) - 1
    assert "BOOK_LANE=1: the data is" in json.dumps(nb)


def test_02_3_off_the_lane_oversubscribes_as_the_spy_sees(tmp_path):
    """The control: without the lane's setting the GPU branch asks for 1.5
    times the free memory, and the spy above sees it."""
    errors, asked, nb = rehearse_02_3(tmp_path, lane=False)
    assert errors == []
    assert any(size > free for size, free in asked), asked
    assert oversubscribed_keys(nb) == oversubscribed_keys(
        json.loads(LESSON.read_text()))


@pytest.mark.slow
def test_the_packed_wheels_run_a_kernel_beside_only_the_images_packages(
        tmp_path):
    """tools/gpu/prepare.sh packs the pinned wheels (from the package
    index), and tools/gpu/check_prepared.py finds each dependency packed
    or the image's, then installs them as run.sh does into a clean Python
    3.12 beside only the image's packages: they import nbval, myst_nb,
    nbclient and ipykernel and start a kernel."""
    index = subproc.command(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
         "--only-binary=:all:", "-d", str(tmp_path / "probe"),
         "nbval==0.11.0"], timeout=120)
    if index.returncode:
        pytest.skip("the package index is out of reach: "
                    + index.stderr.strip()[-200:])
    gpu = tmp_path / "tools" / "gpu"
    gpu.mkdir(parents=True)
    for name in ("prepare.sh", "run.sh", "lane-wheels.txt"):
        shutil.copy(ROOT / "tools" / "gpu" / name, gpu)
    packed = subproc.command(["bash", str(gpu / "prepare.sh")], timeout=300)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    assert "prepared: 34 pinned wheels for Python 3.12" in packed.stdout
    checked = subproc.command(
        [sys.executable, str(ROOT / "tools" / "gpu" / "check_prepared.py"),
         "--whl", str(tmp_path / ".gpu" / "whl")], timeout=600)
    if checked.returncode == 77:
        pytest.skip(checked.stdout.strip().splitlines()[-1])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "a kernel ran the cell: (3, 12)" in checked.stdout
    assert "nbval: 1 passed" in checked.stdout


def lane(root, *steps, budget="200", **env):
    """tools/gpu/run.sh run from ``root`` as from a project root."""
    run = shutil.copy(ROOT / "tools" / "gpu" / "run.sh", root)
    env = dict(OUT=str(root / "out"), BUDGET_S=budget, **env)
    env["PATH"] = str(Path(sys.executable).parent) + ":/usr/bin:/bin"
    return subproc.command(["bash", run, *steps], timeout=180, cwd=root,
                           env=env)


def test_the_lane_runs_the_lessons_and_fidelity_by_default_with_its_setting(
        tmp_path):
    """The first call of the plan: lessons and fidelity, no tests or bench,
    and the lessons see BOOK_LANE=1."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nprint(os.environ.get('BOOK_LANE'))")]
    (tmp_path / "book").mkdir()
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "nbtexts.py", tmp_path / "tests")
    nbformat.write(nb, str(tmp_path / "book" / "01_lesson.ipynb"))
    lane(tmp_path)
    steps = [line.split(":")[0] for line in
             (tmp_path / "out" / "steps.log").read_text().splitlines()]
    assert steps == ["lessons", "fidelity"], steps
    ran = nbformat.read(str(tmp_path / "out" / "nb" / "01_lesson.ipynb"), 4)
    assert ran.cells[0].outputs[0].text == "1\n"


def test_the_lane_shows_pips_error_when_the_wheels_do_not_install(tmp_path):
    (tmp_path / ".gpu" / "whl").mkdir(parents=True)
    (tmp_path / ".gpu" / "whl" / "broken-1.0-py3-none-any.whl").write_text(
        "not a zip file")
    out = lane(tmp_path, "bench", budget="0")
    assert out.returncode == 1, out.stdout + out.stderr
    said = out.stdout.split("installing the wheels in .gpu/whl failed:")[1]
    assert "ERROR: Wheel 'broken' located at" in said, out.stdout
    assert "broken-1.0-py3-none-any.whl is invalid" in said, out.stdout


@pytest.fixture
def gpu_out(tmp_path):
    """A GPU run's $OUT: fidelity-gpu.json and run.json, of an H200."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "fidelity-gpu.json").write_text(json.dumps(
        {"backend": "gpu", "devices": ["NVIDIA H200"], "effects": {}}))
    (out / "run.json").write_text(json.dumps(
        {"device": {"name": "NVIDIA H200"}}))
    (tmp_path / "benchmarks").mkdir()
    return out


def test_a_gpu_fidelity_run_is_kept_as_its_devices_own_file(gpu_out):
    dest = scripts.load("tools/gpu/fidelity_dest.py").destination
    benchmarks = gpu_out.parent / "benchmarks"
    assert dest(gpu_out, benchmarks) == \
        benchmarks / "fidelity-gpu-nvidia-h200.json"
    assert dest(gpu_out, benchmarks, ["x.ipynb", "--device", "h200-x"]) \
        == benchmarks / "fidelity-gpu-h200-x.json"
    assert dest(gpu_out, benchmarks, ["--device=h200-y"]).name == \
        "fidelity-gpu-h200-y.json"
    (benchmarks / "fidelity-gpu-nvidia-h200.json").write_text(json.dumps(
        {"devices": ["NVIDIA H200"]}))           # the same device's: kept
    assert dest(gpu_out, benchmarks).is_file()
    (benchmarks / "fidelity-gpu-nvidia-h200.json").write_text(json.dumps(
        {"devices": ["NVIDIA H200 NVL"]}))       # another device's
    with pytest.raises(SystemExit, match="holds a run of NVIDIA H200 NVL"):
        dest(gpu_out, benchmarks)


def test_a_fidelity_run_on_the_model_is_not_kept_as_a_gpus(gpu_out):
    dest = scripts.load("tools/gpu/fidelity_dest.py").destination
    (gpu_out / "fidelity-gpu.json").write_text(json.dumps(
        {"backend": "cpu", "devices": ["CPU device model 0"]}))
    with pytest.raises(SystemExit, match="not a GPU"):
        dest(gpu_out, gpu_out.parent / "benchmarks")
