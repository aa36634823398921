"""The book's kernels: CUDA that compiles, twins that compute the same thing.

Three layers. NVRTC compiles every kernel's CUDA (no GPU needed), so the
source shown in the lessons cannot rot. Each NumPy twin is checked against
numbers worked out by hand. Launches through ``cp`` (CuPy on a GPU, the CPU
device model elsewhere) are checked to give the twin's result, to run
asynchronously on the current stream, and to take their output from the pool.
"""
import statistics
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nvrtc
from src import BACKEND, cp, kernels, twins
from src.memory import MemoryMonitor

ARCHS = ["compute_75", "compute_90"]
needs_nvrtc = pytest.mark.skipif(
    nvrtc.library_path() is None,
    reason=nvrtc.MISSING)


def f32(*values):
    return np.array(values, dtype=np.float32)


# --- NVRTC: every kernel's CUDA compiles ------------------------------------

@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(kernels.SPECS))
def test_kernel_source_compiles_with_nvrtc(name, arch):
    ptx = nvrtc.compile_ptx(nvrtc.wrap(kernels.SPECS[name]), arch,
                            f"{name}.cu")
    assert f".entry {name}(" in ptx


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(kernels.SPECS))
def test_kernel_assembles_to_machine_code_for_an_h100(name):
    # PTX is not checked by ptxas: a mistake in inline asm (the stamps'
    # %globaltimer) would first fail when the driver loads it on a GPU.
    cubin = nvrtc.compile_cubin(nvrtc.wrap(kernels.SPECS[name]), "sm_90",
                                f"{name}.cu")
    assert cubin[:4] == b"\x7fELF"


@needs_nvrtc
def test_a_bad_inline_asm_fails_in_ptxas_not_in_ptx():
    bad = (r'extern "C" __global__ void f(unsigned long long* s) {'
           r'unsigned int t; asm volatile("mov.u32 %0, %%globaltimer;"'
           r' : "=r"(t)); s[0] = t; }')
    assert ".entry f(" in nvrtc.compile_ptx(bad, "compute_90")
    with pytest.raises(nvrtc.CompileError, match="mismatch for instruction"):
        nvrtc.compile_cubin(bad, "sm_90")


@needs_nvrtc
def test_reduction_compiles_for_float64_too():
    ptx = nvrtc.compile_ptx(
        nvrtc.wrap(kernels.SPECS["harmonic_energy"], template="double"),
        "compute_75")
    assert ".entry harmonic_energy(" in ptx


@needs_nvrtc
def test_broken_source_fails_to_compile_with_the_nvrtc_log():
    with pytest.raises(nvrtc.CompileError) as err:
        nvrtc.compile_ptx('extern "C" __global__ void f(float* a) '
                          '{ a[0] = no_such_name; }', "compute_75", "bad.cu")
    assert 'identifier "no_such_name" is undefined' in str(err.value)


@needs_nvrtc
def test_broken_elementwise_body_fails_inside_the_wrapper():
    spec = kernels.Elementwise("T x", "T y", "y = x.real_part", "broken")
    with pytest.raises(nvrtc.CompileError, match="expression must have"):
        nvrtc.compile_ptx(nvrtc.wrap(spec), "compute_75")


def test_nvrtc_is_found_in_cuda_13s_wheel_as_in_cuda_12s(tmp_path):
    """CUDA 12's wheel (here and in CI) and CUDA 13's (a CUDA 13 image,
    such as the lent H200's) put NVRTC in different folders."""
    cu12, cu13, none = (tmp_path / d for d in ("cu12", "cu13", "none"))
    for site, name in ((cu12, nvrtc.WHEEL_LIBRARIES[1]),
                       (cu13, nvrtc.WHEEL_LIBRARIES[0])):
        (site / name).parent.mkdir(parents=True)
        (site / name).write_bytes(b"")
    assert nvrtc.wheel_library([none, cu12]) == \
        cu12 / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
    assert nvrtc.wheel_library([none, cu13]) == \
        cu13 / "nvidia/cu13/lib/libnvrtc.so.13"
    assert nvrtc.wheel_library([none]) is None


