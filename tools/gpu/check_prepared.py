"""Check the wheels tools/gpu/prepare.sh packed, as the lent GPU will use them.

    python tools/gpu/check_prepared.py [--python PY] [--whl DIR]

1. The wheels in ``DIR`` (default ``.gpu/whl``) are exactly the versions
   pinned in ``tools/gpu/lane-wheels.txt``.
2. Every dependency of every packed wheel (its ``Requires-Dist``, markers
   read for CPython ``PYVER`` on x86-64 Linux) is packed, at a version it
   accepts, or is a package of the lent GPU's image
   (``tools/gpu/image-nvidia-h200.txt``), or is named ``unneeded`` in the
   pins (myst_nb's Sphinx side).
3. In a clean virtual environment of Python ``PY`` (default: ``python3.12``
   on the PATH, else pyenv's) that holds only the image's packages the
   wheels depend on (installed from the package index, at the newest
   versions the wheels accept), the wheels installed as run.sh installs
   them (``pip install --no-deps --target``, that folder on
   ``PYTHONPATH``) import nbval, myst_nb, nbclient and ipykernel, a
   kernel started by nbclient runs a cell that glues a value, and
   pytest runs a notebook through nbval.

Exit status 0 when all holds; 1 when something does not; 77 when step 3
cannot run here (no such Python, or the package index out of reach),
after steps 1 and 2.
"""
import argparse
import email
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "tools" / "gpu" / "lane-wheels.txt"
IMAGE = ROOT / "tools" / "gpu" / "image-nvidia-h200.txt"
SKIP = 77

#: What the kernel runs: the lessons' own imports of the stack.
CELL = ("from myst_nb import glue\n"
        "glue('answer', 6 * 7, display=False)\n"
        "import ipykernel, sys\n"
        "print(sys.version_info[:2], ipykernel.__version__)")


def pins(path=PINS):
    """``({name: version}, {unneeded names})`` of the pins file."""
    pinned, unneeded = {}, set()
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("# unneeded:"):
            unneeded |= {canonicalize_name(n) for n in line.split(":", 1)[1]
                         .split()}
        elif line and not line.startswith("#"):
            name, version = line.split("==")
            pinned[canonicalize_name(name)] = version.strip()
    return pinned, unneeded


def image_packages(path=IMAGE):
    """The names of the image's packages."""
    return {canonicalize_name(ln.strip()) for ln in path.read_text()
            .splitlines() if ln.strip() and not ln.startswith("#")}


def wheel_metadata(path):
    """The METADATA of wheel ``path``, as an email message."""
    with zipfile.ZipFile(path) as whl:
        name = next(n for n in whl.namelist()
                    if re.match(r"[^/]+\.dist-info/METADATA$", n))
        return email.message_from_bytes(whl.read(name))


def environment(pyver):
    """Marker values for CPython ``pyver`` on x86-64 Linux."""
    return {"python_version": pyver, "python_full_version": pyver + ".0",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "sys_platform": "linux", "os_name": "posix",
            "platform_system": "Linux", "platform_machine": "x86_64",
            "extra": ""}


def check_wheels(whl_dir, pyver):
    """Steps 1 and 2: ``(problems, {image package: [specifiers]})``."""
    pinned, unneeded = pins()
    image = image_packages()
    packed, problems, needs = {}, [], {}
    wheels = sorted(Path(whl_dir).glob("*.whl"))
    for wheel in wheels:
        meta = wheel_metadata(wheel)
        packed[canonicalize_name(meta["Name"])] = (meta["Version"], meta)
    for name, version in pinned.items():
        if name not in packed:
            problems.append(f"{name}=={version} is pinned but not packed")
        elif packed[name][0] != version:
            problems.append(f"{name} is packed at {packed[name][0]}, "
                            f"pinned at {version}")
    for name in set(packed) - set(pinned):
        problems.append(f"{name} is packed but not pinned")
    env = environment(pyver)
    for name, (version, meta) in sorted(packed.items()):
        for text in meta.get_all("Requires-Dist") or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = canonicalize_name(req.name)
            if dep in packed:
                if not req.specifier.contains(packed[dep][0],
                                              prereleases=True):
                    problems.append(f"{name} needs {req}, packed: "
                                    f"{packed[dep][0]}")
            elif dep in image:
                needs.setdefault(dep, []).append(str(req.specifier))
            elif dep not in unneeded:
                problems.append(f"{name} {version} needs {req}: neither "
                                f"packed nor in the image")
    if not wheels:
        problems.append(f"no wheels in {whl_dir}: bash tools/gpu/prepare.sh")
    return problems, needs


