"""benchmarks/fidelity.py: its table's structure and its verdicts' logic.

Cheap by design: the full measurement (about a minute) is not run here;
one small effect is, end to end, and the rest works on synthetic numbers.
"""
import json
import math
from pathlib import Path

import pytest
import yaml

import modelkit
import scripts

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "book" / "reference" / "nvidia-h100.json"


@pytest.fixture(scope="module")
def fid():
    return scripts.load("benchmarks/fidelity.py")


def synthetic_raw(fid, value=1.0):
    """Every number every live formula reads, set to ``value``."""
    raw = {}
    for e in fid.EFFECTS:
        raw.setdefault(e.experiment, {}).update(
            dict.fromkeys(fid.names_in(e.live), value))
    return raw


def test_at_least_15_effects_each_classed_and_measured(fid):
    keys = [e.key for e in fid.EFFECTS]
    assert len(keys) >= 15
    assert len(set(keys)) == len(keys), "effect keys must be unique"
    classes = {e.cls for e in fid.EFFECTS}
    assert classes == {fid.DEVICE_ONLY, fid.MIXED}
    for e in fid.EFFECTS:
        assert e.experiment in fid.EXPERIMENTS, e.key
        assert fid.names_in(e.live), e.key
        assert e.title and "\n" not in e.title, e.key


def test_each_effect_has_its_sizes_by_the_rule(fid):
    """Sizes are the GPU lesson's, or smaller with a reason written down;
    never larger, never chosen per backend."""
    assert set(fid.EFFECT_SIZES) == {e.key for e in fid.EFFECTS}
    for key, names in fid.EFFECT_SIZES.items():
        for name in names:
            assert name in fid.SIZE_SPECS, (key, name)
    for name, (used, gpu, unit) in fid.SIZE_SPECS.items():
        assert 0 < used <= gpu, name
        assert (used == gpu) == (name not in fid.SIZE_WHY), name
        assert fid.size_label(name, used)
    assert set(fid.SIZE_WHY) <= set(fid.SIZE_SPECS)
    here, gpu, why = fid.sizes_of(("bw_large", "bw_small"))
    assert (here, gpu, why) == ("256 MiB, 1 KiB", "256 MiB, 1 KiB", "")
    here, gpu, why = fid.sizes_of(("big_size",))
    assert here != gpu and why.startswith("smaller than the GPU's")
    assert "(1 GiB device" in fid.__doc__ or "1 GiB" in fid.__doc__
    assert "largest the model can afford" in fid.__doc__


def test_each_effect_names_existing_reference_keys(fid):
    lessons = json.loads(H100.read_text())["lessons"]
    for e in fid.EFFECTS:
        assert e.refs, e.key
        keys = {}
        for full in e.refs:
            lesson, key = full.split("/", 1)
            assert key in lessons.get(lesson, {}).get("values", {}), \
                f"{e.key}: {full} is not in {H100.name}"
            keys[key] = lessons[lesson]["values"][key]["value"]
        assert len(keys) == len(e.refs), f"{e.key}: a key named twice"
        assert fid.names_in(e.formula) == set(keys), \
            f"{e.key}: the formula must read exactly its reference keys"
        value = fid.evaluate(e.formula, keys)
        assert math.isfinite(value) and value > 0, (e.key, value)


def test_the_reference_gives_the_h100s_ratios(fid):
    _, ref_of = fid.load_reference(H100)
    by_key = {e.key: e for e in fid.EFFECTS}
    for key, expected in [("pinned_over_pageable_bw", 5.67),
                          ("pageable_nb_over_b_blocked", 0.847),
                          ("demo_v1_speedup", 1.47),
                          ("first_over_later", 3161),
                          ("copy_over_add", 14.8)]:
        if key in by_key:
            value, state = ref_of(by_key[key])
            assert value == pytest.approx(expected, rel=0.01), key
            assert state in ("current", "stale")


def test_every_mixed_effect_says_why_it_may_disagree(fid):
    for e in fid.EFFECTS:
        if e.cls == fid.MIXED:
            assert e.reason and "\n" not in e.reason, e.key
            assert len(e.reason) < 200, e.key


def test_device_only_verdict_is_a_factor_of_two_either_way(fid):
    v = fid.verdict
    d = fid.DEVICE_ONLY
    assert v(d, 1.9, 1.0) == fid.AGREES
    assert v(d, 0.51, 1.0) == fid.AGREES
    assert v(d, 2.0, 1.0) == fid.AGREES
    assert v(d, 2.1, 1.0) == fid.DIFFERS
    assert v(d, 0.49, 1.0) == fid.DIFFERS
    assert v(d, 30.0, 16.0) == fid.AGREES
    assert v(d, 0.6, 16.0) == fid.DIFFERS