# --- every kernel has a spec, a source text and a twin ----------------------

def test_every_kernel_in_the_module_has_a_spec_and_a_twin():
    kinds = (cp.ElementwiseKernel, cp.ReductionKernel, cp.RawKernel)
    found = {k.name for k in vars(kernels).values() if isinstance(k, kinds)}
    assert found == set(kernels.SPECS)
    for name in found:
        assert callable(twins.lookup(name))


def test_source_shows_the_cuda_text():
    assert kernels.source(kernels.double_it).endswith("\ny = x + x")
    assert kernels.source("overlap_kernel").startswith(
        'extern "C" __global__ void overlap_kernel(float* a, int offset')
    energy = kernels.source(kernels.harmonic_energy)
    assert "accumulates in double" in energy
    assert "stage 2: cp.sum(partials)" in energy
    assert kernels.source("harmonic_energy") in energy


# --- twins against numbers worked out by hand -------------------------------

def test_double_it_twin_writes_x_plus_x():
    y = np.zeros(3, np.float32)
    twins.lookup("double_it")(f32(1, 2.5, -3), y)
    np.testing.assert_array_equal(y, f32(2, 5, -6))


def test_saxpy_twin_writes_a_x_plus_y_in_float32():
    z = np.zeros(3, np.float32)
    twins.lookup("saxpy")(np.float32(2), f32(1, 2, 3), f32(10, 20, 30), z)
    np.testing.assert_array_equal(z, f32(12, 24, 36))


def test_harmonic_energy_twin_sums_half_k_squared_distance():
    # x - mu = -1.5, -0.5, 0.5, 1.5; squares 2.25, 0.25, 0.25, 2.25; k/2 = 1
    energy = twins.lookup("harmonic_energy")(f32(1, 2, 3, 4), 2.0, 2.5)
    assert energy == 5.0 and energy.dtype == np.float64   # float64 y


def test_harmonic_energy_twin_reduces_along_an_axis():
    x = f32(1, 2, 3, 4).reshape(2, 2)
    twin = twins.lookup("harmonic_energy")
    np.testing.assert_array_equal(twin(x, 2.0, 2.5, axis=1), [2.5, 2.5])
    assert twin(x, 2.0, 2.5, axis=0, keepdims=True).shape == (1, 2)


def test_harmonic_energy_twin_accumulates_in_float64():
    # terms 2**24, 1, 1: a float32 running sum stays at 2**24 (16777217 is
    # not a float32); accumulating in double gives 16777218, a float32.
    x = f32(4096, 1, 1)
    assert np.float32(2**24) + np.float32(1) + np.float32(1) == 2**24
    assert twins.lookup("harmonic_energy")(x, 2.0, 0.0) == 16777218.0


def test_overlap_twin_adds_one_to_the_chunk_only():
    # sqrt(sin^2 + cos^2) is 1 within 2**-23, and a + 1 rounds to exactly
    # a + 1 for a >= 2, so the chunk gains exactly 1.
    a = f32(10, 20, 30, 40, 50, 60)
    twins.lookup("overlap_kernel")((1,), (4,), (a, np.int32(2), np.int32(3),
                                                kernels.NO_STAMPS))
    np.testing.assert_array_equal(a, f32(10, 20, 31, 41, 51, 60))


def test_overlap_twin_covers_only_the_launched_threads():
    a = f32(10, 20, 30, 40, 50, 60)
    twins.lookup("overlap_kernel")((1,), (2,), (a, np.int32(1), np.int32(5),
                                                kernels.NO_STAMPS))
    np.testing.assert_array_equal(a, f32(10, 21, 31, 40, 50, 60))


