"""The reference runs (book/reference/): a real GPU's numbers beside each
lesson's, each in a known state, and no glued number without a reference
or a reason for having none."""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import nbformat
import pytest
import yaml

import scripts
import subproc
import src
from modelkit import model_profile, nvidia_smi_fields
from src import reference as R
from src.reference.prose import is_markdown

BOOK = Path(__file__).resolve().parents[1] / "book"
LESSONS = R.lesson_names(BOOK)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwAD"
    "hgGAWjR9awAAAABJRU5ErkJggg==")

#: Where a lesson's glue calls go (`src.reference.glue.glue`, myst_nb's
#: bundle without myst_nb): a test records them by patching it.
GLUE = "src.reference.glue.glue"


def read(path):
    return json.loads(Path(path).read_text())


def glued_keys(nb):
    return {k for k in R.read_glued(nb) if not k.endswith(R.REF_SUFFIX)}


# -- the pieces ---------------------------------------------------------------
def test_fingerprint_ignores_blank_lines_and_trailing_spaces():
    code = "x = 1\ny = x + 1\nglue('y', y)"
    assert R.fingerprint(code) == R.fingerprint(
        "\nx = 1   \n\n\ny = x + 1\t\nglue('y', y)\n\n")
    assert R.fingerprint(code) != R.fingerprint(code.replace("1", "2", 1))
    assert R.fingerprint(code) != R.fingerprint("    " + code)   # indent


def test_stored_fingerprints_have_the_form_fingerprint_gives():
    """A reference stores each value's cell by `fingerprint`: one of
    another length or hash would never equal a cell's now, so every
    stored value would read stale."""
    form = re.compile(f"^[0-9a-f]{{{len(R.fingerprint('x = 1'))}}}$")
    for path in sorted(R.store.REFERENCE_DIR.glob("*.json")):
        lessons = read(path).get("lessons")
        if lessons is None:
            continue                    # exclusions.json
        cells = [e["cell"] for part in lessons.values()
                 for kind in ("values", "data")
                 for e in part.get(kind, {}).values()]
        cells += [f["cell"] for part in lessons.values()
                  for f in part.get("figures", [])]
        assert cells and all(form.match(c) for c in cells), path.name
    states = R.report()
    assert any(s[R.CURRENT] for s in states.values())


def test_format_value():
    assert R.format_value(1048576) == "1,048,576"
    assert R.format_value(2928.6214) == "2,929"
    assert R.format_value(188.0292) == "188"
    assert R.format_value(0.0024312) == "0.00243"
    assert R.format_value(1.5e-8) == "1.5e-08"
    assert R.format_value(0.0) == "0"
    assert R.format_value(float("nan")) == "nan"
    assert R.format_value(True) == "True"
    assert R.format_value("faster") == "faster"
    np = pytest.importorskip("numpy")
    assert R.format_value(np.float32(2.5)) == "2.5"
    assert R.format_value(np.int64(4096)) == "4,096"


def test_parse_glued_reads_numbers_text_and_numpy_scalars():
    assert R.parse_glued("4096") == 4096
    assert R.parse_glued("0.25") == 0.25
    assert R.parse_glued("'faster'") == "faster"
    assert R.parse_glued("np.float64(1.5)") == 1.5
    assert R.parse_glued("<object at 0x1>") == "<object at 0x1>"


def test_device_slug():
    assert R.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100"
    assert R.device_slug("NVIDIA H200") == "nvidia-h200"
    assert R.device_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100"
    assert R.device_slug("NVIDIA GeForce RTX 4090") == \
        "nvidia-geforce-rtx-4090"


def test_capture_refuses_the_cpu_model_without_the_flag(monkeypatch,
                                                        tmp_path):
    with pytest.raises(R.RefusedError, match="CPU device model"):
        R.refuse_model("cpu", allow_model=False)
    R.refuse_model("cpu", allow_model=True)
    R.refuse_model("gpu", allow_model=False)
    if src.BACKEND == "gpu":
        return                  # main(["capture"]) would run the lessons
    monkeypatch.setattr(R.store, "REFERENCE_DIR", tmp_path)

    def never(*args, **kwargs):
        raise AssertionError("capture ran a lesson on the model")
    monkeypatch.setattr(R.writer, "execute", never)
    monkeypatch.setattr("subprocess.run", never)
    assert R.main(["capture"]) == 2
    assert not list(tmp_path.iterdir())


def test_capture_reads_the_device_in_its_own_process_then_checks_names(
        monkeypatch, tmp_path):
    """With --allow-model, capture asks a `run-info` process for the device
    (its JSON on stdout), then refuses a lesson that does not exist before
    it runs anything."""
    monkeypatch.setattr(R.store, "REFERENCE_DIR", tmp_path)

    def never(*args, **kwargs):
        raise AssertionError("capture ran a lesson")
    monkeypatch.setattr(R.writer, "execute", never)
    with pytest.raises(R.RefusedError, match="^no such lesson: 99_nothing$"):
        R.capture(["99_nothing.ipynb"], allow_model=True)
    assert not list(tmp_path.iterdir())


def test_capture_saves_the_executed_lessons_only_where_asked(
        monkeypatch, tmp_path):
    """``capture --save DIR`` also writes each executed lesson into DIR
    (what the lessons showed on the GPU, for reading); without it, only
    the reference is written."""
    book, root = tmp_path / "book", tmp_path / "reference"
    write_nb(synthetic_lesson(), book / "99_synthetic.ipynb")
    monkeypatch.setattr(R.store, "BOOK", book)
    monkeypatch.setattr(R.store, "REFERENCE_DIR", root)
    executed = json.loads(nbformat.writes(synthetic_lesson()))
    probe = {"device": {"name": "NVIDIA H200", "backend": "cpu"}}

    def run(args, **kwargs):            # the run-info process
        assert args[-1] == "run-info"
        return subprocess.CompletedProcess(args, 0, json.dumps(probe), "")
    monkeypatch.setattr(R.writer.subprocess, "run", run)
    monkeypatch.setattr(R.writer, "git_commit", lambda: "abc1234")
    monkeypatch.setattr(R.writer, "execute", lambda path, timeout: executed)
    saved = tmp_path / "saved"
    path = R.capture(["99_synthetic"], allow_model=True, save_dir=saved)
    assert path == root / "nvidia-h200.json"
    assert read(saved / "99_synthetic.ipynb") == executed
    path.unlink()
    assert R.capture(["99_synthetic"], allow_model=True) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "book", "reference", "saved"]
    assert [p.name for p in saved.iterdir()] == ["99_synthetic.ipynb"]


# -- a small synthetic lesson -------------------------------------------------
def glue_output(name, data):
    return nbformat.v4.new_output(
        "display_data", data={R.GLUE_PREFIX + k: v for k, v in data.items()},
        metadata={"scrapbook": {"name": name, "mime_prefix": R.GLUE_PREFIX}})


