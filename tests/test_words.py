"""The words a lesson's sentences say, chosen by `src.words`: each choice on
the CPU device model's kind of values and on a GPU's, and each backend's
note (tools/gpu/rehearse.py runs the lessons' GPU branches on the model)."""
import pytest

import src
from src import words


@pytest.mark.parametrize("seconds, than, said", [
    (1.13e-3, 1.92e-3, "faster"),       # the model's two orders (06)
    (2.0e-3, 1.5e-3, "slower"),
    (1.0e-3, 1.0e-3, "no faster"),      # equal as the sentence shows
])
def test_faster_or_slower_reads_the_shorter_time_as_faster(seconds, than,
                                                           said):
    assert words.faster_or_slower(seconds, than) == said


@pytest.mark.parametrize("value, than, said", [
    (3.88, 3.89, "less"), (3.89, 3.88, "more"), (1.0, 1.0, "more")])
def test_less_or_more(value, than, said):
    assert words.less_or_more(value, than) == said


@pytest.mark.parametrize("ms, than, said", [
    (0.104, 0.11, "less time than"),        # the model's run (02)
    (0.1101, 0.1104, "as much time as"),    # equal to the 3 digits shown
    (1.52, 1.21, "more time than"),         # a GPU's kind of values
])
def test_time_than_agrees_with_the_digits_the_table_shows(ms, than, said):
    assert words.time_than(ms, than) == said


def test_time_than_compares_at_the_digits_asked():
    assert words.time_than(0.1101, 0.1104, digits=4) == "less time than"


@pytest.mark.parametrize("backend", ["gpu", "cpu"])
def test_on_backend_says_what_is_true_of_the_backend_that_ran(backend):
    note = words.on_backend(gpu="measured on a GPU", cpu="modelled",
                            backend=backend)
    assert note == ("measured on a GPU" if backend == "gpu" else "modelled")


def test_on_backend_defaults_to_this_run(monkeypatch):
    monkeypatch.setattr(src, "BACKEND", "gpu")     # as rehearse.py does
    assert words.on_backend(gpu="g", cpu="c") == "g"
    monkeypatch.setattr(src, "BACKEND", "cpu")
    assert words.on_backend(gpu="g", cpu="c") == "c"


@pytest.mark.parametrize("ratio, said", [
    (2.08, "2.1 times as long"),        # the H100's run (04)
    (1.23, "1.2 times as long"),        # the model's, on an idle machine
    (0.984, "about as long"),           # the model's, on a busy one
    (1.04, "about as long"),
    (0.8, "less time (0.80 times as long)"),
])
def test_times_as_long_never_calls_a_shorter_time_longer(ratio, said):
    assert words.times_as_long(ratio) == said


@pytest.mark.parametrize("before, after, said", [
    (13.5, 16.0, "grew"),           # the H100's eager over fused (03)
    (9.57, 6.38, "shrank"),         # the model's, at its smaller sizes
    (9.2, 9.4, "stayed about the same"),    # a model run: noise
    (10.0, 11.0, "stayed about the same"),  # at the tolerance
])
def test_grew_or_shrank_calls_a_change_within_the_tolerance_none(
        before, after, said):
    assert words.grew_or_shrank(before, after) == said


def test_ranges_apart_explains_only_ranges_that_overlap():
    note = " The two ranges overlap."
    assert words.ranges_apart(2.12, 0.107, note) == ""     # the H100's
    assert words.ranges_apart(0.028, 0.049, note) == note  # a model run
