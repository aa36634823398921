"""The mutation sampler's own logic (tools/mutate.py): finding sites,
applying one, sampling reproducibly, scoring. Runs no test suite."""
import ast
from pathlib import Path

import pytest

import scripts

ROOT = Path(__file__).resolve().parents[1]
mutate = scripts.load("tools/mutate.py")

CODE = '''\
"""Docstring 2 is not a number."""
LIMIT = 4


def f(a, b=0, *, flag=True):
    if a < b and not flag:
        return a + b
    while a >= 1 or a == b:
        a -= 2 * b
    if a is None or a not in (1, 2):
        raise ValueError(f"bad {a + 1}")
    assert a != 3, f"{a - 1} is not allowed"
    x = a / 7  # pragma: no mutate
    return "s" + str(a)
'''


def mutated(text, m):
    return mutate.apply(text, m)


def by_change(ms):
    return {(m.line, m.kind, m.original, m.mutated) for m in ms}


def test_sites_finds_each_kind_once_where_expected():
    ms = mutate.sites(CODE, "book/src/x.py")
    got = by_change(ms)
    expected = {
        (2, "number", "4", "5"),
        (5, "number", "0", "1"),
        (5, "true-false", "True", "False"),
        (6, "compare", "<", "<="),
        (6, "boolean", "and", "or"),
        (6, "not", "not ", ""),
        (7, "return-none", "a + b", "None"),
        (7, "arith", "+", "-"),
        (8, "compare", ">=", ">"),
        (8, "number", "1", "0"),
        (8, "boolean", "or", "and"),
        (8, "compare", "==", "!="),
        (9, "arith", "-=", "+="),
        (9, "arith", "*", "/"),
        (9, "number", "2", "3"),
        (10, "compare", "is", "is not"),
        (10, "boolean", "or", "and"),
        (10, "compare", "not in", "in"),
        (10, "number", "1", "0"),
        (10, "number", "2", "3"),
        (12, "compare", "!=", "=="),
        (12, "number", "3", "4"),
        (14, "return-none", '"s" + str(a)', "None"),
    }
    assert got == expected
    # not mutated: the docstring, the raise (a message), the f-string
    # assert message, a `# pragma: no mutate` line, string concatenation
    assert not {m for m in ms if m.line in (1, 11, 13)}
    assert len({m.id for m in ms}) == len(ms)


def test_every_site_applies_and_parses():
    for m in mutate.sites(CODE, "x.py"):
        new = mutated(CODE, m)
        assert new != CODE
        ast.parse(new)
        assert new[m.start:m.start + len(m.mutated)] == m.mutated


def test_apply_changes_exactly_one_token():
    text = "def g(x):\n    return x < 3\n"
    (cmp,) = [m for m in mutate.sites(text) if m.kind == "compare"]
    assert (cmp.line, cmp.col) == (2, 13)
    assert mutated(text, cmp) == "def g(x):\n    return x <= 3\n"
    (num,) = [m for m in mutate.sites(text) if m.kind == "number"]
    assert mutated(text, num) == "def g(x):\n    return x < 4\n"
    (ret,) = [m for m in mutate.sites(text) if m.kind == "return-none"]
    assert mutated(text, ret) == "def g(x):\n    return None\n"


def test_not_before_parentheses_and_operators_split_over_lines():
    text = "y = not (a or b)\nz = (a +\n     b)\n"
    ms = {m.kind: m for m in mutate.sites(text)}
    assert mutated(text, ms["not"]).startswith("y = (a or b)\n")
    assert mutated(text, ms["arith"]) == (
        "y = not (a or b)\nz = (a -\n     b)\n")


def test_columns_count_characters_not_bytes():
    text = 'x = ("µµµ", 1 + 2)\n'
    (m,) = [m for m in mutate.sites(text) if m.kind == "arith"]
    assert m.col == 14 and text[m.start] == "+"
    assert mutated(text, m) == 'x = ("µµµ", 1 - 2)\n'