def synthetic_lesson(banner="Backend: GPU, CuPy 14.2.0\n"
                     "  device 0: NVIDIA H200, 139.8 GiB\n"):
    nb = nbformat.v4.new_notebook()
    first = nbformat.v4.new_code_cell("from src import banner\nbanner()")
    first.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                            text=banner)]
    measure = nbformat.v4.new_code_cell(
        "ms = 1.5\nglue('ms', ms)\nglue('size', 4096)\n"
        "glue('word', Markdown('faster'))")
    measure.outputs = [
        glue_output("ms", {"text/plain": "1.5"}),
        glue_output("ms_ref", {"text/plain": "'2.0'"}),
        glue_output("size", {"text/plain": "4096"}),
        glue_output("word", {"text/plain": "<IPython.core.display.Markdown "
                             "object>", "text/markdown": "faster"})]
    figure = nbformat.v4.new_code_cell(
        "ref.data('sweep', n=[1, 2], ms=[0.5, 0.75])\nplt.plot(x, y)")
    figure.metadata["mystnb"] = {"figure": {"caption": "Time against n.",
                                            "name": "fig-sweep"}}
    figure.outputs = [
        glue_output("sweep", {"text/plain": "figure data: n (2), ms (2)",
                              R.FIGURE_DATA: {"n": [1, 2],
                                              "ms": [0.5, 0.75]}}),
        nbformat.v4.new_output("display_data", data={
            "image/png": base64.b64encode(PNG).decode(),
            "text/plain": "<Figure>"})]
    failing = nbformat.v4.new_code_cell("cp.empty(-1)")
    failing.metadata["tags"] = ["raises-exception"]
    failing.outputs = [nbformat.v4.new_output(
        "error", ename="ValueError", evalue="negative", traceback=[])]
    nb.cells = [nbformat.v4.new_markdown_cell("# 99. Synthetic"), first,
                measure, figure, failing]
    return nb


def write_nb(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def test_a_key_only_a_gpu_glues_is_current_while_its_cell_is_unchanged(
        tmp_path):
    """05.2 glues its big demo's times with f-string keys, in a branch only
    a GPU takes: the model's run shows neither the key nor a literal name.
    Its captured value is current while the cell that glued it is there
    unchanged; once that cell changes, the status no longer lists it (and
    `Lesson.status` calls it stale)."""
    src = ("if runs_big:\n    for v in versions:\n"
           "        glue(f'big_{v}_ms', big_ms[v])")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src)]
    write_nb(nb, tmp_path / "99_gpu_only.ipynb")
    ref = {"lessons": {"99_gpu_only": {"values": {
        "big_v2_ms": {"value": 4.2, "cell": R.fingerprint(src)}}}}}

    def state():
        return R.lesson_status("99_gpu_only", book=tmp_path, reference=ref,
                               exclusions={}).get("big_v2_ms")
    assert state() == R.CURRENT
    nb.cells[0].source = src.replace("big_ms[v]", "2 * big_ms[v]")
    write_nb(nb, tmp_path / "99_gpu_only.ipynb")
    assert state() is None          # no longer glued: the capture's to redo


def test_read_glued_kinds():
    glued = R.read_glued(json.loads(nbformat.writes(synthetic_lesson())))
    assert glued["ms"]["value"] == 1.5 and glued["ms"]["kind"] == "value"
    assert glued["word"]["value"] == "faster"
    assert glued["sweep"]["kind"] == "data"
    assert glued["sweep"]["value"] == {"n": [1, 2], "ms": [0.5, 0.75]}


def test_import_round_trip(tmp_path):
    run = write_nb(synthetic_lesson(), tmp_path / "out" / "nb" /
                   "99_synthetic.ipynb")
    root = tmp_path / "reference"
    path = R.import_notebooks([run], commit="abc1234", date="2026-11-23",
                              root=root)
    assert path == root / "nvidia-h200.json"
    ref = read(path)
    assert ref["device"]["name"] == "NVIDIA H200"
    assert ref["device"]["cupy"] == "14.2.0"
    assert (ref["date"], ref["commit"]) == ("2026-11-23", "abc1234")
    part = ref["lessons"]["99_synthetic"]
    assert (part["date"], part["commit"]) == ("2026-11-23", "abc1234")
    assert {k: v["value"] for k, v in part["values"].items()} == {
        "ms": 1.5, "size": 4096, "word": "faster"}        # no *_ref
    assert part["data"]["sweep"]["series"] == {"n": [1, 2],
                                               "ms": [0.5, 0.75]}
    [figure] = part["figures"]
    assert figure["file"] == "nvidia-h200/99_synthetic-cell03.png"
    assert figure["caption"] == "Time against n."
    assert (root / figure["file"]).read_bytes() == PNG

    # The lesson as it is now: the same code is current, ...
    book = tmp_path / "book"
    nb = synthetic_lesson()
    write_nb(nb, book / "99_synthetic.ipynb")
    exclusions = {"99_synthetic": {"size": "chosen by the lesson"}}

    def states():
        return R.lesson_status("99_synthetic", "nvidia-h200", book=book,
                               exclusions=exclusions, root=root)
    assert states() == {"ms": R.CURRENT, "word": R.CURRENT,
                        "sweep": R.CURRENT, "size": R.EXCLUDED}
    # ... blank lines and trailing spaces change nothing, ...
    nb.cells[2].source = "\n" + nb.cells[2].source.replace("\n", "  \n\n")
    write_nb(nb, book / "99_synthetic.ipynb")
    assert states()["ms"] == R.CURRENT
    # ... changed code is stale, and a new key is not captured.
    nb.cells[2].source += "\nglue('new_ms', 2 * ms)"
    write_nb(nb, book / "99_synthetic.ipynb")
    assert states() == {"ms": R.STALE, "word": R.STALE, "sweep": R.CURRENT,
                        "size": R.EXCLUDED, "new_ms": R.NOT_CAPTURED}

    # Importing again keeps the other lessons' parts.
    other = write_nb(synthetic_lesson(), tmp_path / "b" / "98_other.ipynb")
    R.import_notebooks([other], commit="def5678", date="2026-11-24",
                       root=root)
    ref = read(path)
    assert set(ref["lessons"]) == {"98_other", "99_synthetic"}
    assert ref["lessons"]["99_synthetic"]["commit"] == "abc1234"
    assert ref["commit"] == "def5678"


def test_import_reads_the_run_beside_the_notebooks(tmp_path):
    """tools/gpu/run.sh writes run.json (``run-info``) beside nb/."""
    run = write_nb(synthetic_lesson(), tmp_path / "out" / "nb" /
                   "99_synthetic.ipynb")
    (tmp_path / "out" / "run.json").write_text(json.dumps({
        "date": "2026-11-30", "commit": "1234abc",
        "device": {"name": "NVIDIA H200", "backend": "gpu",
                   "cuda_runtime": "13.0", "sms": 132}}))
    ref = read(R.import_notebooks([run], root=tmp_path / "reference"))
    assert (ref["date"], ref["commit"]) == ("2026-11-30", "1234abc")
    assert ref["device"] == {"name": "NVIDIA H200", "backend": "gpu",
                             "cuda_runtime": "13.0", "sms": 132,
                             "cupy": "14.2.0"}


def synthetic_book(monkeypatch, tmp_path):
    """The synthetic lesson as the book's only lesson, and as run on a GPU;
    returns the `import` command that stores that run as ``gpu-x``."""
    run = write_nb(synthetic_lesson(), tmp_path / "run" /
                   "99_synthetic.ipynb")
    book = tmp_path / "book"
    write_nb(synthetic_lesson(), book / "99_synthetic.ipynb")
    monkeypatch.setattr(R.store, "BOOK", book)
    monkeypatch.setattr(R.store, "REFERENCE_DIR", tmp_path / "reference")
    return ["import", str(run), "--device", "gpu-x", "--commit", "abc1234",
            "--date", "2026-11-23"]


