"""The contract between the book, CuPy and the CPU device model.

Lesson code is CuPy code, verbatim, and runs on real CuPy or on the CPU
device model (`src.cpudevice`). This test keeps the model honest: every
``cp.``/``cpx.`` name the book uses must exist in the installed CuPy/cupyx
*and* in the model, with the same parameters. NVML is held to the same
contract: every ``nvml.`` name (``from src import nvml``) must exist in
NVIDIA's ``pynvml`` (package ``nvidia-ml-py``) and in the model's stand-in
(`src.nvmlmodel`), with the same parameters.

What it checks, one test per chain (the test id is the chain):

* ``test_cupy_has[chain]``: the chain resolves in CuPy (attributes, then
  submodules), and every keyword the book passes is one of its parameters.
* ``test_model_matches_cupy[chain]``: the chain resolves in the model; the
  model's object is a class/callable where CuPy's is; an exception class
  derives from the same builtin exceptions (``OutOfMemoryError`` is a
  ``MemoryError``); the parameters have the same names, kinds and order, and
  the same defaults where both are plain literals; every keyword the book
  passes is accepted.

The machinery (reading the book, resolving chains, comparing signatures)
is `contractkit`, tested on its own in `test_contractkit.py`.
"""
import importlib
import types

import pytest

from contractkit import (CUPY_PACKAGES, CUPY_SIGNATURES, MODEL_PACKAGES,
                         Missing, cupy_problems, model_problems, plain,
                         readable_signature, report, resolve,
                         signature_differences, table_entry, walk_book)

BOOK_KEYWORDS, BOOK_WHERE, BOOK_ERRORS = walk_book()
CHAINS = sorted(BOOK_KEYWORDS)


@pytest.fixture(scope="module")
def cupy_roots():
    pytest.importorskip("cupy", reason="CuPy is not installed here "
                        "(requirements.txt installs it on Linux and Windows)")
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed here "
                        "(requirements.txt installs it beside CuPy)")
    return {root: importlib.import_module(name)
            for root, name in CUPY_PACKAGES.items()}


@pytest.fixture(scope="module")
def model_roots():
    try:
        import src.cpudevice as model   # whatever BOOK_BACKEND chose for src
    except ImportError as e:
        pytest.fail(f"the CPU device model cannot be imported: {e!r}")
    return {"cp": model, "cpx": importlib.import_module(MODEL_PACKAGES["cpx"]),
            "nvml": importlib.import_module(MODEL_PACKAGES["nvml"])}


def test_book_code_parses():
    assert not BOOK_ERRORS, "\n".join(BOOK_ERRORS)


def test_walker_finds_the_chains_of_src_init():
    """The parametrized tests below are not silently empty."""
    needed = {"cp.cuda.runtime.getDeviceCount",
              "cp.cuda.runtime.getDeviceProperties", "cp.__version__"}
    assert needed <= set(CHAINS), f"found only {CHAINS}"


@pytest.mark.parametrize("chain", CHAINS)
def test_cupy_has(chain, cupy_roots):
    problems = cupy_problems(chain, BOOK_KEYWORDS[chain], cupy_roots)
    assert not problems, report(chain, problems, BOOK_WHERE)


@pytest.mark.parametrize("chain", CHAINS)
def test_model_matches_cupy(chain, cupy_roots, model_roots):
    problems = model_problems(chain, BOOK_KEYWORDS[chain], cupy_roots,
                              model_roots)
    assert not problems, report(chain, problems, BOOK_WHERE)


@pytest.mark.parametrize("path", sorted(CUPY_SIGNATURES))
def test_signature_table_agrees_with_cupy(path, cupy_roots):
    """Each table entry names a real CuPy object; where inspect can read its
    signature, the table says the same (``cp.ndarray`` excepted: its Python
    signature is a pass-through wrapper)."""
    obj = resolve(cupy_roots[path.split(".")[0]], path)
    readable = readable_signature(obj)
    documented, alternatives, _ = table_entry(path)
    if readable is not None and path != "cp.ndarray":
        assert any(not signature_differences(s, readable)
                   for s in alternatives), (
            f"table {plain(documented)} vs CuPy {plain(readable)}: "
            + "; ".join(signature_differences(documented, readable)))


