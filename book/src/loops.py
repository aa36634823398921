"""``fori_loop`` with JAX's semantics, run three ways, and differentiated.

``fori_loop(lower, upper, body, init)`` returns ``body(upper-1, ...
body(lower, init))`` as ``jax.lax.fori_loop`` does. The carry (an array or a
tuple of arrays) keeps its shape and dtype; ``init`` is never modified. The
strategies give the same result at different costs:

* ``'eager'``: a Python loop; every operation of every step is a launch.
  ``i`` is a Python int.
* ``'graph'``: one step is captured once into a CUDA graph on a
  non-blocking stream, then replayed ``upper - lower`` times with
  ``Graph.launch``. A graph replays the buffers it was recorded with, so the
  carry lives in static buffers: the captured step ends by copying the
  body's result into them (no copy when the body writes them in place).
  ``i`` is a 0-d int32 device array that the captured step advances; a body
  that reads ``i`` on the host (``if i:``, ``x[:i]``) cannot be captured.
* ``'fused'``: one launch of a kernel with the loop inside; the body must
  be a `Body` with a ``fused`` kernel ``(x, n) -> x_n``, and cannot see ``i``.

Derivatives: CuPy has no autodiff, so a `Body` carries its step's
derivative rules (``jvp``, ``vjp``) and the loop composes them: `jvp`
carries a tangent forward; `vjp` and `grad` go backward, storing every
carry or every ``checkpoint``-th carry and recomputing the rest.

`seconds` is the lessons' clock for a loop: the fewest seconds, of
several calls, from an idle device to the call's work being done.
"""
import operator
from typing import Callable, NamedTuple

from . import cp, kernels
from ._tracebacks import shown
from .timing import Benchmark

STRATEGIES = ("eager", "graph", "fused")


class Body(NamedTuple):
    """A loop body ``step(i, x) -> x`` with what fusion and derivatives need.

    ``jvp(i, x, dx)``: the step's derivative at ``x`` applied to ``dx``;
    ``vjp(i, x, g)``: its transpose applied to a cotangent ``g``; ``fused``:
    a kernel ``(x, n) -> x_n``; ``fused_jvp``: ``(x, dx, n) -> (x_n, dx_n)``.
    """
    step: Callable
    jvp: Callable = None
    vjp: Callable = None
    fused: object = None
    fused_jvp: object = None

    def __call__(self, i, x):
        return self.step(i, x)


# MindSpore's example body, ``x + x``, with every rule.
DOUBLE = Body(step=lambda i, x: x + x,
              jvp=lambda i, x, dx: dx + dx,
              vjp=lambda i, x, g: g + g,
              fused=kernels.double_n,
              fused_jvp=kernels.double_n_jvp)


def _bounds(lower, upper):
    return operator.index(lower), operator.index(upper)


def _leaves(carry):
    """The arrays of a carry: ``(x,)`` for an array, the tuple for a tuple."""
    return tuple(carry) if isinstance(carry, (tuple, list)) else (carry,)


def _like(carry, leaves):
    """``leaves`` in the structure of ``carry``."""
    return tuple(leaves) if isinstance(carry, (tuple, list)) else leaves[0]


def _check(before, after, i, strategy):
    """Raise if ``after`` is not a carry of ``before``'s shapes and dtypes.

    A shape change is a ValueError and a dtype change a TypeError, as for
    CuPy's ``ndarray.set``; the message says which part changed and how.
    """
    old, new = _leaves(before), _leaves(after)
    if isinstance(before, (tuple, list)) != isinstance(after, (tuple, list)) \
            or len(old) != len(new):
        raise shown(TypeError(
            f"fori_loop: the body returned {_describe(after)} for a carry "
            f"of {_describe(before)}; it must return the same structure"))
    for k, (a, b) in enumerate(zip(old, new)):
        where = f"carry[{k}]" if isinstance(before, (tuple, list)) \
            else "the carry"
        if not isinstance(b, cp.ndarray):
            raise shown(TypeError(
                f"fori_loop: at i={i} the body returned "
                f"{type(b).__module__}.{type(b).__name__} for {where}; "
                "return a cp.ndarray like its input"))
        if b.shape != a.shape:
            raise shown(ValueError(
                f"fori_loop: at i={i} the body changed the shape of {where} "
                f"from {a.shape} to {b.shape}; the carry must keep its shape "
                "and dtype (as in jax.lax.fori_loop): compute the next "
                "value in an array of the same shape"))
        if b.dtype != a.dtype:
            hint = (" In graph mode i is a 0-d int32 device array; cast it "
                    "first: i.astype(x.dtype)." if strategy == "graph" else "")
            raise shown(TypeError(
                f"fori_loop: at i={i} the body changed the dtype of {where} "
                f"from {a.dtype} to {b.dtype}; the carry must keep its shape "
                f"and dtype (as in jax.lax.fori_loop): cast the result with "
                f".astype(cp.{a.dtype}).{hint}"))