def test_overlap_twin_computes_in_float32_like_the_kernel():
    # NVIDIA's demo reports a max error |a - 1| of 1.19e-7, float32 rounding;
    # in float64 every element would round back to exactly 1.
    a = np.zeros(4096, np.float32)
    twins.lookup("overlap_kernel")((16,), (256,),
                                   (a, np.int32(0), np.int32(4096),
                                    kernels.NO_STAMPS))
    error = np.abs(a - 1).max()
    assert a.dtype == np.float32 and 0 < error <= 2**-23


def fake_clock(*ticks):
    """A device clock for the twins that returns ``ticks`` in turn."""
    it = iter(ticks)
    return lambda: next(it)


def test_overlap_twin_folds_its_start_and_end_into_the_stamps():
    stamps = np.array([kernels.NEVER, 0], np.uint64)
    a = f32(0, 0, 0, 0)
    try:
        old = twins.set_globaltimer(fake_clock(500, 900, 300, 700))
        for _ in range(2):                 # starts 500, 300; ends 900, 700
            twins.lookup("overlap_kernel")((1,), (4,), (
                a, np.int32(0), np.int32(4), stamps))
    finally:
        twins.set_globaltimer(old)
    assert stamps.tolist() == [300, 900]   # first start, last end


def test_stamp_twin_writes_the_clock_into_both_stamps():
    stamps = np.zeros(2, np.uint64)
    try:
        old = twins.set_globaltimer(fake_clock(1000, 1234))
        twins.lookup("stamp_kernel")((1,), (1,), (stamps, np.uint64(234)))
    finally:
        twins.set_globaltimer(old)
    assert stamps.tolist() == [1234, 1234]     # the clock when it ends
    assert twins.globaltimer_ns() > 0      # the previous clock is back


def test_fused_loop_twin_runs_n_steps():
    out = np.zeros(3, np.float32)
    twins.lookup("double_n")(f32(1, -2, 0.5), np.int32(3), out)
    np.testing.assert_array_equal(out, f32(8, -16, 4))


def test_fused_loop_twin_with_zero_or_negative_n_copies_x():
    for n in (0, -4):
        out = np.zeros(2, np.float32)
        twins.lookup("double_n")(f32(1, 7), np.int32(n), out)
        np.testing.assert_array_equal(out, f32(1, 7))


def test_fused_loop_twin_with_a_per_element_n():
    out = np.zeros(3, np.float32)
    n = np.array([0, 1, 2], np.int32)
    twins.lookup("double_n")(f32(1, 1, 1), n, out)
    np.testing.assert_array_equal(out, f32(1, 2, 4))


def test_fused_loop_jvp_twin_carries_the_tangent():
    # LESSONS: f(x) = x + x, N = 3, A = ones: result 8, gradient 8.
    x_n, dx_n = np.zeros(3, np.float32), np.zeros(3, np.float32)
    twins.lookup("double_n_jvp")(f32(1, 1, 1), f32(1, 0, 2), np.int32(3),
                                 x_n, dx_n)
    np.testing.assert_array_equal(x_n, f32(8, 8, 8))
    np.testing.assert_array_equal(dx_n, f32(8, 0, 16))


@settings(max_examples=50, deadline=None, database=None)
@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=1, max_size=8),
       st.integers(0, 20))
def test_fused_loop_twin_equals_x_times_two_to_the_n(values, n):
    x = np.array(values, np.float32)
    out = np.empty_like(x)
    twins.lookup("double_n")(x, np.int32(n), out)
    np.testing.assert_array_equal(out, x * np.float32(2**n))


# --- launches through cp: the twin's result, asynchronous, from the pool ----

SLEEP = cp.RawKernel(r'''
extern "C" __global__ void test_sleep(long long ns)
{
    long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
''', "test_sleep")


@twins.register("test_sleep")
def _sleep_twin(grid, block, args, shared_mem=0):
    time.sleep(int(args[0]) / 1e9)


def sleep_on_current_stream(seconds):
    """Queue a kernel that keeps the stream busy for ``seconds``."""
    SLEEP((1,), (1,), (np.int64(seconds * 1e9),))