def test_the_import_command_writes_the_reference_and_shows_its_status(
        monkeypatch, tmp_path, capsys):
    assert R.main(synthetic_book(monkeypatch, tmp_path)) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "gpu-x.json" in out
    assert "reference gpu-x: NVIDIA H200, captured 2026-11-23" in out
    assert read(tmp_path / "reference" / "gpu-x.json")["commit"] == \
        "abc1234"


def test_mark_stale_marks_values_and_figures_whose_code_changed(
        monkeypatch, tmp_path, capsys):
    """A value whose cell is unchanged but whose measured code (in
    book/src) has changed is marked stale by hand, with the reason, and
    shows as stale; a name the reference lacks is refused; a new import
    drops the marks."""
    imported = synthetic_book(monkeypatch, tmp_path)
    assert R.main(imported) == 0
    assert R.lesson_status("99_synthetic", "gpu-x")["ms"] == R.CURRENT
    assert R.main(["mark-stale", "99_synthetic", "ms", "fig-sweep",
                   "--why", "the kernel changed", "--device", "gpu-x"]) == 0
    status = R.lesson_status("99_synthetic", "gpu-x")
    assert status["ms"] == R.STALE and status["size"] == R.CURRENT
    capsys.readouterr()
    R.print_status("gpu-x")
    out = capsys.readouterr().out
    assert "  stale: ms\n" in out
    assert "  marked stale (the kernel changed): ms, figure fig-sweep" in out
    assert "figures: 0 current, 1 stale" in out
    assert R.main(["mark-stale", "99_synthetic", "nothing", "--why", "x",
                   "--device", "gpu-x"]) == 2
    assert "has no value or figure nothing" in capsys.readouterr().err
    with pytest.raises(ValueError, match="say why"):
        R.writer.mark_stale("99_synthetic", ["ms"], " ", "gpu-x")
    assert R.main(imported) == 0
    assert R.lesson_status("99_synthetic", "gpu-x")["ms"] == R.CURRENT


def _counts(device):
    return [sum(len(states[s]) for states in R.report(device).values())
            for s in R.STATES]