def _describe(carry):
    if isinstance(carry, (tuple, list)):
        return f"a tuple of {len(carry)}"
    if isinstance(carry, cp.ndarray):
        return "an array"
    return type(carry).__name__


def _copy(carry):
    """A fresh copy of every array of ``carry``, queued on this stream."""
    for a in _leaves(carry):
        if not isinstance(a, cp.ndarray):
            raise shown(TypeError(
                "fori_loop: init must be a cp.ndarray or a tuple of them, "
                f"not {type(a).__name__}"))
    return _like(carry, [a.copy() for a in _leaves(carry)])


def fori_loop(lower, upper, body, init, *, strategy="eager"):
    """``body(i, x) -> x`` for ``i`` in ``range(lower, upper)``, from ``init``.

    ``strategy`` picks how the steps reach the device: ``'eager'`` (one
    launch per operation), ``'graph'`` (one captured step, replayed) or
    ``'fused'`` (one kernel for the whole loop; ``body`` must be a `Body`
    with ``fused``). The result is new arrays; ``init`` is left unchanged.
    """
    lower, upper = _bounds(lower, upper)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, "
                         f"not {strategy!r}")
    x = _copy(init)
    if upper <= lower:
        return x
    if strategy == "eager":
        for i in range(lower, upper):
            x_next = body(i, x)
            _check(x, x_next, i, strategy)
            x = x_next
        return x
    if strategy == "graph":
        return graph_loop(lower, upper, body, x, capture_stream())
    return _fused(getattr(body, "fused", None), lower, upper, x)


def _fused(kernel, lower, upper, x):
    """One launch of ``kernel(*x, n)``: the loop runs inside the kernel."""
    if kernel is None:
        raise TypeError("strategy='fused' needs a Body with a fused kernel "
                        "(e.g. loops.DOUBLE, whose kernel is "
                        "kernels.double_n): a Python function cannot be "
                        "compiled into one kernel")
    out = kernel(*_leaves(x), upper - lower)
    _check(x, out, lower, "fused")
    return out


_capture_streams = {}


def capture_stream():
    """This device's stream for captures, made once and kept.

    Kept, not remade: blocks that a captured step allocates go back to this
    stream's pool arena, and only later work on this same stream (ordered
    after the replays) can reuse them.
    """
    dev = cp.cuda.Device().id
    if dev not in _capture_streams:
        _capture_streams[dev] = cp.cuda.Stream(non_blocking=True)
    return _capture_streams[dev]


def graph_loop(lower, upper, body, x, stream):
    """``body`` for ``i`` in ``range(lower, upper)`` as one captured step.

    One step is captured into a CUDA graph on ``stream`` (not the legacy
    default stream), then the graph is launched ``upper - lower`` times.
    A replay reads and writes the buffers the capture saw, so ``x`` (an
    array or a tuple of them) is the static buffer: the captured step ends
    by copying the body's result into it, and ``x`` holds the result.
    """
    caller = cp.cuda.get_current_stream()
    i = cp.full((), lower, dtype=cp.int32)   # the index lives on the device
    ready = caller.record()             # x and i are queued on the caller
    with stream:
        stream.begin_capture()
        try:
            x_next = body(i, x)         # recorded, not run
            _check(x, x_next, lower, "graph")
            for static, new in zip(_leaves(x), _leaves(x_next)):
                if new is not static:
                    static[...] = new   # the next step reads the buffer
            i += 1
        except BaseException:
            _abandon_capture(stream)
            raise
        graph = stream.end_capture()
        stream.wait_event(ready)        # replay once x and i are ready
        for _ in range(upper - lower):
            graph.launch(stream)
        caller.wait_event(stream.record())   # the caller waits for them
    return x