def test_a_speedup_is_judged_by_its_gain(fid):
    v, d = fid.verdict, fid.DEVICE_ONLY
    assert v(d, 1.0, 1.5) == fid.AGREES                 # as a plain ratio
    assert v(d, 1.0, 1.5, gain=True) == fid.DIFFERS     # no gain at all
    assert v(d, 0.9, 1.5, gain=True) == fid.DIFFERS     # a loss
    assert v(d, 1.26, 1.5, gain=True) == fid.AGREES
    assert v(d, 1.99, 1.5, gain=True) == fid.AGREES
    assert v(d, 2.05, 1.5, gain=True) == fid.DIFFERS
    assert v(d, 2.7, 1.89, gain=True) == fid.AGREES
    assert v(d, 3.0, 1.89, gain=True) == fid.DIFFERS
    # below 1 (a time over a shorter one): the gain of its inverse
    assert v(d, 0.5, 0.4, gain=True) == fid.AGREES      # 1.0 against 1.5
    assert v(d, 0.8, 0.4, gain=True) == fid.DIFFERS     # 0.25 against 1.5
    assert v(d, 1.1, 0.5, gain=True) == fid.DIFFERS     # no gain at all
    for e in fid.EFFECTS:
        assert not e.gain or e.cls == d, f"{e.key}: gain is device-only"


def test_a_gain_about_one_on_the_gpu_asks_for_about_one(fid):
    """A GPU's ratio inside the band around 1 gained nothing beyond its
    noise, on either side of 1: no factor is applied to a gain near zero,
    and the model must read about 1 too (05.3's two streams, 0.975)."""
    v, d, band = fid.verdict, fid.DEVICE_ONLY, fid.BAND
    for ref in (0.975, 1.2, band * 0.99, 1 / band * 1.01):
        assert v(d, 1.0, ref, gain=True) == fid.AGREES
        assert v(d, 0.888, ref, gain=True) == fid.AGREES
        assert v(d, band * 1.1, ref, gain=True) == fid.DIFFERS
        assert v(d, 1 / band / 1.1, ref, gain=True) == fid.DIFFERS
    assert not fid.compare.no_gain({"judged_on": "gain", "live": 0.9,
                                    "reference": 0.975})
    assert fid.compare.no_gain({"judged_on": "gain", "live": 1.1,
                                "reference": 0.5})
    assert fid.compare.no_gain({"judged_on": "gain", "live": 0.9,
                                "reference": 1.5})


def test_mixed_verdict_is_the_direction_with_a_band_around_one(fid):
    v, m, band = fid.verdict, fid.MIXED, fid.BAND
    assert band > 1
    assert v(m, 20.0, 2929.0) == fid.AGREES          # both above
    assert v(m, 0.03, 0.008) == fid.AGREES           # both below
    assert v(m, 1.05, 0.85) == fid.AGREES            # both about 1
    assert v(m, 0.5, 2.0) == fid.FLAGGED             # opposite ways
    assert v(m, 1.0, 3.0) == fid.FLAGGED             # flat against a gain
    assert v(m, 0.2, 0.83) == fid.FLAGGED            # a drop against ~1
    assert v(m, band * 1.01, 1.0) == fid.FLAGGED
    assert fid.direction(band * 0.99) == "about 1"
    assert fid.direction(1 / band * 1.01) == "about 1"


def test_a_missing_number_is_no_verdict(fid):
    d = fid.DEVICE_ONLY
    assert fid.verdict(d, 1.0, None) == fid.NO_REFERENCE
    assert fid.verdict(d, float("nan"), 1.0) == fid.NOT_MEASURED
    assert fid.verdict(fid.MIXED, None, 2.0) == fid.NOT_MEASURED
    assert fid.verdict(d, 0.0, 1.0) == fid.NOT_MEASURED
    with pytest.raises(ValueError):
        fid.verdict("other", 1.0, 1.0)