@needs_nvrtc
def test_sleep_kernel_compiles_with_nvrtc():
    assert ".entry test_sleep(" in nvrtc.compile_ptx(SLEEP.code, "compute_75")
    assert nvrtc.compile_cubin(SLEEP.code, "sm_90")[:4] == b"\x7fELF"


@pytest.mark.timeout(30)
def test_kernel_launch_returns_at_once_and_is_ready_after_synchronize():
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x = cp.asarray(f32(1, 2.5, -3))
        # Warm up: the first launch of a kernel compiles it and loads its
        # module, and with CUDA's lazy loading (the default since CUDA 12.2)
        # loading a module may synchronize the context, so a first launch
        # queued behind the sleep would wait for it (0.5 s on an H100).
        # Launch both kernels once and wait, then measure a warm launch.
        sleep_on_current_stream(0)
        kernels.double_it(x)
        stream.synchronize()
        sleep_on_current_stream(0.5)
        start = time.perf_counter()
        y = kernels.double_it(x)
        launch = time.perf_counter() - start
        done = stream.record()
    assert launch < 0.25 and not done.done    # queued behind the sleep
    stream.synchronize()
    assert done.done
    np.testing.assert_array_equal(cp.asnumpy(y), f32(2, 5, -6))


@pytest.mark.timeout(30)
def test_elementwise_kernel_takes_its_output_from_the_pool():
    pool = cp.get_default_memory_pool()
    x = cp.ones(1000, dtype=cp.float32)
    before = pool.used_bytes()
    y = kernels.double_it(x)
    assert pool.used_bytes() - before == 4096   # 4000 B in 512 B blocks
    assert y.dtype == cp.float32 and y.shape == (1000,)


@pytest.mark.timeout(30)
def test_every_elementwise_kernel_gives_its_twins_result():
    x, dx = cp.asarray(f32(1, -2, 0.5)), cp.asarray(f32(1, 0, 2))
    np.testing.assert_array_equal(
        cp.asnumpy(kernels.saxpy(np.float32(2), x, dx)), f32(3, -4, 3))
    np.testing.assert_array_equal(cp.asnumpy(kernels.double_n(x, 3)),
                                  f32(8, -16, 4))
    x_n, dx_n = kernels.double_n_jvp(x, dx, 3)
    np.testing.assert_array_equal(cp.asnumpy(x_n), f32(8, -16, 4))
    np.testing.assert_array_equal(cp.asnumpy(dx_n), f32(8, 0, 16))


@pytest.mark.timeout(30)
def test_reduction_kernel_gives_its_twins_result():
    x = cp.asarray(f32(1, 2, 3, 4))
    energy = kernels.harmonic_energy(x, 2.0, 2.5)
    assert energy.shape == () and energy.dtype == cp.float32
    assert float(energy) == 5.0
    rows = kernels.harmonic_energy(x.reshape(2, 2), 2.0, 2.5, axis=1)
    np.testing.assert_array_equal(cp.asnumpy(rows), f32(2.5, 2.5))


def energy_reference(x, k, mu):
    """The energy as the kernel defines it: terms in float32, the sum in
    float64, rounded once to float32."""
    d = x - np.float32(mu)
    terms = np.float32(k) * d * d / np.float32(2)
    return np.float32(np.sum(terms, dtype=np.float64))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("n", [0, 1, 4095, 8191, 8192, 8193, 100_003,
                               (1 << 20) + 17])
def test_harmonic_energy_equals_the_double_sum_of_float32_terms(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32)
    energy = kernels.harmonic_energy(cp.asarray(x), 1.0, 0.5)
    assert energy.shape == () and energy.dtype == cp.float32
    assert float(energy) == pytest.approx(float(energy_reference(x, 1, .5)),
                                          rel=1e-6, abs=0)


