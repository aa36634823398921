"""Several reference GPUs: the order, where each value comes from, its label.

The book keeps each GPU's run in ``book/reference/<slug>.json`` and lists
the devices in order in ``book/reference/devices``. These tests simulate
what the next GPU run will do (an H200 that captures one lesson), in a
copy of the book's references, and check what a reader would see.
"""
import json
import shutil
from pathlib import Path

import pytest

import src.reference as R

BOOK = Path(R.store.BOOK)
STORED = BOOK / "reference"


@pytest.fixture
def references(monkeypatch, tmp_path):
    """A copy of the book's references, which the package reads."""
    root = tmp_path / "reference"
    shutil.copytree(STORED, root)
    monkeypatch.setattr(R.store, "REFERENCE_DIR", root)
    return root


def import_as_h200(root, tmp_path, lesson, drop=()):
    """Import ``lesson``'s stored run (the model's) as if an H200 had run
    it, without the glued keys ``drop``; then put the H200 first."""
    nb = json.loads((BOOK / f"{lesson}.ipynb").read_text())
    for cell in nb["cells"]:
        cell["outputs"] = [
            o for o in cell.get("outputs", [])
            if o.get("metadata", {}).get("scrapbook", {}).get("name")
            not in drop]
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / f"{lesson}.ipynb").write_text(json.dumps(nb))
    (run / "run.json").write_text(json.dumps({
        "device": {"name": "NVIDIA H200", "backend": "cpu"},
        "date": "2026-11-28", "commit": "sim0001"}))
    assert R.main(["import", str(run / f"{lesson}.ipynb"),
                   "--device", "nvidia-h200", "--allow-model"]) == 0
    assert R.main(["default", "nvidia-h200"]) == 0
    return json.loads((root / "nvidia-h200.json").read_text())


def test_the_book_lists_its_reference_devices_in_order():
    devices = R.reference_devices()
    assert devices[0] == R.default_device()
    for slug in devices:
        assert R.reference_path(slug).is_file(), slug
    # The model is compared with the GPU its profile was measured on.
    assert R.comparator_device() == "nvidia-h100"
    assert R.comparator_device() in devices


def test_a_partial_h200_capture_keeps_every_h100_value(references,
                                                       tmp_path, capsys):
    """The must-show of the issue: 06.1 captured on an "H200", put first;
    every lesson still has a current value for every key, 06.1's from
    the H200, 04.1's from the H100, each named as its own."""
    before = R.report()
    # keys no GPU has run yet (a new section's) stay not captured
    pending = {(lesson, key) for lesson, keys in R.sources().items()
               for key, (state, _) in keys.items()
               if state == R.NOT_CAPTURED}
    h200 = import_as_h200(references, tmp_path, "06_1_bandwidth")
    assert R.reference_devices(references) == ["nvidia-h200", "nvidia-h100"]
    assert set(h200["lessons"]) == {"06_1_bandwidth"}
    found = R.sources()
    assert "misuse" in found
    for lesson, keys in found.items():
        for key, (state, slug) in keys.items():
            assert state in (R.CURRENT, R.EXCLUDED) or (
                state == R.NOT_CAPTURED and (lesson, key) in pending), (
                    lesson, key, state)
    assert {slug for st, slug in found["06_1_bandwidth"].values()
            if st == R.CURRENT} == {"nvidia-h200"}
    assert {slug for st, slug in found["04_1_queueing"].values()
            if st == R.CURRENT} == {"nvidia-h100"}
    assert {k: len(v) for k, v in R.report()["04_1_queueing"].items()} == \
        {k: len(v) for k, v in before["04_1_queueing"].items()}
    capsys.readouterr()
    totals = R.print_status()
    out = capsys.readouterr().out
    assert totals[R.STALE] == 0 and totals[R.NOT_CAPTURED] == len(pending)
    assert "06_1_bandwidth" in out and "(from nvidia-h200 " in out
    assert "misuse " in out and "  on nvidia-h200: " in out

    h200_lesson, h100_lesson = (R.Lesson("06_1_bandwidth"),
                                R.Lesson("04_1_queueing"))
    assert (h200_lesson.device, h200_lesson.gpu_short) == (
        "nvidia-h200", "H200")
    assert (h100_lesson.device, h100_lesson.gpu_short) == (
        "nvidia-h100", "H100")
    key = next(k for k, (st, _) in found["06_1_bandwidth"].items()
               if st == R.CURRENT)
    assert h200_lesson.label(key) == ""
    assert h200_lesson.clause("on the {ref_gpu_short}: {%s}" % key) \
        .startswith("on the H200: ")
    key = next(k for k, (st, _) in found["04_1_queueing"].items()
               if st == R.CURRENT)
    assert h100_lesson.clause("on the {ref_gpu}: {%s}" % key) \
        .startswith("on the NVIDIA H100: ")


