"""The scratch copy of the checkout, and the coverage map built in it: which
tests (and lessons) run each line of `book/src`, cached per content."""
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import SRC

CACHE = ".mutation"
MAP_FORMAT = 2           # change when build_map's output changes


def _tracked(root):
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard",
                          "-z"], cwd=root, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def make_copy(root, dest):
    for rel in _tracked(root):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for d in dest.rglob("__pycache__"):
        shutil.rmtree(d, ignore_errors=True)


def _content_hash(root):
    h = hashlib.sha256(f"map format {MAP_FORMAT}\0".encode())
    for rel in sorted(_tracked(root)):
        if rel.startswith((SRC + "/", "tests/")) or (
                rel.startswith("book/") and rel.endswith(".ipynb")) or (
                rel == "pytest.ini"):
            p = root / rel
            if p.is_file():
                h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _env(copy, extra=None):
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("COVERAGE_PROCESS_START", None)
    env.pop("MUTATE_TEST_ID", None)
    env.update(extra or {})
    return env


KERNEL_STARTUP = """\
try:
    import coverage
    _mutate_cov = coverage.Coverage.current()
except Exception:
    _mutate_cov = None
if _mutate_cov is not None:
    def _mutate_save(*_):
        try:
            _mutate_cov.save()
        except Exception:
            pass
    get_ipython().events.register("post_run_cell", _mutate_save)
"""


def build_map(copy, python, log, pytest_args=()):
    """Run the whole suite once under coverage in every process; return
    {"lines": {file: {line: [tests]}}, "tests": {test: {seconds, passed}},
    "imported": {file: [lines]}, "at_import": {file: [lines]}}: lines run
    at import only, in no test; lines run (also) outside any test, while
    the pytest process collected (imported) the modules."""
    rc = copy / ".mutation-coveragerc"
    rc.write_text(f"[run]\nsource = {copy / SRC}\nparallel = true\n"
                  f"data_file = {copy / '.coverage'}\nsigterm = true\n"
                  "context = ${MUTATE_TEST_ID-}\n")
    durations = copy / ".mutation-durations.json"
    # nbval stops a kernel with SIGKILL, before coverage can save at exit:
    # an IPython startup file makes the kernel save after every cell.
    startup = copy / ".mutation-ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-coverage.py").write_text(KERNEL_STARTUP)
    env = _env(copy, {"COVERAGE_PROCESS_START": str(rc),
                      "IPYTHONDIR": str(copy / ".mutation-ipython"),
                      "MUTATE_DURATIONS": str(durations),
                      "PYTHONPATH": os.pathsep.join(
                          [str(copy / "tools")]
                          + [p for p in [os.environ.get("PYTHONPATH")] if p])})
    t0 = time.monotonic()
    log(f"building the coverage map: the whole suite under coverage "
        f"(several minutes) in {copy}")
    r = subprocess.run([python, "-m", "pytest", "-q", "-p", "mutatekit.plugin",
                        "-p", "no:cacheprovider", *pytest_args],
                       cwd=copy, env=env,
                       capture_output=True, text=True)
    log(f"  suite ran in {time.monotonic() - t0:.0f} s, exit {r.returncode}"
        f": {(r.stdout.strip().splitlines() or [''])[-1]}")
    subprocess.run([python, "-m", "coverage", "combine", "-q",
                    f"--rcfile={rc}"], cwd=copy, env=_env(copy), check=True)
    import coverage
    data = coverage.CoverageData(basename=str(copy / ".coverage"))
    data.read()
    lines, imported, at_import = {}, {}, {}
    for path in data.measured_files():
        rel = Path(path).resolve().relative_to(copy.resolve()).as_posix()
        by_line = data.contexts_by_lineno(path)
        lines[rel] = {}
        for ln, ctxs in by_line.items():
            tests = sorted({c for c in ctxs if c})
            if "" in ctxs:
                at_import.setdefault(rel, []).append(ln)
            if tests:
                lines[rel][str(ln)] = tests
            else:
                imported.setdefault(rel, []).append(ln)
    tests = json.loads(durations.read_text()) if durations.exists() else {}
    return {"lines": lines, "tests": tests, "imported": imported,
            "at_import": at_import,
            "suite_seconds": round(time.monotonic() - t0, 1),
            "suite_exit": r.returncode}


def load_map(root, copy, python, log, rebuild=False):
    key = _content_hash(root)
    path = root / CACHE / f"map-{key}.json"
    if path.exists() and not rebuild:
        log(f"coverage map: {path.relative_to(root)} (cached)")
        return json.loads(path.read_text())
    cmap = build_map(copy, python, log)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cmap))
    log(f"coverage map: written to {path.relative_to(root)}")
    return cmap