def test_harmonic_energy_cuts_large_arrays_into_rows_small_ones_not():
    """Rows: a power of two (CuPy's indexer then shifts instead of dividing
    for every element), the largest up to rows_per_sm per multiprocessor,
    and at least min_row values each."""
    energy = kernels.harmonic_energy
    assert energy.rows(cp.zeros(2 * energy.min_row - 1, cp.float32)) == 0
    assert energy.rows(cp.zeros(2 * energy.min_row, cp.float32)) == 2
    assert energy.rows(cp.zeros(7 * energy.min_row, cp.float32)) == 4
    sms = cp.cuda.runtime.getDeviceProperties(
        cp.cuda.runtime.getDevice())["multiProcessorCount"]
    most = energy.rows_per_sm * sms
    fill = 1 << (most.bit_length() - 1)         # 2048 of 2112 on 132 SMs
    assert fill <= most < 2 * fill
    big = cp.zeros(energy.min_row * most * 3, cp.float32)
    assert energy.rows(big) == fill
    assert energy.rows(big[::2]) == 0          # not contiguous: one stage
    assert energy.threads(big) == 512 * fill
    assert energy.threads(big[:10]) == 512


def test_harmonic_energy_reduces_a_tail_only_when_rows_leave_one():
    real = kernels.harmonic_energy.kernel
    shapes, partials = [], []

    def counting(x, k, mu, **kw):
        shapes.append(x.shape)
        result = real(x, k, mu, **kw)
        partials.append(result.shape)
        return result
    counting.name = real.name
    energy = type(kernels.harmonic_energy)(counting)
    n = 2 * energy.min_row                      # two whole rows, no tail
    assert float(energy(cp.ones(n, cp.float32), 2.0, 0.0)) == n
    assert shapes == [(2, energy.min_row)]
    assert partials == [(2,)]                   # one partial a row
    shapes.clear()
    assert float(energy(cp.ones(n + 3, cp.float32), 2.0, 0.0)) == n + 3
    assert shapes == [(2, energy.min_row + 1), (1,)]


def test_harmonic_energy_twin_holds_a_bounded_block_of_terms():
    """The twin computes its terms a block at a time (as the GPU does in
    registers), for the whole array and for rows alike: its host memory
    does not grow with x."""
    import tracemalloc
    twin = twins.lookup("harmonic_energy")
    x = np.ones(1 << 24, np.float32)                     # 64 MiB
    for args in [dict(), dict(axis=1)]:
        arg = x if not args else x.reshape(1 << 10, 1 << 14)
        tracemalloc.start()
        try:
            twin(arg, np.float32(2), np.float32(0), **args)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 16 * 2**20, (args, peak)


@pytest.mark.timeout(60)
def test_harmonic_energy_of_a_2d_or_strided_array_is_its_whole_energy():
    x = np.random.default_rng(1).random((64, 300), dtype=np.float32)
    want = float(energy_reference(x, 2.0, 0.25))
    for arr in (cp.asarray(x), cp.asarray(x.T.copy()).T):
        got = kernels.harmonic_energy(arr, 2.0, 0.25)
        assert float(got) == pytest.approx(want, rel=1e-6)
    kept = kernels.harmonic_energy(cp.asarray(x), 2.0, 0.25, keepdims=True)
    assert kept.shape == (1, 1)