def test_synthetic_result_summary_table_and_page(fid):
    info, ref_of = fid.load_reference(H100)
    result = fid.assemble(fid.EFFECTS, synthetic_raw(fid), {}, info, ref_of,
                          backend="cpu")     # the model's page, on any lane
    rows = result["effects"]
    assert list(rows) == [e.key for e in fid.EFFECTS]
    for key, row in rows.items():
        assert row["verdict"] in (fid.AGREES, fid.DIFFERS, fid.FLAGGED), key
        assert (row["verdict"] == fid.FLAGGED) == bool(row["reason"]), key
        assert row["judged_on"] in ("ratio", "gain (ratio - 1)"), key
    s = result["summary"]
    assert s["device_only"] + s["mixed"] == len(rows)
    assert "lessons' GPU sizes" in result["reference"]["note"]
    assert "until a GPU runs fidelity.py itself" in fid.table(result)

    page = fid.markdown(result)
    assert page.startswith("# ")
    assert ("| effect | lesson | class | size | this model | NVIDIA H100 "
            "| agrees? | reason if flagged |") in page
    for row in rows.values():
        assert row["size"] and row["reference_size"]
        assert row["same_size"] == (row["size"] == row["reference_size"])
        if not row["same_size"]:
            assert f"(GPU: {row['reference_size']})" in page
            assert row["size_note"].removeprefix(fid.SMALLER) in page
    assert "until a GPU runs fidelity.py itself" in page
    for row in rows.values():
        assert f"| {row['title']} |" in page
        if row["reason"]:
            assert row["reason"] in page


def test_must_show_needs_every_device_effect_and_few_flags(fid):
    def rows(device, mixed):
        out = {}
        for i, v in enumerate(device):
            out[f"d{i}"] = {"class": fid.DEVICE_ONLY, "verdict": v}
        for i, v in enumerate(mixed):
            out[f"m{i}"] = {"class": fid.MIXED, "verdict": v}
        return out
    a, f, d = fid.AGREES, fid.FLAGGED, fid.DIFFERS
    assert fid.summarize(rows([a, a], [a, a, a, f]))["must_show_met"]
    assert not fid.summarize(rows([a, d], [a, a, a, a]))["must_show_met"]
    assert not fid.summarize(rows([a, a], [a, a, f, f]))["must_show_met"]
    assert not fid.summarize(
        rows([a], [a, a, a, fid.NOT_MEASURED]))["must_show_met"]


def test_misses_against_stale_references_are_named_not_excused(fid):
    rows = {"fresh": {"class": fid.DEVICE_ONLY, "verdict": fid.DIFFERS,
                      "reference_state": "current"},
            "old": {"class": fid.DEVICE_ONLY, "verdict": fid.DIFFERS,
                    "reference_state": fid.refs.STALE},
            "ok": {"class": fid.DEVICE_ONLY, "verdict": fid.AGREES,
                   "reference_state": fid.refs.STALE}}
    s = fid.summarize(rows)
    assert s["device_only_misses_on_stale_references"] == ["old"]
    assert not s["must_show_met"]


def test_a_gpu_run_of_fidelity_can_be_the_reference(fid, tmp_path):
    gpu = tmp_path / "fidelity-gpu-some-gpu.json"
    gpu.write_text(json.dumps({"devices": ["Some GPU"], "effects": {
        fid.EFFECTS[0].key: {"live": 4.0}}}))
    info, ref_of = fid.load_reference(gpu)
    assert info["kind"] == "fidelity" and info["device"] == "Some GPU"
    assert ref_of(fid.EFFECTS[0]) == (4.0, "measured")
    assert ref_of(fid.EFFECTS[1])[0] is None


def test_a_run_is_compared_with_its_own_devices_reference(fid):
    """On the model, the GPU its profile was measured on (the H100's): that
    GPU's own run of fidelity.py, one file a device; a device with neither
    such a run nor a lessons reference here gets none, not another's."""
    assert fid.run_device("cpu") == "nvidia-h100"
    assert fid.default_reference("nvidia-h100") == \
        ROOT / "benchmarks" / "fidelity-gpu-nvidia-h100.json"
    info, _ = fid.load_reference()
    assert info["kind"] == "fidelity"
    assert info["path"] == "benchmarks/fidelity-gpu-nvidia-h100.json"
    assert info["device"] == "NVIDIA H100 80GB HBM3"
    none = fid.default_reference("nvidia-h900")
    assert none == ROOT / "book" / "reference" / "nvidia-h900.json"
    info, ref_of = fid.load_reference(none)
    assert info["kind"] == "none"
    assert ref_of(fid.EFFECTS[0]) == (None, fid.refs.NOT_CAPTURED)


def test_one_effect_end_to_end(fid, tmp_path):
    out, page = tmp_path / "f.json", tmp_path / "f.md"
    fid.main(["--only", "copy_over_add", "--json", str(out),
              "--markdown", str(page)])
    result = json.loads(out.read_text())
    assert list(result["effects"]) == ["copy_over_add"]
    row = result["effects"]["copy_over_add"]
    assert row["live"] > 0 and math.isfinite(row["live"])
    assert row["verdict"] in (fid.AGREES, fid.DIFFERS)
    assert result["backend"] in ("cpu", "gpu")
    assert "copy_over_add" in page.read_text()
    with pytest.raises(SystemExit):
        fid.run(["no_such_effect"])


