"""src.loops: fori_loop's three strategies agree, the carry rule holds, the
graph strategy orders its streams, and both derivative modes match finite
differences."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import modelkit
from src import BACKEND, cp
from src.loops import (DOUBLE, STRATEGIES, Body, fori_loop, grad, jvp,
                       seconds, vjp)
from src.memory import MemoryMonitor

H = 0.1
EULER = Body(lambda i, x: x + H * cp.cos(x),
             jvp=lambda i, x, dx: dx - H * cp.sin(x) * dx,
             vjp=lambda i, x, g: g - H * cp.sin(x) * g)


def host(a):
    return cp.asnumpy(a)


def ones32(n=10):
    return cp.ones(n, dtype=cp.float32)


def randn(n, seed=0):
    return cp.asarray(np.random.default_rng(seed).standard_normal(n))


# --- MindSpore's example, every strategy ------------------------------------

@pytest.mark.parametrize("strategy", STRATEGIES)
def test_mindspore_example_gives_all_eights(strategy):
    y = fori_loop(0, 3, DOUBLE, ones32(), strategy=strategy)
    assert y.dtype == cp.float32 and y.shape == (10,)
    np.testing.assert_array_equal(host(y), np.full(10, 8, np.float32))


@pytest.mark.parametrize("checkpoint", [None, 1, 2, 3, 5])
def test_gradient_of_mindspore_example_is_all_eights(checkpoint):
    g = grad(0, 3, DOUBLE, ones32(), checkpoint=checkpoint)
    np.testing.assert_array_equal(host(g), np.full(10, 8, np.float32))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_forward_tangent_of_mindspore_example_is_all_eights(strategy):
    y, dy = jvp(0, 3, DOUBLE, ones32(), ones32(), strategy=strategy)
    np.testing.assert_array_equal(host(y), np.full(10, 8, np.float32))
    np.testing.assert_array_equal(host(dy), np.full(10, 8, np.float32))


# --- the strategies agree ---------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(lower=st.integers(-5, 5), n=st.integers(-2, 12),
       size=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_strategies_agree_bit_for_bit(lower, n, size, seed):
    x = cp.asarray(np.random.default_rng(seed).standard_normal(size)
                   .astype(np.float32))
    want = host(x) * np.float32(2.0) ** max(n, 0)
    for strategy in STRATEGIES:
        got = fori_loop(lower, lower + n, DOUBLE, x, strategy=strategy)
        np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("lower, upper", [(0, 4), (3, 7), (-2, 2), (5, 5),
                                          (5, 2)])
def test_graph_advances_the_index_like_eager(lower, upper):
    def body(i, x):
        return x * 2 + i
    x = cp.zeros(3)
    want = host(fori_loop(lower, upper, body, x))
    got = host(fori_loop(lower, upper, body, x, strategy="graph"))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("strategy", ["eager", "graph"])
def test_tuple_carry_keeps_its_structure(strategy):
    def body(i, c):
        a, b = c
        return a + b, b * 2
    a, b = fori_loop(0, 3, body, (cp.zeros(4), cp.ones(4)),
                     strategy=strategy)
    np.testing.assert_array_equal(host(a), np.full(4, 7.0))   # 1 + 2 + 4
    np.testing.assert_array_equal(host(b), np.full(4, 8.0))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_init_is_never_modified(strategy):
    x = ones32()
    body = DOUBLE if strategy == "fused" else Body(
        lambda i, x: cp.add(x, x, out=x))
    fori_loop(0, 3, body, x, strategy=strategy)
    np.testing.assert_array_equal(host(x), np.ones(10, np.float32))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_empty_loop_returns_a_copy_of_init(strategy):
    x = ones32()
    y = fori_loop(4, 4, DOUBLE, x, strategy=strategy)
    assert y is not x
    np.testing.assert_array_equal(host(y), host(x))


def test_graph_with_an_in_place_body_gives_the_pure_bodys_result():
    pure = fori_loop(0, 5, DOUBLE, ones32(), strategy="graph")
    in_place = fori_loop(0, 5, lambda i, x: cp.add(x, x, out=x), ones32(),
                         strategy="graph")
    np.testing.assert_array_equal(host(in_place), host(pure))


# --- the graph strategy on its own stream -----------------------------------

@pytest.mark.skipif(BACKEND != "cpu", reason="gates hold the model's streams")
@pytest.mark.timeout(30)
def test_graph_waits_for_init_queued_on_the_callers_stream():
    stream = cp.cuda.Stream(non_blocking=True)
    gate = modelkit.Gate().hold_stream(stream)
    with stream:
        x = cp.zeros(10, dtype=cp.float32)
        x += 1                        # queued behind the gate
        y = fori_loop(0, 3, DOUBLE, x, strategy="graph")
        gate.open()
        result = host(y)              # read on the caller's stream
    np.testing.assert_array_equal(result, np.full(10, 8, np.float32))


def test_caller_stream_sees_the_last_replay_without_a_host_wait():
    x = ones32(1000)
    y = fori_loop(0, 20, DOUBLE, x, strategy="graph")
    z = y + 0                          # queued on the caller's stream
    np.testing.assert_array_equal(host(z), np.full(1000, 2.0**20,
                                                   np.float32))


def test_graph_captures_on_a_non_blocking_stream_and_ends_the_capture():
    fori_loop(0, 2, DOUBLE, ones32(), strategy="graph")
    from src import loops
    stream = loops.capture_stream()
    assert stream.is_non_blocking and not stream.is_capturing()
    assert stream.ptr != cp.cuda.get_current_stream().ptr


def test_graph_capture_ends_when_the_body_fails():
    def bad(i, x):
        raise ZeroDivisionError("from the body")
    with pytest.raises(ZeroDivisionError, match="from the body"):
        fori_loop(0, 3, bad, ones32(), strategy="graph")
    y = fori_loop(0, 3, DOUBLE, ones32(), strategy="graph")
    np.testing.assert_array_equal(host(y), np.full(10, 8, np.float32))


def test_graph_refuses_a_body_that_reads_the_index_on_the_host():
    def branchy(i, x):
        return x * 2 if i % 2 else x
    np.testing.assert_array_equal(
        host(fori_loop(0, 4, branchy, cp.ones(3))), np.full(3, 4.0))
    with pytest.raises(RuntimeError, match="capturing"):
        fori_loop(0, 4, branchy, cp.ones(3), strategy="graph")
    y = fori_loop(0, 3, DOUBLE, ones32(), strategy="graph")
    np.testing.assert_array_equal(host(y), np.full(10, 8, np.float32))


# --- the carry rule ---------------------------------------------------------

@pytest.mark.parametrize("strategy", ["eager", "graph"])
def test_shape_change_is_a_value_error_naming_both_shapes(strategy):
    with pytest.raises(ValueError, match=r"shape of the carry from \(10,\) "
                                         r"to \(9,\)"):
        fori_loop(0, 3, lambda i, x: x[1:] + x[:-1], ones32(),
                  strategy=strategy)


@pytest.mark.parametrize("strategy", ["eager", "graph"])
def test_dtype_change_is_a_type_error_naming_both_dtypes(strategy):
    with pytest.raises(TypeError, match="from float32 to float64"):
        fori_loop(0, 3, lambda i, x: x.astype(cp.float64), ones32(),
                  strategy=strategy)


def test_dtype_change_from_the_device_index_says_how_to_cast():
    with pytest.raises(TypeError, match=r"i\.astype\(x\.dtype\)"):
        fori_loop(0, 3, lambda i, x: x + i, ones32(), strategy="graph")


def test_shape_change_at_a_later_step_names_that_step():
    def late(i, x):
        return x[:-1] if i == 2 else x + 1
    with pytest.raises(ValueError, match="at i=2"):
        fori_loop(0, 5, late, ones32())


def test_body_returning_a_host_array_is_a_type_error():
    with pytest.raises(TypeError, match="return a cp.ndarray"):
        fori_loop(0, 3, lambda i, x: np.ones(10, np.float32), ones32())


def test_tuple_carry_that_changes_structure_is_a_type_error():
    with pytest.raises(TypeError, match="same structure"):
        fori_loop(0, 3, lambda i, c: c[0], (ones32(), ones32()))


def test_fused_needs_a_body_with_a_kernel():
    with pytest.raises(TypeError, match="fused kernel"):
        fori_loop(0, 3, lambda i, x: x + x, ones32(), strategy="fused")


def test_unknown_strategy_is_a_value_error():
    with pytest.raises(ValueError, match="strategy must be one of"):
        fori_loop(0, 3, DOUBLE, ones32(), strategy="jit")


def test_init_must_be_a_device_array():
    with pytest.raises(TypeError, match="init must be a cp.ndarray"):
        fori_loop(0, 3, DOUBLE, np.ones(3))


# --- derivatives ------------------------------------------------------------

@pytest.fixture(scope="module")
def fd_case():
    """A point, a direction, loss weights, and the loss's central difference
    along the direction, for 30 Euler steps."""
    x, v, w = randn(50, 1), randn(50, 2), randn(50, 3)

    def loss(x):
        return float(cp.sum(w * fori_loop(0, 30, EULER, x)))
    eps = 1e-6
    return x, v, w, (loss(x + eps * v) - loss(x - eps * v)) / (2 * eps)


@pytest.mark.parametrize("strategy", ["eager", "graph"])
def test_forward_mode_matches_finite_differences(strategy, fd_case):
    x, v, w, fd = fd_case
    y, dy = jvp(0, 30, EULER, x, v, strategy=strategy)
    np.testing.assert_allclose(host(y), host(fori_loop(0, 30, EULER, x)))
    assert float(cp.sum(w * dy)) == pytest.approx(fd, rel=1e-7)


@pytest.mark.parametrize("checkpoint", [None, 1, 2, 4, 7, 30, 31, 100])
def test_reverse_mode_matches_finite_differences(checkpoint, fd_case):
    x, v, w, fd = fd_case
    y, g = vjp(0, 30, EULER, x, w, checkpoint=checkpoint)
    np.testing.assert_array_equal(host(y), host(fori_loop(0, 30, EULER, x)))
    assert float(cp.sum(g * v)) == pytest.approx(fd, rel=1e-7)


def test_forward_and_reverse_are_transposes():
    x, v, w = randn(64, 4), randn(64, 5), randn(64, 6)
    jv = jvp(2, 19, EULER, x, v)[1]
    jtw = vjp(2, 19, EULER, x, w, checkpoint=4)[1]
    assert float(cp.sum(w * jv)) == pytest.approx(float(cp.sum(jtw * v)),
                                                  rel=1e-12)


@pytest.mark.parametrize("checkpoint", [2, 3, 8, 20])
def test_checkpointing_gives_the_stored_gradient_bit_for_bit(checkpoint):
    x, w = randn(100, 7), randn(100, 8)
    stored = vjp(0, 20, EULER, x, w)[1]
    again = vjp(0, 20, EULER, x, w, checkpoint=checkpoint)[1]
    np.testing.assert_array_equal(host(again), host(stored))


@pytest.mark.parametrize("checkpoint, steps", [(1, 16), (4, 28), (16, 31)])
def test_checkpointing_recomputes_the_forward_steps_it_dropped(checkpoint,
                                                                steps):
    calls = []
    counted = EULER._replace(step=lambda i, x: calls.append(i) or
                             EULER.step(i, x))
    vjp(0, 16, counted, randn(8), randn(8), checkpoint=checkpoint)
    assert len(calls) == steps        # 16 + (16 - 16 / k)


def test_checkpointing_every_sqrt_n_steps_needs_less_memory():
    n, size = 64, 2**14               # 128 KiB float64 carries
    x, g = randn(size), randn(size, 1)
    vjp(0, n, EULER, x, g)            # warm the pool

    def peak(checkpoint):
        with MemoryMonitor(timeline=False) as mon:
            vjp(0, n, EULER, x, g, checkpoint=checkpoint)
        return mon.peak_allocated - mon.start_allocated
    store_all, sqrt_n = peak(None), peak(8)
    carry = x.nbytes
    assert store_all >= n * carry
    assert sqrt_n <= 24 * carry < store_all / 2


def test_reverse_mode_refuses_an_in_place_body():
    in_place = DOUBLE._replace(step=lambda i, x: cp.add(x, x, out=x))
    with pytest.raises(ValueError, match="not update x in place"):
        vjp(0, 3, in_place, ones32(), ones32())


@pytest.mark.parametrize("checkpoint", [0, -3])
def test_checkpoint_spacing_must_be_positive(checkpoint):
    with pytest.raises(ValueError, match="checkpoint must be 1 or more"):
        vjp(0, 3, DOUBLE, ones32(), ones32(), checkpoint=checkpoint)


def test_cotangent_of_another_shape_is_a_value_error():
    with pytest.raises(ValueError, match="cotangent must be an array"):
        vjp(0, 3, DOUBLE, ones32(), ones32(9))


def test_tangent_of_another_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="tangent must have the primal's "
                                        "dtype float32"):
        jvp(0, 3, DOUBLE, ones32(), cp.ones(10))


def test_derivatives_need_the_bodys_rules():
    plain = Body(lambda i, x: x + x)
    with pytest.raises(TypeError, match="jvp rule"):
        jvp(0, 3, plain, ones32(), ones32())
    with pytest.raises(TypeError, match="vjp rule"):
        vjp(0, 3, plain, ones32(), ones32())


def test_seconds_warms_up_then_keeps_the_fastest_call():
    """`seconds` calls once untimed, then ``repeat`` times, and returns
    the fewest seconds: the call least disturbed by the machine."""
    calls = []
    x = ones32(1000)

    def work():
        calls.append(1)
        return x + x

    best = seconds(work, repeat=4)
    assert len(calls) == 5
    assert 0 < best < 1