def test_a_value_the_h200_lacks_comes_from_the_h100_labelled(references,
                                                            tmp_path):
    lesson = "06_1_bandwidth"
    keys = [k for k, (st, _) in R.resolve(lesson).items()
            if st == R.CURRENT]
    gone, kept = keys[0], keys[1]
    import_as_h200(references, tmp_path, lesson, drop={gone})
    ref = R.Lesson(lesson)
    assert ref.device == "nvidia-h200"
    assert ref.source(gone) == (R.CURRENT, "nvidia-h100")
    assert ref.source(kept) == (R.CURRENT, "nvidia-h200")
    assert ref.reference_text(gone).endswith(" (H100)")
    assert not ref.reference_text(kept).endswith(")")
    # A clause names the device behind its own values ...
    assert ref.clause("on the {ref_gpu_short}: {%s}" % gone).startswith(
        "on the H100: ")
    # ... and a value from another device in it carries its name.
    mixed = ref.clause("{%s} and {%s} on the {ref_gpu_short}" % (kept, gone))
    assert mixed.endswith(" (H100) on the H200")
    # A finding of one GPU's run is said only where that GPU's values are.
    assert ref.clause("{%s} probe" % gone, only="nvidia-h100") != ""
    assert ref.clause("{%s} probe" % kept, only="nvidia-h100") == ""
    # The table labels it, and says whose run it is.
    ref.values = {gone: 1.0, kept: 2.0}
    from IPython.core.interactiveshell import InteractiveShell
    shown = []
    InteractiveShell.instance().display_pub.publish = \
        lambda data, **kw: shown.append(data)
    try:
        ref.compare()
    finally:
        InteractiveShell.clear_instance()
    html = shown[0]["text/html"]
    assert "The NVIDIA H200's column" in html
    assert "Values marked (H100) are the NVIDIA H100 80GB HBM3's" in html
    row = html[html.index(f'data-key="{gone}"'):]
    assert row[:row.index("</tr>")].endswith(" (H100)</td>")


def test_a_stale_value_is_the_first_devices_when_none_is_current(
        references, tmp_path):
    lesson = "06_1_bandwidth"
    key = next(k for k, (st, _) in R.resolve(lesson).items()
               if st == R.CURRENT)
    import_as_h200(references, tmp_path, lesson)
    for slug in ("nvidia-h200", "nvidia-h100"):
        R.main(["mark-stale", lesson, key, "--why", "test",
                "--device", slug])
    assert R.resolve(lesson)[key] == (R.STALE, "nvidia-h200")
    assert R.Lesson(lesson).reference_text(key).endswith(R.STALE_MARK)


def test_an_import_records_its_device_in_each_part(references, tmp_path):
    """A later import into the same file cannot relabel a lesson that
    another run of that device model captured."""
    import_as_h200(references, tmp_path, "06_1_bandwidth")
    run = tmp_path / "run"
    info = json.loads((run / "run.json").read_text())
    info["device"]["name"] = "NVIDIA H200 (second card)"
    (run / "run.json").write_text(json.dumps(info))
    nb = run / "06_1_bandwidth.ipynb"
    other = run / "06_2_async.ipynb"
    shutil.copy(BOOK / "06_2_async.ipynb", other)
    assert R.main(["import", str(other), "--device", "nvidia-h200",
                   "--allow-model"]) == 0
    stored = json.loads((references / "nvidia-h200.json").read_text())
    parts = stored["lessons"]
    assert parts["06_1_bandwidth"]["device"]["name"] == "NVIDIA H200"
    assert parts["06_2_async"]["device"]["name"] == \
        "NVIDIA H200 (second card)"
    assert R.Lesson("06_1_bandwidth").gpu == "NVIDIA H200"
    assert nb.exists()


def test_default_puts_a_device_first_and_keeps_the_others(references):
    (references / "gpu-z.json").write_text(json.dumps(
        {"device": {"name": "NVIDIA Z"}, "lessons": {}}))
    assert R.reference_devices() == ["nvidia-h100"]
    R.set_default_device("gpu-z")
    assert R.reference_devices() == ["gpu-z", "nvidia-h100"]
    R.set_default_device("nvidia-h100")
    assert R.reference_devices() == ["nvidia-h100", "gpu-z"]
    with pytest.raises(ValueError, match="no reference"):
        R.set_reference_devices(["nvidia-h100", "gpu-none"])
    assert R.main(["default"]) == 0