def test_apply_refuses_a_changed_source():
    (m,) = [m for m in mutate.sites("a = 1 < 2\n") if m.kind == "compare"]
    with pytest.raises(ValueError, match="source changed"):
        mutate.apply("a = 1 > 2\n", m)


def fake(n_files, per_file):
    return [mutate.Mutant(f"f{i}.py", j + 1, 0, "number", j, j + 1, "1", "0")
            for i, k in enumerate(per_file[:n_files]) for j in range(k)]


def test_sample_is_reproducible_and_spread_in_proportion():
    ms = fake(3, [60, 30, 10])
    a = mutate.sample(ms, 10, seed=7)
    assert a == mutate.sample(list(reversed(ms)), 10, seed=7)
    assert a != mutate.sample(ms, 10, seed=8)
    assert len(a) == len(set(a)) == 10
    files = [m.file for m in a]
    assert (files.count("f0.py"), files.count("f1.py"),
            files.count("f2.py")) == (6, 3, 1)
    assert mutate.sample(ms, 500, seed=1) == sorted(
        ms, key=lambda m: (m.file, m.start, m.kind))


def test_score_counts_equivalents_only_with_a_reason():
    res = [{"id": "a", "outcome": "killed"}, {"id": "b", "outcome": "timeout"},
           {"id": "c", "outcome": "survived"},
           {"id": "d", "outcome": "survived"}]
    s = mutate.score(res, {"c": "the branch cannot be reached", "d": " "})
    assert (s["killed"], s["survived"], s["equivalent"]) == (2, 2, 1)
    assert s["score"] == 0.75 and s["equivalent_share"] == 0.25


def test_a_lesson_is_one_test_and_module_names():
    assert mutate._test_of("book/05_1_queues.ipynb::Cell 3") == \
        "book/05_1_queues.ipynb"
    nodeid = "tests/t.py::test_x[a::b]"
    assert mutate._test_of(nodeid) == nodeid
    assert mutate._module_names("book/src/cpudevice/cuda/stream.py") == (
        "src.cpudevice.cuda.stream", "stream")
    assert mutate._module_names("book/src/__init__.py") == ("src", "src")


def test_a_split_module_is_reached_through_the_module_that_re_exports_it():
    """`--uncovered run` runs the tests of a module's importers: for a module
    split out of another, also those that import the one re-exporting it."""
    assert mutate._reexporters(ROOT, "src.energy") == {"src.kernels"}
    assert mutate._reexporters(ROOT, "src.reference.store") == {
        "src.reference"}
    # pipeline imports kernels' names to use them: no re-export
    assert mutate._reexporters(ROOT, "src.kernels") == set()
    tests = {"tests/test_kernels.py::test_x": {},
             "tests/test_reference.py::test_y": {}}
    assert mutate.relevant_suite(ROOT, "book/src/energy.py",
                                 {"tests": tests}) == [
        "tests/test_kernels.py::test_x"]
    assert mutate.relevant_suite(ROOT, "book/src/reference/writer.py",
                                 {"tests": tests}) == [
        "tests/test_reference.py::test_y"]
    # the CPU model's own test files, in tests/cpudevice/, are found too
    tests["tests/cpudevice/test_hardware.py::test_z"] = {}
    assert "tests/cpudevice/test_hardware.py::test_z" in \
        mutate.relevant_suite(ROOT, "book/src/cpudevice/_profile.py",
                              {"tests": tests})


def test_the_real_sources_have_unique_ids():
    text = (ROOT / "book/src/timing.py").read_text(encoding="utf-8")
    ms = mutate.sites(text, "book/src/timing.py")
    assert ms and len({m.id for m in ms}) == len(ms)
    assert all(m.id.startswith("book/src/timing.py:") for m in ms)


