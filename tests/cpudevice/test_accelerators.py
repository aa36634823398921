"""CuPy's accelerators on the CPU device model: ``CUPY_ACCELERATORS`` is
read as CuPy reads it, and a reduction that CuPy sends to CUB takes CUB's
workspace from the pool, as CuPy does (cupy/cuda/cub.pyx), so the pool's
numbers show it; with CUB off there is none."""
import os

import numpy
import pytest

import src.cpudevice as cp
import subproc
from modelkit import cub_workspace, parse_accelerators, use_accelerators

pool = cp.get_default_memory_pool()


class Mallocs(cp.cuda.MemoryHook):
    """The sizes of the blocks the pool hands out, in order."""
    name = "Mallocs"

    def __init__(self):
        self.sizes = []

    def malloc_postprocess(self, **kw):
        self.sizes.append(kw["mem_size"])


@pytest.fixture(params=[["cub"], []], ids=["cub", "no-accelerator"])
def accelerators(request, monkeypatch):
    """Each test runs with CUB on (CuPy's default) and off
    (``CUPY_ACCELERATORS=""``)."""
    use_accelerators(monkeypatch, request.param)
    cp.cuda.runtime.deviceSynchronize()
    pool.free_all_blocks()
    yield request.param
    cp.cuda.runtime.deviceSynchronize()
    pool.free_all_blocks()


def mallocs(call):
    with Mallocs() as hook:
        result = call()
    result.get()
    return hook.sizes


def test_a_small_full_sum_takes_one_more_block_for_cubs_workspace(
        accelerators):
    p = cp.ones(2048, dtype=cp.float64)     # one tile of CUB's policy
    sizes = mallocs(lambda: p.sum())
    # the 0-d result, then CUB's 1-byte workspace in a 512-byte block
    assert sizes == ([512, 512] if accelerators else [512])


def test_a_large_full_sum_takes_a_block_per_grid_block_workspace(
        accelerators):
    x = cp.ones(1 << 20, dtype=cp.float32)
    props = cp.cuda.runtime.getDeviceProperties(0)
    blocks = (props["maxThreadsPerMultiProcessor"] // 256
              * props["multiProcessorCount"] * 5)
    workspace = -(-blocks * 4 // 256) * 256 + 255
    sizes = mallocs(lambda: cp.sum(x))
    assert sizes == ([512, -(-workspace // 512) * 512] if accelerators
                     else [512])


def test_the_workspace_is_freed_and_the_result_is_right(accelerators):
    x = cp.arange(4096, dtype=cp.float64)
    before = pool.used_bytes()
    total = x.sum()
    assert pool.used_bytes() - before == 512        # the result alone
    assert float(total) == 4095 * 4096 / 2


@pytest.mark.parametrize("call, cub", [
    (lambda x: x.sum(axis=1), True),        # contiguous axis: segmented
    (lambda x: x.sum(axis=0), False),       # CuPy's own reduction kernel
    (lambda x: x.max(), True),
    (lambda x: x.argmin(), True),
    (lambda x: x.sum(dtype=cp.float64), False),     # a cast: not CUB's
    (lambda x: x[:, ::2].sum(), False),     # not contiguous
    (lambda x: x.mean(), True),             # CUB's sum, then a divide
    (lambda x: x.astype(cp.int64).mean(), False),   # a sum in float64
])
def test_which_reductions_take_the_workspace(monkeypatch, call, cub):
    x = cp.ones((64, 64), dtype=cp.float32)
    counts = []
    for names in (["cub"], []):
        use_accelerators(monkeypatch, names)
        counts.append(len(mallocs(lambda: call(x))))
    assert counts[0] - counts[1] == (1 if cub else 0)


def test_an_empty_max_names_cubs_operation_only_with_cub(accelerators):
    with pytest.raises(ValueError, match="CUPY_CUB_MAX" if accelerators
                       else "cupy_max"):
        cp.max(cp.empty(0, dtype=cp.float32))


@pytest.mark.parametrize("value, expected", [
    (None, "['cub']"), ("", "[]"), ("cub,cutensor", "['cub', 'cutensor']")])
def test_cupy_accelerators_is_read_as_cupy_reads_it(value, expected):
    code = "from modelkit import accelerators; print(accelerators())"
    env = {} if value is None else {"CUPY_ACCELERATORS": value}
    if value is None and "CUPY_ACCELERATORS" in os.environ:
        pytest.skip("CUPY_ACCELERATORS is set for this run")
    done = subproc.run_code(code, env=env, backend="cpu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_an_unknown_accelerator_fails_as_cupys_import_does():
    with pytest.raises(ValueError, match="Unknown accelerator: bogus"):
        parse_accelerators("cub,bogus")


def test_the_workspace_follows_cubs_tile_and_dtypes():
    ws = cub_workspace
    assert ws(numpy.sum, cp.ones(2048, cp.float64), None, None) == 1
    assert ws(numpy.sum, cp.ones(2049, cp.float64), None, None) > 1
    assert ws(numpy.sum, cp.ones(4096, cp.float32), None, None) == 1
    assert ws(numpy.sum, cp.ones(8, cp.int32), None, None) is None
    assert ws(numpy.sum, cp.ones(8, cp.int32), None, cp.int32) == 1
    assert ws(numpy.sum, cp.ones(8, cp.int32), None, cp.int64) is None
    assert ws(numpy.any, cp.ones(8, cp.bool_), None, None) is None
    assert ws(numpy.argmax, cp.ones((4, 4)), 1, None) is None