@pytest.mark.timeout(60)
def test_harmonic_energy_writes_out_on_the_given_stream():
    x = np.random.default_rng(2).random(50_000, dtype=np.float32)
    dev = cp.asarray(x)
    partials = cp.zeros(3, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    stream.wait_event(cp.cuda.get_current_stream().record())
    with stream:                          # warm up every kernel (see above)
        sleep_on_current_stream(0)
        kernels.harmonic_energy(dev, 1.0, 0.5, out=partials[1])
        partials[1] = 0
    stream.synchronize()
    with stream:
        sleep_on_current_stream(0.3)      # the energy queues behind this
    got = kernels.harmonic_energy(dev, 1.0, 0.5, out=partials[1],
                                  stream=stream)
    done = stream.record()
    assert got.shape == () and got.dtype == cp.float32
    assert not done.done                  # queued on ``stream``, not run
    stream.synchronize()
    host = cp.asnumpy(partials)
    assert host[0] == host[2] == 0
    assert host[1] == pytest.approx(float(energy_reference(x, 1, .5)),
                                    rel=1e-6)
    with pytest.raises(ValueError, match="Out shape"):
        kernels.harmonic_energy(dev, 1.0, 0.5, out=partials)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("n", [1 << 12, 1 << 16, (1 << 20) + 3, 1 << 22,
                               (1 << 26) + 1000])
def test_harmonic_energy_needs_at_most_1_mib_beyond_its_input(n):
    x = cp.ones(n, cp.float32)
    cp.cuda.Device().synchronize()
    with MemoryMonitor(timeline=False) as mon:
        energy = kernels.harmonic_energy(x, 2.0, 0.5)
        cp.cuda.Device().synchronize()
    extra = mon.peak_allocated - mon.start_allocated
    assert extra <= 2**20, f"{extra:,d} bytes beyond the input"
    assert float(energy) == n * 0.25


def gpu_ms(fn, repeats=15):
    """Median milliseconds of ``fn()`` between two events, after a warm-up."""
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


@pytest.mark.skipif(BACKEND != "gpu", reason="a speed claim about real GPUs: "
                    "the CPU device model's timings say nothing about it")
@pytest.mark.timeout(120)
def test_harmonic_energy_is_no_slower_than_the_one_liner_on_a_gpu():
    # CuPy's ReductionKernel gives one output one block: a one-stage
    # whole-array energy took 50 ms on an H100 against 1.06 ms here.
    y = cp.random.random(1 << 26, dtype=cp.float32)
    fused = gpu_ms(lambda: kernels.harmonic_energy(y, 1.0, 0.5))
    one_liner = gpu_ms(lambda: cp.sum(0.5 * (y - 0.5) ** 2))
    assert fused <= one_liner, (fused, one_liner)
    assert float(kernels.harmonic_energy(y, 1.0, 0.5)) == pytest.approx(
        float(cp.sum(0.5 * (y - 0.5) ** 2)), rel=1e-5)


@pytest.mark.timeout(30)
def test_overlap_in_chunks_on_two_streams_equals_one_launch():
    host = np.arange(4096, dtype=np.float32) + 2
    whole = host.copy()
    twins.lookup("overlap_kernel")((16,), (256,),
                                   (whole, np.int32(0), np.int32(4096),
                                    kernels.NO_STAMPS))
    a = cp.asarray(host)
    # Blocking streams wait for that copy on the legacy null stream;
    # non_blocking ones would race it and could overwrite a chunk's result.
    streams = [cp.cuda.Stream() for _ in range(2)]
    for i in range(4):
        kernels.launch_overlap(a, i * 1024, 1024, stream=streams[i % 2])
    for s in streams:
        s.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(a), whole)
    np.testing.assert_array_equal(whole, host + 1)


@pytest.mark.timeout(30)
def test_overlap_launch_touches_only_its_chunk():
    a = cp.asarray(f32(10, 20, 30, 40, 50, 60))
    kernels.launch_overlap(a, 2, 3)
    np.testing.assert_array_equal(cp.asnumpy(a), f32(10, 20, 31, 41, 51, 60))


@pytest.mark.timeout(30)
def test_overlap_launch_stamps_its_first_start_and_last_end():
    a = cp.zeros(1 << 16, cp.float32)
    stamps = cp.asarray(np.array([kernels.NEVER, 0], np.uint64))
    before = cp.zeros(2, cp.uint64)
    kernels.stamp(before)
    kernels.launch_overlap(a, 0, a.size, stamps=stamps)
    after = cp.zeros(2, cp.uint64)
    kernels.stamp(after)
    t0, (first, last), t1 = (cp.asnumpy(x).astype(np.int64) for x in
                             (before, stamps, after))
    assert t0[0] == t0[1] and t1[0] == t1[1]
    assert t0[0] <= first <= last <= t1[0]   # in queue order, one clock
    assert float(a.max()) == pytest.approx(1, abs=1e-6)