def test_the_page_is_generated_and_in_the_reference_part(fid):
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    reference = next(p for p in toc["parts"] if p["caption"] == "Reference")
    files = [c["file"] for c in reference["chapters"]]
    assert "book/fidelity" in files
    assert files.index("book/fidelity") == files.index("book/misuse") + 1
    page = (ROOT / "book" / "fidelity.md").read_text()
    assert "Generated by benchmarks/fidelity.py" in page
    stored = json.loads(
        (ROOT / "benchmarks" / "fidelity-cpu.json").read_text())
    assert set(stored["effects"]) == {e.key for e in fid.EFFECTS}


def test_an_interrupted_run_keeps_what_it_measured(fid):
    """A time limit's SIGINT (tools/gpu/run.sh) ends the measurements, not
    the run: what was measured before it is returned, and written."""
    ran = []

    def interrupted():
        raise KeyboardInterrupt

    experiments = {name: (lambda name=name: ran.append(name) or {"x": 1.0})
                   for name in fid.EXPERIMENTS}
    first, second = fid.EFFECTS[0].experiment, fid.EFFECTS[-1].experiment
    assert first != second
    experiments[first] = interrupted
    raw, errors = fid.measure([fid.EFFECTS[0], fid.EFFECTS[-1]],
                              fid.CALIBRATION, experiments)
    assert ran == list(fid.CALIBRATION)
    assert set(raw) == set(fid.CALIBRATION)
    assert errors == {first: "KeyboardInterrupt: interrupted; this and the "
                      "experiments after it were not measured"}


def test_issue_costs_run_only_with_a_full_run_and_show_on_the_page(
        fid, monkeypatch):
    """`issue_costs` (for calibrate.py) runs with every full run, not with
    ``--only``; it gives a positive time per call of each kind, and the
    page sets each beside what the profile charges."""
    ran = []
    fid.measure(fid.EFFECTS[:1], fid.CALIBRATION, {
        name: (lambda name=name: ran.append(name) or {"x": 1.0})
        for name in fid.EXPERIMENTS})
    assert ran == [*fid.CALIBRATION, fid.EFFECTS[0].experiment]
    assert fid.CALIBRATION == ("issue_costs", "copy_duplex")

    monkeypatch.setattr(fid.calibration, "ISSUE_CALLS", 50)
    costs = fid.EXPERIMENTS["issue_costs"]()
    assert set(costs) == {key for key, _, _ in fid.ISSUE_ROWS} | {
        "empty_loop_s"}
    assert all(0 < costs[key] < 0.01 for key, _, _ in fid.ISSUE_ROWS)

    info, ref_of = fid.load_reference(H100)
    raw = synthetic_raw(fid) | {"issue_costs": costs}
    page = fid.markdown(fid.assemble(fid.EFFECTS, raw, {}, info, ref_of))
    assert "## The host's cost to issue a call" in page
    assert "| x + x on 1,000 float32 (a launch) | " in page
    launch_us = modelkit.model_profile()[1]["host"]["issue_us"]["launch"]
    assert f"| {float(launch_us):g} (launch) |" in page
    no_costs = fid.markdown(fid.assemble(fid.EFFECTS, synthetic_raw(fid),
                                         {}, info, ref_of))
    assert "cost to issue a call" not in no_costs


def test_copy_duplex_reads_two_for_a_full_duplex_link(fid):
    """(h2d + d2h) / both: 2 when the directions run at full rate together,
    1 when they take turns; the page says which it measured."""
    raw = {"copy_duplex": {"h2d_s": 0.004, "d2h_s": 0.004, "both_s": 0.004}}
    assert fid.duplex(raw) == pytest.approx(2.0)
    raw["copy_duplex"]["both_s"] = 0.008
    assert fid.duplex(raw) == pytest.approx(1.0)
    assert fid.duplex({}) is None
    info, ref_of = fid.load_reference(H100)
    page = fid.markdown(fid.assemble(fid.EFFECTS, synthetic_raw(fid) | raw,
                                     {}, info, ref_of))
    assert "## Copies in both directions at once" in page
    assert "8.00 ms (events): the two alone over both at once is 1.00" in page


def test_the_page_says_how_to_regenerate_it_against_its_reference(fid):
    """A table compared with a GPU's own run of fidelity.py names that
    run in its command; one compared with the lessons' reference does
    not need to."""
    from fidelitykit import table
    gpu = {"reference": {"kind": "fidelity",
                         "path": "benchmarks/fidelity-gpu-nvidia-h100.json"}}
    assert table.command(gpu).endswith(
        "--reference benchmarks/fidelity-gpu-nvidia-h100.json")
    assert table.command({"reference": {"kind": "lessons"}}) == table.COMMAND