def _abandon_capture(stream):
    """End a capture that failed, leaving ``stream`` usable."""
    try:
        stream.end_capture()
    except cp.cuda.runtime.CUDARuntimeError:
        pass                            # the capture was invalidated


def jvp(lower, upper, body, primal, tangent, *, strategy="eager"):
    """Forward mode: ``(loop(primal), J @ tangent)``, carrying the tangent.

    The pair ``(x, dx)`` is the carry and each step applies ``body.jvp``;
    with ``'fused'``, ``body.fused_jvp`` runs both in one kernel.
    """
    if getattr(body, "jvp", None) is None:
        raise TypeError("jvp needs a Body with a jvp rule")
    _match(primal, tangent, "tangent")
    if strategy == "fused":
        lower, upper = _bounds(lower, upper)
        carry = _copy((primal, tangent))
        if upper <= lower:
            return carry
        return _fused(getattr(body, "fused_jvp", None), lower, upper, carry)

    def step(i, carry):
        x, dx = carry
        return body(i, x), body.jvp(i, x, dx)
    return fori_loop(lower, upper, step, (primal, tangent),
                     strategy=strategy)


def _match(primal, other, what):
    """Raise unless ``other`` has ``primal``'s shape and dtype."""
    if not isinstance(other, cp.ndarray) or other.shape != primal.shape:
        raise ValueError(f"the {what} must be an array of the primal's "
                         f"shape {primal.shape}, not {_describe(other)} of "
                         f"shape {getattr(other, 'shape', None)}")
    if other.dtype != primal.dtype:
        raise TypeError(f"the {what} must have the primal's dtype "
                        f"{primal.dtype}, not {other.dtype}")


def vjp(lower, upper, body, primal, cotangent, *, checkpoint=None):
    """Reverse mode: ``(loop(primal), J.T @ cotangent)``, run eagerly.

    The carry is one array. The backward pass needs every carry.
    ``checkpoint=None`` (or 1) keeps them all; ``checkpoint=k`` keeps every k-th and recomputes the others
    one segment at a time: about ``N/k + k`` carries instead of ``N``, for
    up to ``N`` extra steps.
    """
    lower, upper = _bounds(lower, upper)
    if getattr(body, "vjp", None) is None:
        raise TypeError("vjp needs a Body with a vjp rule")
    k = 1 if checkpoint is None else operator.index(checkpoint)
    if k < 1:
        raise ValueError(f"checkpoint must be 1 or more, not {k}")
    _match(primal, cotangent, "cotangent")
    x, saved = primal, {}
    for i in range(lower, upper):
        if (i - lower) % k == 0:
            saved[i] = x
        x = _pure_step(body, i, x)
    g = cotangent
    for start in reversed(range(lower, upper, k)):
        xs = [saved.pop(start)]
        stop = min(start + k, upper)
        for i in range(start, stop - 1):
            xs.append(_pure_step(body, i, xs[-1]))
        for i in reversed(range(start, stop)):
            g = body.vjp(i, xs.pop(), g)
    return x, g


def _pure_step(body, i, x):
    """``body(i, x)``, refusing a body that overwrites ``x`` (it is stored)."""
    x_next = body(i, x)
    if any(a is b for a, b in zip(_leaves(x), _leaves(x_next))):
        raise ValueError("vjp stores the carries for the backward pass: the "
                         "body must return new arrays, not update x in "
                         "place")
    _check(x, x_next, i, "eager")
    return x_next


def grad(lower, upper, body, x, *, checkpoint=None):
    """Gradient of ``sum(fori_loop(lower, upper, body, x))`` with respect to
    ``x``: a cotangent of ones, as MindSpore's GradOperation uses."""
    return vjp(lower, upper, body, x, cp.ones_like(x),
               checkpoint=checkpoint)[1]


def seconds(fn, repeat=9):
    """Fewest seconds from an idle device to fn()'s work being done."""
    fn()                                   # warm-up, not timed
    times = []
    for _ in range(repeat):
        with Benchmark(sync=True) as clock:
            fn()
        times.append(clock.seconds)
    return min(times)
