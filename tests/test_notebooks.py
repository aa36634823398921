"""The notebook tests can fail: nbval notices a changed checked output; and
a lesson's checked outputs survive running it twice in one kernel."""
import copy
import itertools
import os
from pathlib import Path

import nbformat
import pytest

import subproc
from nbtexts import checked, texts

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
#: The first section of each chapter: enough to show that nbval fails a
#: changed checked output in every chapter, at a seventh of the suite's time
#: that running all of them would take.
FIRSTS = [next(group) for _, group in
          itertools.groupby(NOTEBOOKS, key=lambda p: p.name[:2])]


def test_every_lesson_checks_some_outputs():
    assert NOTEBOOKS, "no lesson notebooks found under book/"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert sum(map(checked, nb.cells)) >= 3, path.name


def test_nbval_fails_when_a_checked_output_changes(tmp_path):
    """Each chapter's first section, cut after its first checked cell that
    prints, with that print altered: nbval must fail that cell, and only
    it. All run in one pytest process (one start-up instead of one each)."""
    (tmp_path / "src").symlink_to(BOOK / "src")
    last_cell = {}
    for path in FIRSTS:
        nb = nbformat.read(path, as_version=4)
        first = next(i for i, c in enumerate(nb.cells)
                     if checked(c) and any(o.output_type == "stream"
                                           for o in c.outputs))
        nb.cells = nb.cells[:first + 1]           # run only up to it
        out = next(o for o in nb.cells[first].outputs
                   if o.output_type == "stream")
        out.text = f"a result {path.stem} never printed\n"
        nbformat.write(nb, tmp_path / path.name)
        last_cell[path.name] = sum(c.cell_type == "code" for c in nb.cells)
    # Beside the suite's own two workers, four kernels share CI's two
    # cores: give each kernel as long to start as a cell has to run.
    r = subproc.run(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                     "-n", "2", "--dist", "loadfile",   # kernels start apart
                     "--nbval-lax", "--nbval-current-env",
                     "--nbval-kernel-startup-timeout=300", "-c",
                     os.devnull, "--rootdir", str(tmp_path)]
                    + sorted(last_cell), cwd=tmp_path,
                    timeout=600, backend="cpu")
    assert r.returncode == 1, r.stdout[-3000:]
    for name, n_code in last_cell.items():
        assert f"a result {Path(name).stem} never printed" in r.stdout, name
        # nbval names the failed cell: the last one, the altered print
        assert f"{name}::Cell {n_code - 1}" in r.stdout, r.stdout[-3000:]
    assert r.stdout.count("FAILED") == len(FIRSTS)   # one per section


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_running_a_lesson_twice_in_one_kernel_keeps_checked_outputs(path):
    from nbclient import NotebookClient
    stored = nbformat.read(path, as_version=4)
    nb = copy.deepcopy(stored)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(BOOK)}},
                            allow_errors=True)
    with client.setup_kernel(env=dict(os.environ, BOOK_BACKEND="cpu")):
        for _ in range(2):
            for i, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    client.execute_cell(cell, i)
    for ref, cell in zip(stored.cells, nb.cells):
        if checked(ref):
            assert texts(cell.outputs) == texts(ref.outputs), ref.source