@pytest.mark.parametrize("path", sorted(CUPY_SIGNATURES))
def test_model_matches_signature_table(path, cupy_roots, model_roots):
    """The design's callables (methods of results included, which the chain
    walk cannot see) have CuPy's parameters in the model."""
    documented, alternatives, required = table_entry(path)
    try:
        obj = resolve(model_roots[path.split(".")[0]], path)
    except Missing as e:
        if required or path in BOOK_KEYWORDS:
            pytest.fail(f"the model has no {e.args[0]}; CuPy has "
                        f"{path}{plain(documented)}")
        pytest.skip(f"{path} is optional and not in the model")
    sig = readable_signature(obj)
    if sig is None:
        pytest.skip(f"the model's {path} has no readable signature")
    assert any(not signature_differences(s, sig) for s in alternatives), (
        f"CuPy has {path}{plain(documented)}, the model has "
        f"{path}{plain(sig)}: "
        + "; ".join(signature_differences(documented, sig)))


def test_a_made_up_chain_is_reported_missing(cupy_roots):
    assert cupy_problems("cp.cuda.not_a_thing", set(), cupy_roots) == [
        f"CuPy {cupy_roots['cp'].__version__} has no cp.cuda.not_a_thing"]
    assert cupy_problems("cp.cuda.Stream", {"nonblocking"}, cupy_roots) == [
        "the book passes nonblocking=, but CuPy's cp.cuda.Stream(null=False,"
        " non_blocking=False, ptds=False, priority=None) has no such"
        " parameter"]


def _fake_model():
    """A model with a wrong asarray, a Device that is a function and an
    OutOfMemoryError that is no MemoryError."""
    cp = types.ModuleType("fake")
    cp.cuda = types.ModuleType("fake.cuda")
    cp.cuda.memory = types.ModuleType("fake.cuda.memory")
    cp.asarray = lambda a, dtype=None, order=None, *, copy=None: a
    cp.cuda.Device = lambda device: device
    cp.cuda.memory.OutOfMemoryError = type("OutOfMemoryError", (Exception,),
                                           {})
    return {"cp": cp, "cpx": types.ModuleType("fake_cupyx")}


def test_model_problems_are_reported(cupy_roots):
    fake = _fake_model()
    assert model_problems("cp.cuda.Stream", set(), cupy_roots, fake) == [
        "the model has no cp.cuda.Stream"]
    assert model_problems("cp.asarray", {"blocking"}, cupy_roots, fake) == [
        "CuPy has cp.asarray(a, dtype=None, order=None, *, copy=None,"
        " blocking=False), the model has cp.asarray(a, dtype=None,"
        " order=None, *, copy=None): the model lacks blocking",
        "the book passes blocking=, but the model's cp.asarray(a, dtype=None,"
        " order=None, *, copy=None) has no such parameter"]
    # CuPy's Device signature is unreadable: the table supplies it
    assert model_problems("cp.cuda.Device", set(), cupy_roots, fake) == [
        "CuPy's is a class, the model's is a callable, not a class",
        "CuPy has cp.cuda.Device(device=None), the model has"
        " cp.cuda.Device(device): device is optional in CuPy, not in the"
        " model"]
    assert model_problems("cp.cuda.memory.OutOfMemoryError", set(),
                          cupy_roots, fake) == [
        "CuPy's is a subclass of MemoryError; the model's is not"]


def test_a_made_up_nvml_chain_is_reported_missing(cupy_roots, model_roots):
    assert cupy_problems("nvml.nvmlNotAThing", set(), cupy_roots) == [
        "pynvml (nvidia-ml-py) has no nvml.nvmlNotAThing"]
    assert model_problems("nvml.nvmlNotAThing", set(), cupy_roots,
                          model_roots) == [
        "the model has no nvml.nvmlNotAThing"]


def _stand_in_names():
    import src.nvmlmodel as stand_in
    return sorted(set(stand_in.__all__) - {"CONTEXT_BYTES"})


@pytest.mark.parametrize("name", _stand_in_names())
def test_nvml_stand_in_matches_pynvml(name, cupy_roots, model_roots):
    """Every public name of the stand-in, used by the book or not, is
    pynvml's, with pynvml's parameters."""
    chain = f"nvml.{name}"
    problems = (cupy_problems(chain, set(), cupy_roots)
                + model_problems(chain, set(), cupy_roots, model_roots))
    assert not problems, report(chain, problems, BOOK_WHERE)