def python_version(python):
    """``"3.12"`` for a Python 3.12 at ``python``; None if it does not run."""
    try:
        done = subprocess.run([python, "-c", "import sys; print('%d.%d' % "
                               "sys.version_info[:2])"], text=True,
                              capture_output=True, timeout=60)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def find_python(pyver):
    """A Python ``pyver`` that runs here: on the PATH, else pyenv's; or
    None. (pyenv's shim on the PATH runs only a version pyenv selects.)"""
    pyenv = os.path.expanduser(f"~/.pyenv/versions/{pyver}.*/bin/"
                               f"python{pyver}")
    candidates = [shutil.which(f"python{pyver}"), *sorted(
        glob.glob(pyenv), key=lambda p: Version(
            p.split("/versions/")[1].split("/")[0]), reverse=True)]
    return next((c for c in candidates
                 if c and python_version(c) == pyver), None)


def run(cmd, **kwargs):
    shown = [str(c) for c in cmd if not str(c).endswith(".whl")]
    wheels = len(cmd) - len(shown)
    print("$", " ".join(shown)[:300], f"[{wheels} wheels]" if wheels
          else "", flush=True)
    return subprocess.run([str(c) for c in cmd], text=True,
                          capture_output=True, **kwargs)


def check_install(python, whl_dir, needs, work):
    """Step 3 in folder ``work``; returns ``(status, message)``."""
    venv, site = Path(work) / "venv", Path(work) / "gpu-site"
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    made = run([python, "-m", "venv", venv], env=clean)
    if made.returncode:
        return 1, "venv failed: " + made.stderr
    py = venv / "bin" / "python"
    base = [name + ",".join(sorted(set(filter(None, specs))))
            for name, specs in sorted(needs.items())]
    got = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
               *base], env=clean)
    if got.returncode:
        return SKIP, ("the image's packages could not be installed from "
                      "the package index:\n" + got.stdout + got.stderr)
    print("beside the wheels, from the image's list:", ", ".join(base))
    # as run.sh installs them
    put = run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
               "--no-compile", "--no-cache-dir", "--upgrade", "--target",
               site, *sorted(Path(whl_dir).glob("*.whl"))], env=clean)
    if put.returncode:
        return 1, "installing the wheels failed:\n" + put.stdout + put.stderr
    env = dict(clean, PYTHONPATH=str(site))
    probe = f"""
import json, sys
import nbformat, nbval, myst_nb, nbclient, ipykernel
from nbclient import NotebookClient
for module in (nbval, myst_nb, nbclient, ipykernel):
    assert module.__file__.startswith({str(site)!r}), module.__file__
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell({CELL!r})]
NotebookClient(nb, timeout=120, kernel_name="python3").execute()
outputs = nb.cells[0].outputs
glued = [o for o in outputs if o.get("metadata", {{}}).get("scrapbook")]
print(json.dumps({{"glued": [o["metadata"]["scrapbook"]["name"]
                             for o in glued],
                  "printed": "".join(o.get("text", "") for o in outputs)}}))
"""
    ran = run([py, "-c", probe], env=env, cwd=work, timeout=300)
    if ran.returncode:
        return 1, "the kernel did not run:\n" + ran.stdout + ran.stderr
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    if result["glued"] != ["answer"]:
        return 1, f"the kernel's cell glued {result['glued']}"
    print("a kernel ran the cell:", result["printed"].strip())
    nb = Path(work) / "lesson.ipynb"
    nb.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": 1, "id": "a1",
                   "metadata": {}, "source": "# NBVAL_CHECK_OUTPUT\n"
                   "print(6 * 7)", "outputs": [{
                       "name": "stdout", "output_type": "stream",
                       "text": "42\n"}]}],
        "metadata": {"kernelspec": {"name": "python3",
                                    "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}))
    tested = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--nbval-lax", nb.name], env=env, cwd=work, timeout=300)
    if tested.returncode:
        return 1, "nbval failed:\n" + tested.stdout + tested.stderr
    print("nbval:", tested.stdout.strip().splitlines()[-1])
    return 0, "ok"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--whl", default=str(ROOT / ".gpu" / "whl"))
    parser.add_argument("--python", help="the Python to install into "
                        "(default: python$PYVER, PYVER default 3.12)")
    args = parser.parse_args(argv)
    pyver = os.environ.get("PYVER", "3.12")
    problems, needs = check_wheels(args.whl, pyver)
    for problem in problems:
        print("problem:", problem)
    if problems:
        return 1
    print(f"{len(list(Path(args.whl).glob('*.whl')))} wheels: as pinned; "
          f"every dependency packed or the image's")
    python = args.python or find_python(pyver)
    if python is None:
        print(f"no Python {pyver} here: the install was not checked")
        return SKIP
    version = python_version(python)
    if version != pyver:
        print(f"{python} is Python {version}, not {pyver}")
        return 1
    with tempfile.TemporaryDirectory() as work:
        status, message = check_install(python, args.whl, needs, work)
    print(message)
    return status


if __name__ == "__main__":
    sys.exit(main())