def test_a_capture_or_a_new_order_clears_the_execution_cache(tmp_path,
                                                             monkeypatch):
    project = tmp_path / "project"
    root = project / "book" / "reference"
    shutil.copytree(STORED, root)
    monkeypatch.setattr(R.store, "REFERENCE_DIR", root)
    cache = project / "_build" / ".jupyter_cache"
    cache.mkdir(parents=True)
    R.set_default_device("nvidia-h100")
    assert not cache.exists()
    cache.mkdir(parents=True)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(BOOK / "06_1_bandwidth.ipynb", run)
    R.import_notebooks([run / "06_1_bandwidth.ipynb"],
                       device="nvidia-h200", allow_model=True)
    assert not cache.exists()


def test_slugs_tell_form_factors_apart():
    assert R.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100"
    assert R.device_slug("NVIDIA H200") == "nvidia-h200"
    assert R.device_slug("NVIDIA H100 PCIe") == "nvidia-h100-pcie"
    assert R.device_slug("NVIDIA H200 NVL") == "nvidia-h200-nvl"
    assert R.device_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100"
    assert R.device_slug("NVIDIA A100-PCIE-40GB") == "nvidia-a100-pcie"


def test_device_facts_name_their_source_and_fill_clauses():
    facts = json.loads(R.FACTS.read_text())
    for slug, fact in facts.items():
        if slug.startswith("_"):
            continue
        assert {"name", "bandwidth_tbps", "memory_gb", "link",
                "source"} <= set(fact), slug
    for slug in R.reference_devices():
        assert R.device_facts(slug), f"device-facts.json lacks {slug}"
    ref = R.Lesson("04_2_waiting")
    key = "pace_us"
    text = ref.clause("at {ref_gpu_tbps} TB/s, {%s} µs" % key)
    assert text.startswith("at 3.35 TB/s, ")
    assert ref.clause("{ref_gpu_unknown_fact}") == ""


def test_the_facts_a_page_pastes_follow_the_values_device(references,
                                                          tmp_path):
    """04.2's sentence on the published bandwidth is the H200's once the
    H200 supplies the pace it explains."""
    import_as_h200(references, tmp_path, "04_2_waiting")
    ref = R.Lesson("04_2_waiting")
    assert ref.device_of("pace_us") == "nvidia-h200"
    assert ref.clause("{ref_gpu_tbps} TB/s an {ref_gpu_short} ({pace_us})",
                      only="nvidia-h200").startswith("4.8 TB/s an H200 (")


def test_a_fingerprint_is_blind_to_the_models_size_only():
    """A change of what only the CPU device model runs (``pick``'s ``cpu``
    size) leaves a GPU's values current; a change of the GPU's size, or
    of any other code, does not."""
    cell = "z = cp.ones(pick(cpu=2**22, gpu=2**26))\nglue('ms', t)"
    same = [cell.replace("cpu=2**22", "cpu=2**24"),
            cell.replace("cpu=2**22", "cpu=[2**k for k in range(3)]"),
            cell.replace("cpu=2**22, gpu=2**26", "cpu=(1,\n  2), gpu=2**26")]
    other = [cell.replace("gpu=2**26", "gpu=2**27"),
             cell.replace("cp.ones", "cp.zeros"),
             cell.replace("pick(cpu=2**22, gpu=2**26)", "2**26")]
    for code in same:
        assert R.fingerprint(code) == R.fingerprint(cell), code
    for code in other:
        assert R.fingerprint(code) != R.fingerprint(cell), code
    assert R.fingerprint("n = src.pick(5, 11)") == R.fingerprint(
        "n = src.pick(7, 11)")
    assert R.fingerprint("%time pick(cpu=1, gpu=2)") != R.fingerprint(
        "%time pick(cpu=3, gpu=2)")         # magics: the code as written
    # A cell with no pick hashes as before the rule: the stored values of
    # every other cell kept their fingerprints.
    assert R.fingerprint("x = 1") == __import__("hashlib").sha1(
        b"x = 1").hexdigest()[:12]


def test_words_about_reference_values_name_the_device_behind_them(
        references, tmp_path):
    lesson = "06_1_bandwidth"
    keys = [k for k, (st, _) in R.resolve(lesson).items()
            if st == R.CURRENT]
    import_as_h200(references, tmp_path, lesson, drop={keys[0]})
    ref = R.Lesson(lesson)
    assert ref.gpu_behind(keys[0]) == "NVIDIA H100"
    assert ref.gpu_behind(keys[1]) == ref.gpu_behind() == "NVIDIA H200"
    assert ref.gpu_behind(keys[0], "not_a_key") == "NVIDIA H100"