def test_failed_tests_are_read_from_pytests_summary():
    out = ("....F\n= short test summary info =\n"
           "FAILED tests/t.py::test_a[1 GiB] - assert 1 == 2\n"
           "ERROR tests/t.py::test_b\n"
           "FAILED book/03_1_loops.ipynb::Cell 5 - nbval\n"
           "FAILED book/03_1_loops.ipynb::Cell 6\n"
           "1 failed in 0.1s\n")
    assert mutate._failed(out) == ["tests/t.py::test_a[1 GiB]",
                                   "tests/t.py::test_b",
                                   "book/03_1_loops.ipynb"]


def test_outcome_of_pytests_exit():
    assert mutate._outcome(None, "") == "timeout"
    assert mutate._outcome(0, "1 passed") == "survived"
    assert mutate._outcome(1, "E   Failed: Timeout >30.0s") == "timeout"
    assert mutate._outcome(1, "1 failed") == "killed"
    # the mutant breaks a test module's import: its tests are not found
    collecting = ("___ ERROR collecting tests/test_kernels.py ___\n"
                  "ERROR: found no collectors for tests/test_kernels.py::t")
    assert mutate._outcome(4, collecting) == "killed"
    assert mutate._outcome(4, "ERROR: file or directory not found: x") == \
        "error"
    assert mutate._outcome(5, "no tests ran") == "error"


def test_import_time_lines_are_module_and_class_bodies_and_def_headers():
    text = ('LIMIT = 4\n'                    # 1
            '@deco(2)\n'                     # 2
            'def f(a=1):\n'                  # 3
            '    return a + LIMIT\n'         # 4
            'class C:\n'                     # 5
            '    size = 3\n'                 # 6
            '    def g(self, b=5):\n'        # 7
            '        return b\n'             # 8
            'if LIMIT > 2:\n'                # 9
            '    X = 1\n'                    # 10
            'else:\n'                        # 11
            '    def h():\n'                 # 12
            '        return 7\n')            # 13
    tree = ast.parse(text)
    run_at_import = [ln for ln in range(1, 14)
                     if mutate._import_time(tree, ln)]
    assert run_at_import == [1, 2, 3, 5, 6, 7, 9, 10, 11, 12]


def test_a_body_run_at_import_adds_its_modules_suite():
    """nvmlmodel's `_error_class` runs only while the module is imported
    (it builds the NVMLError_* classes): the tests that use the classes do
    not run its lines, so its module's test files are added."""
    path = "book/src/nvmlmodel.py"
    m = next(m for m in mutate.sites((ROOT / path).read_text(), path)
             if m.kind == "return-none" and m.original == "cls")
    tests = {"tests/test_nvml.py::test_x": {"seconds": 1.0, "passed": True},
             "tests/test_timeline.py::test_y": {"seconds": 1.0,
                                                "passed": True},
             "tests/sub.py::test_z": {"seconds": 2.0, "passed": True}}
    lines = {m.file: {str(m.line): ["tests/sub.py::test_z"]}}
    cmap = {"tests": tests, "lines": lines}
    assert mutate.select(ROOT, m, cmap) == (["tests/sub.py::test_z"],
                                            "coverage")
    cmap["at_import"] = {m.file: [m.line]}
    assert mutate.select(ROOT, m, cmap) == (
        ["tests/test_nvml.py::test_x", "tests/sub.py::test_z"],
        "coverage + its module's suite (run at import)")


def test_all_sites_walks_the_package_in_order_with_unique_ids(tmp_path):
    """Every file under book/src, in path order, each mutant's id unique
    (the real package: about 3,000 sites, ten seconds of compiling)."""
    pkg = tmp_path / "book" / "src" / "sub"
    pkg.mkdir(parents=True)
    (pkg.parent / "a.py").write_text("def f(x):\n    return x + 1\n")
    (pkg / "b.py").write_text("def g(y):\n    return y < 2\n")
    found = mutate.all_sites(tmp_path)
    assert [m.file for m in found][0] == "book/src/a.py"
    assert {m.file for m in found} == {"book/src/a.py", "book/src/sub/b.py"}
    assert len({m.id for m in found}) == len(found) >= 2
