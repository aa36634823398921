"""benchmarks/energy_ceiling.py: the hand-written energy kernel that
`harmonic_energy` is benchmarked against compiles to 16-byte loads, and it
and its twin compute what `harmonic_energy` computes."""
import re

import numpy as np
import pytest

import nvrtc
import scripts
from src import BACKEND, cp
from src.kernels import harmonic_energy

ceiling = scripts.load("benchmarks/energy_ceiling.py")


@pytest.mark.skipif(nvrtc.library_path() is None,
                    reason=nvrtc.MISSING)
@pytest.mark.parametrize("arch", ["compute_75", "compute_90"])
def test_it_compiles_to_16_byte_loads_and_no_division(arch):
    ptx = nvrtc.compile_ptx(ceiling.CODE, arch, "energy_partials.cu")
    assert ".entry energy_partials(" in ptx
    loads = re.findall(r"ld\.global\.nc\.v4\.f32", ptx)
    assert len(loads) >= 2, "the grid-stride loop is not unrolled"
    assert "div.rn.f32" not in ptx          # / 2 is a multiply by 0.5


@pytest.mark.skipif(nvrtc.library_path() is None,
                    reason=nvrtc.MISSING)
def test_it_assembles_to_machine_code_for_an_h100():
    cubin = nvrtc.compile_cubin(ceiling.CODE, "sm_90", "energy_partials.cu")
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("n", [1, 3, 4, 4097, (1 << 20) + 3])
def test_it_equals_harmonic_energy(n):
    x = cp.random.default_rng(n).random(n, dtype=cp.float32)
    raw = ceiling.raw_energy(x, 1.5, 0.25)
    assert raw.shape == () and raw.dtype == cp.float32
    assert float(raw) == pytest.approx(
        float(harmonic_energy(x, 1.5, 0.25)), rel=1e-6)


@pytest.mark.skipif(BACKEND != "cpu", reason="checks the NumPy twin")
def test_each_block_gets_the_values_its_threads_load():
    """The twin's partial sums, against the kernel's loops written out in
    Python: thread t of the launch takes float4 load i for i = t, t +
    stride, ...; threads 0-2 the three values past the last whole load."""
    grid, block, n = (3,), (32,), 4 * 500 + 3
    x = np.random.default_rng(7).random(n, dtype=np.float32)
    k, mu = np.float32(2.0), np.float32(0.5)
    partials = np.zeros(grid[0])
    ceiling._energy_partials_twin(grid, block,
                                  (x, np.int64(n), k, mu, partials))

    def term(v):
        d = v - mu
        return float(k * d * d / np.float32(2))
    stride = grid[0] * block[0]
    expected = np.zeros(grid[0])
    for t in range(stride):
        for i in range(t, n // 4, stride):
            expected[t // block[0]] += sum(term(v) for v in x[4 * i:4 * i + 4])
        for i in range(4 * (n // 4) + t, n, stride):
            expected[t // block[0]] += term(x[i])
    np.testing.assert_allclose(partials, expected, rtol=1e-12)


def test_it_refuses_what_a_float4_load_cannot_read():
    x = cp.zeros(64, dtype=cp.float32)
    with pytest.raises(TypeError, match="float32 device array"):
        ceiling.raw_energy(x.astype(cp.float64), 1.0, 0.5)
    with pytest.raises(TypeError, match="float32 device array"):
        ceiling.raw_energy(np.zeros(64, np.float32), 1.0, 0.5)
    with pytest.raises(ValueError, match="16-byte aligned"):
        ceiling.raw_energy(x[1:], 1.0, 0.5)
    with pytest.raises(ValueError, match="C-contiguous"):
        ceiling.raw_energy(x[::2], 1.0, 0.5)