def test_move_gives_a_split_lessons_reference_to_its_sections(
        monkeypatch, tmp_path, capsys):
    """A lesson split into sections keeps its reference: ``move`` gives
    each value to the section that glues it now, each figure (and its PNG
    file) to the one that draws it, each exclusion to the section of its
    key, and ``status`` counts the same before and after; a section that
    is not in the book is refused."""
    assert R.main(synthetic_book(monkeypatch, tmp_path)) == 0
    root, book = tmp_path / "reference", tmp_path / "book"
    (root / "exclusions.json").write_text(json.dumps(
        {"99_synthetic": {"word": "chosen by the lesson"}}))
    before = _counts("gpu-x")
    nb = synthetic_lesson()
    title, first, measure, figure, failing = nb.cells
    first_nb, second_nb = synthetic_lesson(), synthetic_lesson()
    first_nb.cells = [title, first, measure]
    second_nb.cells = [title, first, figure, failing]
    (book / "99_synthetic.ipynb").unlink()
    write_nb(first_nb, book / "98_first.ipynb")
    write_nb(second_nb, book / "99_second.ipynb")
    assert R.main(["move", "99_synthetic", "98_first", "99_nothing"]) == 2
    assert "unknown: 99_nothing" in capsys.readouterr().err
    assert R.main(["move", "99_synthetic", "98_first", "99_second"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert _counts("gpu-x") == before
    lessons = read(root / "gpu-x.json")["lessons"]
    assert set(lessons) == {"98_first", "99_second"}
    assert set(lessons["98_first"]["values"]) == {"ms", "size", "word"}
    assert set(lessons["99_second"]["data"]) == {"sweep"}
    assert lessons["98_first"]["commit"] == "abc1234"
    [moved] = lessons["99_second"]["figures"]
    assert moved["file"] == "gpu-x/99_second-cell02.png"
    assert (root / moved["file"]).read_bytes() == PNG
    assert not list(root.glob("gpu-x/99_synthetic-*"))
    assert R.lesson_status("98_first", "gpu-x") == {
        "ms": R.CURRENT, "size": R.CURRENT, "word": R.EXCLUDED}
    assert R.load_exclusions(root) == {
        "98_first": {"word": "chosen by the lesson"}}


def test_mark_stale_without_a_reason_is_a_usage_error(capsys):
    """``--why`` is a required option of ``mark-stale``: its absence is
    argparse's usage error, before any reference is read."""
    with pytest.raises(SystemExit) as exit_:
        R.main(["mark-stale", "99_synthetic", "ms"])
    assert exit_.value.code == 2
    assert "the following arguments are required: --why" in \
        capsys.readouterr().err


def test_a_gpus_record_reads_device_0_with_its_sizes_in_mib_and_gib(
        monkeypatch):
    """On a GPU, `device_info` reads device 0 (the one the lessons use)
    from CuPy's runtime: its L2 cache in MiB, its memory in GiB (one
    decimal), CUDA's versions as major.minor."""
    asked = []

    class Runtime:
        @staticmethod
        def getDeviceProperties(index):
            asked.append(index)
            return {"name": b"NVIDIA H100 80GB HBM3",
                    "multiProcessorCount": 132, "l2CacheSize": 50 * 2**20,
                    "totalGlobalMem": 85_520_809_984, "major": 9,
                    "minor": 0, "asyncEngineCount": 3,
                    "concurrentKernels": 1}
        @staticmethod
        def deviceGetPCIBusId(index):
            asked.append(index)
            return "0000:3B:00.0"
        runtimeGetVersion = staticmethod(lambda: 12080)
        driverGetVersion = staticmethod(lambda: 13000)

    class FakeCupy:
        __version__ = "14.2.0"
        cuda = type("cuda", (), {"runtime": Runtime})
    monkeypatch.setattr(src, "BACKEND", "gpu")
    monkeypatch.setattr(src, "cp", FakeCupy)
    monkeypatch.setattr(R.machine, "_nvidia_smi",
                        lambda bus_id: asked.append(bus_id) or {})
    info = R.device_info()
    # nvidia-smi is asked by the PCI bus id of CUDA's device 0, not by 0
    assert asked == [0, 0, "0000:3B:00.0"]
    assert (info["name"], info["sms"]) == ("NVIDIA H100 80GB HBM3", 132)
    assert info["l2_mib"] == 50
    assert info["memory_gib"] == 79.6
    assert (info["compute_capability"], info["cuda_runtime"],
            info["cuda_driver"]) == ("9.0", "12.8", "13.0")
    assert info["cupy"].startswith("14.2.0")


@pytest.mark.parametrize("code, out, fields", [
    (0, "550.54.15, 5, 16\n", {"driver": "550.54.15",
                                "link": "PCIe 5.0 x16"}),
    (0, "550.54.15, 4, [N/A]\n", {"driver": "550.54.15", "link": "PCIe 4.0"}),
    (0, "550.54.15, [N/A], [N/A]\n", {"driver": "550.54.15"}),
    (0, "No devices were found\n", {}),
    (9, "550.54.15, 5, 16\n", {}),      # it failed: what it printed is void
    (None, "", {}),                     # not installed
])
def test_a_gpus_record_takes_driver_and_link_from_nvidia_smi(
        monkeypatch, code, out, fields):
    def run(args, check=False, **kwargs):
        assert args[0] == "nvidia-smi" and "--id=0000:3B:00.0" in args
        if code is None:
            raise FileNotFoundError(args[0])
        done = subprocess.CompletedProcess(args, code, out, "")
        if check:
            done.check_returncode()
        return done
    monkeypatch.setattr("subprocess.run", run)
    assert nvidia_smi_fields("0000:3B:00.0") == fields


def test_import_refuses_the_model_and_unexpected_errors(tmp_path):
    model = write_nb(synthetic_lesson(
        "Backend: CPU device model (...)\n  device 0: Model, 1.0 GiB\n"),
        tmp_path / "m" / "99_synthetic.ipynb")
    with pytest.raises(R.RefusedError, match="CPU device model"):
        R.import_notebooks([model], device="model", root=tmp_path / "r")
    nb = synthetic_lesson()
    nb.cells[-1].metadata["tags"] = []
    broken = write_nb(nb, tmp_path / "e" / "99_synthetic.ipynb")
    with pytest.raises(R.RefusedError, match="lessons failed"):
        R.import_notebooks([broken], root=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_lesson_glues_the_reference_beside_each_value(monkeypatch,
                                                      tmp_path):
    glued = []
    monkeypatch.setattr(GLUE, lambda name, value, display=True:
                        glued.append((name, value)))
    run = write_nb(synthetic_lesson(), tmp_path / "run" / "99_synthetic"
                   ".ipynb")
    R.import_notebooks([run], device="gpu-x", commit="abc1234",
                       date="2026-11-23", root=tmp_path / "reference")
    book = tmp_path / "book"
    write_nb(synthetic_lesson(), book / "99_synthetic.ipynb")
    (tmp_path / "reference" / "exclusions.json").write_text(json.dumps(
        {"99_synthetic": {"size": "chosen by the lesson"}}))
    # The package reads the book's and the references' folders from
    # src.reference.store, whichever of its modules runs.
    monkeypatch.setattr(R.store, "BOOK", book)
    monkeypatch.setattr(R.store, "REFERENCE_DIR", tmp_path / "reference")
    ref = R.Lesson("99_synthetic", device="gpu-x")
    assert ref.captured and not R.Lesson("99_other", device="gpu-x").captured
    ref.glue("ms", 3.25)
    ref.glue("size", 4096)
    ref.glue("unknown", 7.0)
    assert glued == [("ms", 3.25), ("ms_ref", "1.5"), ("size", 4096),
                     ("unknown", 7.0), ("unknown_ref", R.MISSING)]
    assert ref.status("size") == R.EXCLUDED
    assert ref.reference("ms") == 1.5
    series = ref.data("sweep", n=range(2), ms=[0.5, 0.75])
    assert series == {"n": [0, 1], "ms": [0.5, 0.75]}
    assert ref.reference("sweep") == {"n": [1, 2], "ms": [0.5, 0.75]}
    with pytest.raises(TypeError):
        ref.data("bad", x=[object()])
    assert {k: s for k, _, _, s in ref.rows()} == {
        "ms": R.CURRENT, "size": R.EXCLUDED, "unknown": R.NOT_CAPTURED,
        "sweep": R.CURRENT}
    # labels, flags and gaps are kept as they are, not made numbers
    assert ref.data("labels", run=["v1", "v2"], ok=[True, False],
                    gap=[None, 1.5]) == {"run": ["v1", "v2"],
                                         "ok": [True, False],
                                         "gap": [None, 1.5]}


def test_the_default_device_is_a_file_the_command_sets(monkeypatch,
                                                      tmp_path, capsys):
    """``book/reference/devices`` names the reference the lessons
    show; ``default SLUG`` changes it, refusing a device with no stored
    reference, and ``status`` says which it is."""
    monkeypatch.setattr(R.store, "REFERENCE_DIR", tmp_path)
    assert R.default_device() == R.FALLBACK_DEVICE == "nvidia-h100"
    assert R.main(["default", "gpu-y"]) == 2
    assert "no reference" in capsys.readouterr().err
    assert not (tmp_path / R.DEFAULT_FILE).exists()
    (tmp_path / "gpu-y.json").write_text(json.dumps(
        {"device": {"name": "NVIDIA H200"}, "lessons": {}}))
    assert R.main(["default", "gpu-y"]) == 0
    assert (tmp_path / R.DEFAULT_FILE).read_text() == "gpu-y\n"
    assert R.set_default_device("gpu-y") == tmp_path / R.DEFAULT_FILE
    assert R.default_device() == "gpu-y"
    assert R.load()["device"]["name"] == "NVIDIA H200"
    capsys.readouterr()
    assert R.main(["default"]) == 0
    assert capsys.readouterr().out == "gpu-y\n"
    R.print_status(book=tmp_path)
    assert "reference devices, in order" in (out := capsys.readouterr().out)
    assert "\n  gpu-y: NVIDIA H200," in out
    with pytest.raises(ValueError):
        R.set_default_device("../gpu-y")


def test_the_book_names_a_stored_default_device():
    assert (R.store.REFERENCE_DIR / R.DEFAULT_FILE).is_file()
    assert R.reference_path(R.default_device()).is_file()


def test_short_name_drops_memory_and_form_factor():
    assert R.short_name("NVIDIA H100 80GB HBM3") == "NVIDIA H100"
    assert R.short_name("NVIDIA H100 PCIe") == "NVIDIA H100"
    assert R.short_name("NVIDIA A100-SXM4-80GB") == "NVIDIA A100"
    assert R.short_name("NVIDIA H200") == "NVIDIA H200"
    assert R.short_name("NVIDIA GeForce RTX 2070 SUPER") == \
        "NVIDIA GeForce RTX 2070 SUPER"


def test_switching_the_default_switches_what_lessons_glue(monkeypatch,
                                                          tmp_path):
    """A copy of the H100's reference stored as another GPU's: once it is
    the default, a lesson glues that GPU's name and values, with no
    argument to change in the lesson."""
    glued = {}
    monkeypatch.setattr(GLUE, lambda name, value, display=True:
                        glued.__setitem__(name, value))
    h100 = R.load("nvidia-h100")
    other = json.loads(json.dumps(h100))
    other["device"]["name"] = "NVIDIA H200"
    lesson = next(iter(other["lessons"]))
    key, entry = next(iter(other["lessons"][lesson]["values"].items()))
    entry["value"] = 12345
    monkeypatch.setattr(R.store, "REFERENCE_DIR", tmp_path)
    (tmp_path / "nvidia-h100.json").write_text(json.dumps(h100))
    (tmp_path / "nvidia-h200.json").write_text(json.dumps(other))
    ref = R.Lesson(lesson)
    assert ref.glue_device() is None        # shows nothing in a lesson
    assert glued["ref_gpu"] == "NVIDIA H100" and \
        glued["ref_gpu_short"] == "H100"
    assert R.main(["default", "nvidia-h200"]) == 0
    ref = R.Lesson(lesson)
    ref.glue_device()
    ref.glue(key, 1.0)
    assert (glued["ref_gpu"], glued["ref_gpu_short"]) == (
        "NVIDIA H200", "H200")
    assert glued[key + R.REF_SUFFIX].startswith("12,345")
    assert ref.device == "nvidia-h200"
    # The device's name is not a measurement: never "not captured".
    nb = {"cells": [{"cell_type": "code", "source": "ref.glue_device()",
                     "outputs": [glue_output("ref_gpu", {
                         "text/plain": "NVIDIA H200"})]}]}
    assert R.unshown_keys(nb, lesson) == []
    assert "ref_gpu" not in R.lesson_reference(nb, lesson, "x")["values"]


def test_figure_data_is_glued_as_json_a_notebook_can_store():
    from IPython.core.formatters import format_display_data
    bundle, _ = format_display_data(R.FigureData({"n": [1, 2]}))
    assert bundle[R.FIGURE_DATA] == {"n": [1, 2]}
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("ref.data('n', n=[1, 2])")
    cell.outputs = [glue_output("n", bundle)]
    nb.cells = [cell]
    nbformat.validate(nb)


def test_status_command_runs_from_book():
    out = subproc.run(["-m", "src.reference", "status"])
    assert out.returncode == 0, out.stderr
    for lesson in LESSONS:
        assert lesson in out.stdout


# -- the book's reference -----------------------------------------------------
def test_the_default_reference_records_device_run_and_figures():
    ref = R.load()
    assert ref["device"].get("name"), "no device name"
    assert ref.get("date") and ref.get("commit")
    for lesson, part in ref["lessons"].items():
        assert part.get("date") and part.get("commit"), lesson
        for figure in part.get("figures", []):
            assert (R.store.REFERENCE_DIR / figure["file"]).is_file(), figure
            assert figure["caption"], figure


@pytest.fixture(params=LESSONS)
def lesson(request):
    return request.param


def test_every_glued_value_has_a_reference_or_a_reason(lesson):
    """Each key a lesson glues (its stored outputs, ``*_ref`` aside) has
    a value in the default reference (current or stale), or an exclusion
    with a reason, or is shown as "not captured": glued through
    `Lesson.glue` (its ``*_ref`` is glued beside it), listed by
    ``ref.compare()``, or figure data glued by `Lesson.data`."""
    bare = R.unshown_keys(read(BOOK / f"{lesson}.ipynb"), lesson)
    assert not bare, (
        f"{lesson} glues {bare} with no reference value, no exclusion and "
        "no 'not captured' shown: glue them through "
        f"`ref = Lesson({lesson!r})`, or list them with a reason in "
        "book/reference/exclusions.json")


def _words(*phrases):
    return "|".join(r"\s+".join(map(re.escape, p.split())) for p in phrases)


#: The facts in which a lesson may still name a GPU by hand: each stays
#: true whichever GPU's run supplies the values beside it (NVIDIA's
#: published figures for H100s; what the book's first run, on an H100,
#: found). Every other mention of a reference GPU goes through glue:
#: {glue:text}`ref_gpu` ("NVIDIA H100") or {glue:text}`ref_gpu_short`
#: ("H100"), which `Lesson.glue_device` glues from the device that
#: supplies most of the lesson's values, or a clause
#: (`Lesson.glue_clause`), which names the device behind its own values
#: and reads its published facts from ``book/reference/device-facts.json``.
GPU_FACTS = (
    "H100 SXM",                                 # 01.1, 01.2: NVIDIA's figure
    "Hopper GPUs such as the H100",             # 01.1: compute capability
    "H100 the book first ran on",               # 01.2, 06.1: its link
    "an H100 has three",                        # 01.1, 05.1: copy engines
    "as an H100 has",                           # 05.3: copy engines
    "an H100's own memory delivers",            # 01.2: published bandwidth
    "On an H100 the book's test suite did see",  # 04.1: that run's finding
    "on an H100, one unconstrained fit",        # 04.2: that run's finding
    "as one of this lesson did on an H100",     # 04.2: the same finding
)
H100_FACTS = re.compile(_words(*GPU_FACTS))

#: The GPUs whose names prose must not write by hand outside `GPU_FACTS`:
#: the book's reference GPUs, the lent one among them.
REFERENCE_GPUS = ("H100", "H200")


def profile_phrases(names):
    """How prose names the CPU device model's profile by a GPU's name:
    "H100 profile", "profile's H100", "H100 of its profile"."""
    alternatives = "|".join(map(re.escape, names))
    return re.compile(rf"\b(?:{alternatives})\s+(?:of\s+its\s+)?profile\b"
                      rf"|profile's\s+(?:{alternatives})\b")


def model_profile_name():
    return model_profile()[1]["name"]


def named_by_hand(text, names=("H100",)):
    """Where ``text`` names one of the GPUs ``names`` other than in an
    allowed fact (`H100_FACTS`): a few words around each."""
    text = H100_FACTS.sub("", text)
    return [" ".join(text[max(0, m.start() - 40):m.end() + 40].split())
            for name in names for m in re.finditer(re.escape(name), text)]


def test_named_by_hand_finds_the_reference_named_by_hand():
    assert named_by_hand("132 on an H100 SXM") == []
    assert named_by_hand("At its published 3.35 TB/s an H100\nwould") == [
        "At its published 3.35 TB/s an H100 would"]
    assert named_by_hand("The H100 the book first\nran on") == []
    assert named_by_hand("its H100 profile") == ["its H100 profile"]
    assert named_by_hand("(H100 reference: 3)") == ["(H100 reference: 3)"]
    assert named_by_hand("| | this run | NVIDIA H100 |") == [
        "| | this run | NVIDIA H100 |"]
    assert named_by_hand("on the H200 too", ("H100", "H200")) == [
        "on the H200 too"]


def test_prose_names_the_reference_gpu_through_glue(lesson):
    """No sentence names the reference GPU by hand, so that switching the
    book's reference (`python -m src.reference default SLUG`) leaves none
    false: the lesson's markdown, and the text it glues (words computed in
    code), name the H100 (or the reference device's model) only in the
    facts of `H100_FACTS`."""
    nb = read(BOOK / f"{lesson}.ipynb")
    names = tuple(sorted({*REFERENCE_GPUS, *(
        R.short_name(R.load(d)["device"]["name"]).split()[-1]
        for d in R.reference_devices())}))
    found = [(f"markdown cell {c.get('id')}", hit)
             for c in nb["cells"] if is_markdown(c)
             for hit in named_by_hand("".join(c["source"]), names)]
    # Words computed in code may name the model's profile from the profile
    # itself (`Lesson.glue_profile`); code that writes it by hand is
    # caught by the next test.
    by_profile = profile_phrases([model_profile_name()])
    found += [(f"glued {k}", hit) for k, rec in R.read_glued(nb).items()
              if isinstance(rec["value"], str) and
              not k.endswith(R.REF_SUFFIX) and k not in R.UNMEASURED_KEYS
              for hit in named_by_hand(by_profile.sub("", rec["value"]),
                                       names)]
    assert not found, (
        f"{lesson} names the reference GPU by hand: {found}. Write "
        "{glue:text}`ref_gpu` (or `ref_gpu_short`), and glue words about "
        "the reference's outcome computed from `ref.reference(key)` "
        "(`ref.glue_ref`); a fact about H100s that stays true whatever "
        "the reference goes in H100_FACTS")


def test_prose_names_the_models_profile_through_glue(lesson):
    """No sentence and no string in code names the CPU device model's
    profile by its GPU ("its H100 profile"): prose glues
    {glue:text}`profile_gpu` and {glue:text}`profile_device`, code reads
    the profile `Lesson.glue_profile` returns, so that another profile
    (``BOOK_CPU_PROFILE``, a new default) leaves no sentence false."""
    nb = read(BOOK / f"{lesson}.ipynb")
    phrases = profile_phrases(sorted({"H100", model_profile_name()}))
    found = [(f"{c['cell_type']} cell {c.get('id')}", m.group(0))
             for c in nb["cells"]
             for m in phrases.finditer("".join(c["source"]))]
    assert not found, f"{lesson} names the model's profile by hand: {found}"


def test_profile_phrases_find_the_profile_named_by_hand():
    phrases = profile_phrases(["H100", "H200"])
    text = ("its H100 profile; the profile's H200 would; the H100 of its\n"
            "profile; a profile of the NVIDIA H100; its {glue:text}"
            "`profile_gpu` profile")
    assert [m.group(0) for m in phrases.finditer(text)] == [
        "H100 profile", "profile's H200", "H100 of its\nprofile"]


def test_glue_profile_glues_the_models_profile(monkeypatch, tmp_path):
    """What prose says about the model follows its profile: another
    profile (``BOOK_CPU_PROFILE``) glues another name and other costs,
    none of them with a ``*_ref``."""
    data = json.loads(Path(model_profile()[2]).read_text())
    data.update(name="H200", device="NVIDIA H200")
    data["host"]["context_create_ms"] = 150.0
    path = tmp_path / "h200.json"
    path.write_text(json.dumps(data))
    monkeypatch.setenv("BOOK_CPU_PROFILE", str(path))
    glued = {}
    monkeypatch.setattr(GLUE, lambda name, value, display=True:
                        glued.__setitem__(name, value))
    values = R.Lesson("99_not_a_lesson").glue_profile()
    assert glued == values and set(glued) == set(R.PROFILE_KEYS)
    assert (str(glued["profile_gpu"]), str(glued["profile_device"])) == (
        "H200", "NVIDIA H200")
    assert glued["profile_context_ms"] == 150.0
    assert glued["profile_h2d_gbps"] == data["copy"]["h2d_pinned_gbps"]


def test_glue_ref_glues_words_about_the_reference(monkeypatch):
    glued = {}
    monkeypatch.setattr(GLUE, lambda name, value, display=True:
                        glued.__setitem__(name, value))
    ref = R.Lesson("99_not_a_lesson")
    ref.glue("ms", 1.0)
    ref.glue_ref("clocks_ref", "close")
    assert glued["clocks_ref"] == "close"
    for bad in ("clocks", "ms_ref", "_ref"):
        with pytest.raises(ValueError):
            ref.glue_ref(bad, "x")


def test_unshown_keys_finds_a_bare_glue():
    nb = synthetic_lesson()
    nb.cells[2].outputs.append(glue_output("bare", {"text/plain": "1.0"}))
    nb = json.loads(nbformat.writes(nb))
    empty = {"lessons": {}}
    # ms has its ms_ref, sweep is figure data: both shown.
    assert R.unshown_keys(nb, "99_synthetic", empty, {}) == [
        "bare", "size", "word"]
    assert R.unshown_keys(nb, "99_synthetic", empty, {"99_synthetic": {
        "size": "chosen", "word": "a word"}}) == ["bare"]
    captured = {"lessons": {"99_synthetic": {"values": {
        "bare": {"value": 1.0, "cell": "x"}}}}}
    assert R.unshown_keys(nb, "99_synthetic", captured, {"99_synthetic": {
        "size": "chosen", "word": "a word"}}) == []
    nb["cells"][2]["outputs"].append(nbformat.v4.new_output(
        "display_data", data={"text/html": R.compare_table(
            "GPU", None, None, [("bare", "1", "", R.NOT_CAPTURED),
                                ("size", "4,096", "", R.NOT_CAPTURED),
                                ("word", "2", "", R.NOT_CAPTURED)])}))
    assert R.unshown_keys(nb, "99_synthetic", empty, {}) == []


def test_lesson_in_a_kernel_stores_what_the_tools_read(tmp_path):
    """Lesson.glue, .data and .compare in a real kernel, as a lesson
    runs them: the stored notebook holds each value, its reference text,
    the figure data as JSON and the comparison table."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from src.reference import Lesson\n"
        "ref = Lesson('99_not_a_lesson')\n"
        "ref.glue('ms', 1.5, display=False)\n"
        "ref.data('sweep', n=[1, 2], ms=[0.5, 0.75])\n"
        "ref.compare()")]
    R.execute_notebook(nb, timeout=120)
    path = write_nb(nb, tmp_path / "99_not_a_lesson.ipynb")
    stored = read(path)
    glued = R.read_glued(stored)
    assert glued["ms"]["value"] == 1.5
    assert glued["ms_ref"]["value"] == R.MISSING
    assert glued["sweep"] == {**glued["sweep"], "kind": "data", "value": {
        "n": [1, 2], "ms": [0.5, 0.75]}}
    assert R.compared_keys(stored) == {"ms"}      # numbers, not figures
    assert R.unshown_keys(stored, "99_not_a_lesson", {"lessons": {}},
                          {}) == []


def test_exclusions_name_glued_keys_with_reasons():
    exclusions = R.load_exclusions()
    assert set(exclusions) <= set(LESSONS), "exclusions of unknown lessons"
    for lesson, keys in exclusions.items():
        glued = glued_keys(read(BOOK / f"{lesson}.ipynb")) | set(
            R.current_fingerprints(lesson))
        stale = sorted(set(keys) - glued)
        assert not stale, f"{lesson} no longer glues {stale}: drop them " \
            "from book/reference/exclusions.json"
        for key, reason in keys.items():
            assert isinstance(reason, str) and reason.strip(), key


def test_gpu_lane_scripts_parse():
    tools = BOOK.parent / "tools" / "gpu"
    for name in ("prepare.sh", "run.sh", "refresh-reference.sh"):
        out = subproc.command(["bash", "-n", str(tools / name)], timeout=60)
        assert out.returncode == 0, (name, out.stderr)
    ignored = (BOOK.parent / ".gitignore").read_text().split()
    assert "/.gpu/" in ignored, ".gpu/ (the lane's wheels and output) " \
        "must stay out of git"
    config = yaml.safe_load((BOOK.parent / "_config.yml").read_text())
    assert ".gpu" in config["exclude_patterns"], "the lessons a GPU run or " \
        "a rehearsal leaves in .gpu/ must stay out of the book's build"


def test_gpu_lane_runs_named_steps_within_its_budget(tmp_path):
    """run.sh refuses an unknown step, and skips (saying so) a step the
    time left in BUDGET_S cannot fit, rather than run it past a lent
    machine's limit; its steps run in one order whatever the order asked,
    fidelity.py (the model's calibration) before the tests."""
    run = shutil.copy(BOOK.parent / "tools" / "gpu" / "run.sh", tmp_path)
    env = dict(OUT=str(tmp_path / "out"), BUDGET_S="0",
               PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    bad = subproc.command(["bash", run, "lesson"], timeout=60,
                          cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "unknown step 'lesson'" in bad.stdout
    out = subproc.command(["bash", run, "tests", "fidelity"],
                          timeout=120, cwd=tmp_path, env=env)
    log = (tmp_path / "out" / "steps.log").read_text().splitlines()
    assert out.returncode == 1, out.stdout + out.stderr
    assert log == ["fidelity: skipped, out of time (BUDGET_S)",
                   "tests: skipped, out of time (BUDGET_S)"]


def run_gpu_lane(tmp_path, *steps, budget="200"):
    """tools/gpu/run.sh run from ``tmp_path`` as from a project root."""
    run = shutil.copy(BOOK.parent / "tools" / "gpu" / "run.sh", tmp_path)
    env = dict(OUT=str(tmp_path / "out"), BUDGET_S=budget,
               PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    return subproc.command(["bash", run, *steps], timeout=180, cwd=tmp_path,
                           env=env)


@pytest.mark.timeout(200)
def test_gpu_lane_lessons_fail_on_a_changed_checked_output(tmp_path):
    """The lessons step checks what nbval would, so that the tests step
    need not run the lessons again: a cell marked NBVAL_CHECK_OUTPUT that
    prints other than it stored fails the step; an unmarked one does not."""
    nb = nbformat.v4.new_notebook()
    stored = [("# NBVAL_CHECK_OUTPUT\nprint(1 + 1)", "2\n"),
              ("# NBVAL_CHECK_OUTPUT\nprint('new')", "old\n"),
              ("print('unchecked')", "anything\n")]
    for source, text in stored:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                               text=text)]
        nb.cells.append(cell)
    (tmp_path / "book").mkdir()
    (tmp_path / "tests").mkdir()
    shutil.copy(BOOK.parent / "tests" / "nbtexts.py", tmp_path / "tests")
    nbformat.write(nb, str(tmp_path / "book" / "01_lesson.ipynb"))
    out = run_gpu_lane(tmp_path, "lessons")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "unexpected errors: none | checked outputs changed in cells: " \
        "[1]" in out.stdout, out.stdout
    ran = nbformat.read(str(tmp_path / "out" / "nb" / "01_lesson.ipynb"), 4)
    assert ran.cells[1].outputs[0].text == "new\n"


def test_gpu_lane_packs_its_output_into_one_file(tmp_path):
    """A lent device returns at most 8 files and a run writes more: with
    PACK, run.sh packs all of $OUT into one .tgz, and
    refresh-reference.sh takes that file as its OUT."""
    pack = tmp_path / "back" / "gpu-out.tgz"
    run = shutil.copy(BOOK.parent / "tools" / "gpu" / "run.sh", tmp_path)
    env = dict(OUT=str(tmp_path / "out"), BUDGET_S="0", PACK=str(pack),
               PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    out = subproc.command(["bash", run, "tests"], timeout=60, cwd=tmp_path,
                          env=env)
    assert f"packed {tmp_path / 'out'} into {pack}" in out.stdout, out.stdout
    with tarfile.open(pack) as tar:
        names = tar.getnames()
        log = tar.extractfile("./steps.log").read().decode()
    assert {"./nb", "./steps.log"} <= set(names), names
    assert log == "tests: skipped, out of time (BUDGET_S)\n"
    refresh = BOOK.parent / "tools" / "gpu" / "refresh-reference.sh"
    done = subproc.command(["bash", str(refresh)], timeout=60,
                           env=dict(env, OUT=str(pack)))
    assert done.returncode == 1 and "no lessons in " in done.stdout \
        and "run bash .gpu/run.sh lessons first" in done.stdout, done.stdout
    gone = subproc.command(["bash", str(refresh)], timeout=60,
                           env=dict(env, OUT=str(tmp_path / "no.tgz")))
    assert gone.returncode == 1 and "no such file" in gone.stdout


def test_gpu_lane_fails_when_the_benchmarks_fail(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "run.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "benchmarks" / "latest-cpu.json").write_text(
        json.dumps({"units": {"dispatch_us": "us"}}))
    out = run_gpu_lane(tmp_path, "bench")
    log = (tmp_path / "out" / "steps.log").read_text()
    assert log.startswith("bench: exit 3 in "), log
    assert out.returncode == 1, out.stdout + out.stderr


def test_gpu_rehearsal_runs_the_gpu_branches_on_the_model(tmp_path,
                                                         monkeypatch):
    """tools/gpu/rehearse.py runs a lesson's GPU branch at the model's
    sizes, reports the texts it glues differently, and errors outside
    raises-exception cells (by the lesson's own cell index). On the model
    whatever BOOK_BACKEND says: the GPU lane exports gpu to its tests."""
    rehearse = scripts.load("tools/gpu/rehearse.py")
    monkeypatch.setenv("BOOK_BACKEND", "gpu")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from myst_nb import glue\nfrom src import BACKEND, cp, pick\n"
        "glue('where', f'{BACKEND} {pick(cpu=1, gpu=2)} '\n"
        "     f'{type(cp.zeros(1)).__module__}', display=False)"),
        nbformat.v4.new_code_cell("1 / 0")]
    lesson = tmp_path / "lesson.ipynb"
    nbformat.write(nb, str(lesson))
    (tmp_path / "out").mkdir()
    errors, changed = rehearse.rehearse(lesson, tmp_path / "out",
                                        timeout=120)
    assert errors == [(1, "ZeroDivisionError")]
    assert changed["where"].startswith("gpu 1 src.cpudevice"), changed
    assert "BACKEND = 'gpu'" not in (tmp_path / "out" / "lesson.ipynb"
                                     ).read_text()


def test_glued_text_pastes_without_quotes_even_with_an_apostrophe():
    from src.reference import Text
    assert repr(Text("NVIDIA's size")) == "NVIDIA's size"
    assert Text("x") == "x" and isinstance(Text("x"), str)


def myst_nb_renderer():
    """myst_nb's glue renderer, or a skip where the book's build toolchain
    (Sphinx, myst-parser) is not installed: the GPU lane has only what the
    lessons run on."""
    return pytest.importorskip("myst_nb.core.variables")


@pytest.mark.parametrize("text", ["2,929", "65,536", "67,108,864", "1e3",
                                  "NVIDIA's size", "more", "", "(x)"])
def test_glued_text_pastes_as_written_never_as_a_tuple(text):
    """myst_nb reads a glued text/plain as a Python literal: "2,929"
    once pasted as "(2, 929)"."""
    format_plain_text = myst_nb_renderer().format_plain_text
    from src.reference import Text
    assert format_plain_text(repr(Text(text)), "") == text
    assert format_plain_text(repr(Text(text)), "s") == text


def test_no_stored_glued_text_pastes_as_a_tuple(lesson):
    """Every value a lesson's stored run glues pastes as it reads: none
    reads back as a tuple ("(2, 929)" for "2,929")."""
    format_plain_text = myst_nb_renderer().format_plain_text
    nb = read(BOOK / f"{lesson}.ipynb")
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if "scrapbook" not in out.get("metadata", {}):
                continue
            plain = out.get("data", {}).get("text/plain")
            if plain is None:
                continue
            plain = "".join(plain) if isinstance(plain, list) else plain
            shown = format_plain_text(plain, "")
            assert not re.fullmatch(r"\(\d+(, \d+)+\)", shown), (
                lesson, out["metadata"]["scrapbook"]["name"], plain)


def _prose_paragraphs(nb):
    """The paragraphs and list items of a notebook's markdown, tables
    left out."""
    for cell in nb["cells"]:
        if not is_markdown(cell):
            continue
        text = "".join(cell["source"])
        for para in re.split(r"\n\s*\n|\n(?=\s*[*-] )", text):
            if not para.lstrip().startswith("|"):
                yield cell["id"], para


def test_no_sentence_pastes_a_missing_reference(lesson):
    """A sentence pastes a reference value only where the default
    reference has it, current; a clause whose value is missing or stale
    is glued through `Lesson.glue_clause`, which drops it. Tables may
    paste any (a dash stands for a missing one, a mark for a stale
    one)."""
    ref = R.Lesson(lesson)
    nb = read(BOOK / f"{lesson}.ipynb")
    values = glued_keys(nb)         # words of `glue_ref` are not values
    bad = []
    for cell, para in _prose_paragraphs(nb):
        for key in re.findall(r"\{glue(?::\w+)?\}`(\w+)_ref(?::[^`]*)?`",
                              para):
            if key in values and (key in ref.exclusions or ref.status(
                    key) in (R.NOT_CAPTURED, R.STALE)):
                bad.append((cell, key, ref.status(key)))
    assert not bad, (f"{lesson}: sentences paste references the "
                     f"{ref.gpu} has no current value for (paste them "
                     f"through `Lesson.glue_clause`, which drops a clause "
                     f"whose value is missing or stale): {bad}")


def test_a_clause_drops_out_when_its_reference_is_missing(monkeypatch):
    ref = R.Lesson("99_not_a_lesson")
    ref.devices = [ref.device]
    ref.references = {ref.device: {
        "device": {"name": "NVIDIA H100 80GB HBM3"},
        "lessons": {"99_not_a_lesson": {"values": {
            "ms": {"value": 1.5, "cell": "abc"},
            "old": {"value": 2929, "cell": "old"}}}}}}
    ref.sources = {"ms": (R.CURRENT, ref.device),
                   "old": (R.STALE, ref.device)}
    assert ref.clause(" (on the {ref_gpu_short}: {ms} ms)") == \
        " (on the H100: 1.5 ms)"
    assert ref.clause(" (on the {ref_gpu}: {ms} and {gone} ms)") == ""
    assert ref.clause("{old} times") == ""      # stale: the table shows it
    assert ref.reference_text("gone") == R.MISSING
    assert ref.reference_text("old") == "2,929" + R.STALE_MARK
    glued = []
    monkeypatch.setattr(GLUE, lambda name, value, display=True:
                        glued.append((name, value)))
    ref.glue_clause("gone_words_ref", "({gone} ms)")
    assert glued == [("gone_words_ref", "")]


def test_the_comparison_is_plain_collapsed_and_marks_stale_once():
    """The header states the capture plainly (no garbled date, no
    definition of stale where nothing is stale); the table, collapsed,
    shows numbers under readable labels, never words or raw keys."""
    rows = [("first_ratio", "460", "2,929", R.CURRENT),
            ("demo_v2_ms", "1.2", "", R.NOT_CAPTURED),
            ("note", "a whole sentence here", "", R.NOT_CAPTURED),
            ("small_kib", "1", "", R.EXCLUDED)]
    page = R.compare_table("NVIDIA H100", "not recorded (before "
                           "2026-11-23)", "ee28add", rows,
                           labels={"first_ratio": "first / later"})
    assert "(commit ee28add)." in page and "recorded" not in page
    assert "captured not recorded" not in page and "((" not in page
    assert "<details" in page and "</details>" in page
    assert "first / later" in page and "Demo v2 (ms)" in page
    assert "whole sentence" not in page and "small_kib" not in page.split(
        "data-key")[0] and 'data-key="small_kib"' not in page
    assert "not captured" not in page and "tale" not in page
    stale = R.compare_table("NVIDIA H100", "2026-11-23", "abc", [
        ("a_ms", "1", "2", R.STALE), ("b_ms", "1", "2", R.STALE)])
    assert stale.count(R.STALE_MARK) == 3       # two marks, one key
    assert stale.count("<i>Stale</i>") == 1
    words = R.compare_table("NVIDIA H100", "2026-11-23", "abc", [
        ("a_ms", "1", "2", R.CURRENT), ("word", "faster", "faster",
                                        R.STALE)])
    assert words.count("<i>Stale</i>") == 1   # a stale word shows in prose
    never = R.compare_table("NVIDIA H100", None, None, rows)
    assert "has not run this lesson" in never
    assert never.count("<th>") == 2 and "\u2014" not in never  # no dashes


def test_table_labels_read_the_lessons_tables():
    table = ("| | this run | ref |\n|---|---|---|\n"
             "| round trip of {glue:text}`kib:.0f` KiB (µs) | "
             "{glue:text}`trip_us:.0f` | {glue:text}`trip_us_ref` |\n"
             "| `x + x`, *eager* | {glue:text}`eager_us:.1f` | - |\n")
    assert R.table_labels(table, {"kib": 4.0}) == {
        "trip_us": "round trip of 4 KiB (µs)", "eager_us": "x + x, eager"}
    assert R.key_label("demo_big_v2_speedup") == "Demo big v2 speedup"
    assert R.key_label("copy_gbps") == "Copy (GB/s)"


def test_gpu_rehearsal_takes_a_lessons_name_or_its_path(tmp_path):
    rehearse = scripts.load("tools/gpu/rehearse.py")
    streams = BOOK / "05_1_queues.ipynb"
    assert rehearse.lesson_path("05_1_queues") == streams
    assert rehearse.lesson_path("05_1") == streams
    assert rehearse.lesson_path(str(streams)) == streams.resolve()
    with pytest.raises(SystemExit, match="names 0 lessons; the lessons: "
                       "01_1_runtime"):
        rehearse.lesson_path("streams")
    every = len(list(BOOK.glob("0*.ipynb")))
    with pytest.raises(SystemExit, match=f"names {every} lessons"):
        rehearse.lesson_path("0")
    with pytest.raises(SystemExit, match="'05' names 4 lessons"):
        rehearse.lesson_path("05")          # chapter 5's three sections
    with pytest.raises(SystemExit, match="no such notebook"):
        rehearse.lesson_path(str(tmp_path / "missing.ipynb"))


def test_execute_tool_rewrites_a_lesson_in_place_and_names_changed_checks(
        tmp_path):
    """tools/execute.py runs a notebook in a fresh kernel and writes it
    back, naming the checked cells whose outputs changed; an error in a
    cell tagged raises-exception is expected."""
    execute = scripts.load("tools/execute.py")
    nb = nbformat.v4.new_notebook()
    checked = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(6 * 7)")
    checked.outputs = [nbformat.v4.new_output("stream", text="41\n")]
    same = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint('same')")
    same.outputs = [nbformat.v4.new_output("stream", text="same\n")]
    raises = nbformat.v4.new_code_cell("1 / 0")
    raises.metadata["tags"] = ["raises-exception"]
    nb.cells = [checked, same, nbformat.v4.new_code_cell("x = 1"), raises]
    lesson = tmp_path / "lesson.ipynb"
    nbformat.write(nb, str(lesson))
    errors, changed = execute.execute(lesson, timeout=120)
    assert (errors, changed) == ([], [0])
    stored = nbformat.read(str(lesson), as_version=4)
    assert stored.cells[0].outputs[0].text == "42\n"
    assert stored.cells[3].outputs[0].ename == "ZeroDivisionError"


def test_execute_tool_leaves_a_lesson_that_fails_as_it_was(tmp_path,
                                                          capsys,
                                                          monkeypatch):
    execute = scripts.load("tools/execute.py")
    monkeypatch.setenv("BOOK_BACKEND", "cpu")   # main() sets a default
    monkeypatch.setattr(sys, "path", list(sys.path))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('ran')"),
                nbformat.v4.new_code_cell("1 / 0")]
    lesson = tmp_path / "lesson.ipynb"
    nbformat.write(nb, str(lesson))
    text = lesson.read_text()
    assert execute.main([str(lesson), "--timeout", "120"]) == 1
    assert lesson.read_text() == text
    assert "not written: errors (cell, name) [(1, 'ZeroDivisionError')]" \
        in capsys.readouterr().out