def test_kernels_stamp_only_inside_a_stamping_block():
    assert kernels.active_stamps() is None
    pair = cp.asarray(np.array([kernels.NEVER, 0], np.uint64))
    with kernels.stamping(lambda: pair):
        assert kernels.active_stamps() is pair
        kernels.launch_overlap(cp.zeros(256, cp.float32), 0, 256)
    assert kernels.active_stamps() is None
    first, last = cp.asnumpy(pair).tolist()
    assert first != kernels.NEVER and first <= last


@pytest.mark.parametrize("bad", [
    lambda: cp.zeros(2, cp.int64), lambda: cp.zeros(1, cp.uint64),
    lambda: np.zeros(2, np.uint64), lambda: cp.zeros(4, cp.uint64)[::2]])
def test_stamps_must_be_two_contiguous_uint64_on_the_device(bad):
    with pytest.raises(TypeError, match="uint64 device array"):
        kernels.launch_overlap(cp.zeros(8, cp.float32), 0, 8, stamps=bad())


# --- bad input is a clear error at the call ---------------------------------

@pytest.mark.parametrize("make, error, message", [
    (lambda: cp.zeros(8, cp.float64), TypeError, "float32 array, got float64"),
    (lambda: np.zeros(8, np.float32), TypeError, "got numpy.ndarray"),
    (lambda: cp.zeros(16, cp.float32)[::2], ValueError, "C-contiguous"),
    (lambda: cp.zeros((4, 4), cp.float32).T, ValueError, "C-contiguous"),
])
def test_launch_overlap_rejects_what_the_raw_kernel_cannot_check(
        make, error, message):
    with pytest.raises(error, match=message):
        kernels.launch_overlap(make(), 0, 4)


@pytest.mark.parametrize("offset, n", [(6, 3), (0, 9), (-1, 2), (2, -1)])
def test_launch_overlap_rejects_a_chunk_outside_the_array(offset, n):
    with pytest.raises(ValueError, match=r"is not inside the array of 8"):
        kernels.launch_overlap(cp.zeros(8, cp.float32), offset, n)


def test_overlap_grid_keeps_every_launched_threads_index_in_an_int():
    # The kernel's `int i` of the last thread is offset + grid * block - 1:
    # a chunk that ends below 2**31 but not on a whole block would wrap that
    # thread's i to a negative index that passes `i < offset + n`.
    top = np.iinfo(np.int32).max                       # 2**31 - 1
    assert kernels.overlap_grid(top - 256, 256, 256) == 1   # last i: top-1
    assert kernels.overlap_grid(0, 2**28, 256) == 2**20     # the lessons'
    assert kernels.overlap_grid(0, 513) == 3     # launch_overlap's 256
    for offset, n in [(top - 200, 100), (top - 255, 1), (top, 1),
                      (2**30, 2**30)]:
        with pytest.raises(ValueError, match="below 2\\*\\*31"):
            kernels.overlap_grid(offset, n, 256)


@pytest.mark.skipif(BACKEND != "gpu", reason="needs an 8 GiB float32 array "
                    "(the CPU device model's memory is smaller)")
def test_launch_overlap_refuses_a_chunk_whose_last_block_overflows_an_int():
    a = cp.empty(2**31 - 100, cp.float32)      # 8 GiB, never written
    try:
        with pytest.raises(ValueError, match="below 2\\*\\*31"):
            kernels.launch_overlap(a, 2**31 - 200, 100)
    finally:
        del a
        cp.get_default_memory_pool().free_all_blocks()


def test_typed_elementwise_kernel_rejects_another_dtype_like_cupy():
    x = cp.zeros(3, cp.float64)
    with pytest.raises(TypeError, match="Type is mismatched"):
        kernels.saxpy(np.float32(2), x, x)
