"""Kernels called directly on JAX tracers, on JAX's CPU backend: inside ``jax.jit`` and ``jax.vmap`` a bare call
``kernel(x, ...)`` runs as ``kspec.jax.call(kernel, x, ...)`` would (issue [Z]).

Each kind — a constructor ElementwiseKernel and ReductionKernel (axis=, keepdims=, out=), spec-file kernels, a
generated module's functions, kspec.fuse functions — gives kspec's eager result (and NumPy's) inside a jitted
function, which a new value of the same shape does not trace again; vmap batches a bare call. A raw kernel or
a kspec.jit kernel on tracers raises a kspec error naming the kernel, the transformation and what to do. Eager
calls keep their own path: the hand-off is found only after planning failed on a tracer. Skipped without JAX
or without a host compiler (kspec's CPU device runs the kernels); tests/jax_tests/test_jax_bare_gpu.py has the CUDA ones.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers.child_env import child_env
from helpers.device_arrays import host_compiler_missing

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import kspec  # noqa: E402
from kspec.kernels import traced_by  # noqa: E402
from helpers.jax_cases import fused_mul_add, fused_rowdot  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

ADD2 = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "bare_add2")
SCALE = kspec.ElementwiseKernel("T x, float32 s", "T z", "z = x * s", "bare_scale")
SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "bare_sumsq")
COPY = kspec.RawKernel(
    'extern "C" __global__ void bare_copy(const float* x, float* y, int n) {\n'
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = x[i];\n"
    "}\n",
    "bare_copy",
)


@pytest.fixture(autouse=True)
def cpu_device():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    with kspec.use_device("cpu"), jax.default_device(jax.devices("cpu")[0]):
        yield


def _data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _eager(result):
    """kspec's own eager result on the CPU device (NumPy arrays are its arrays), as NumPy."""
    return np.asarray(result.get() if hasattr(result, "get") else result)


def _modules():
    sys.path.insert(0, str(REPO))
    try:
        from generated import elementwise, reduction
    finally:
        sys.path.remove(str(REPO))
    return elementwise, reduction


# -- jax.jit: every kind, equal to the eager call -----------------------------------------------------------


def test_constructor_kernels_in_jit_equal_eager():
    x, y = _data((4, 6)), _data((6,), 1)

    @jax.jit
    def f(a, b):
        z = ADD2(a, b)
        return SCALE(z, 0.5), SUMSQ(z, axis=1), SUMSQ(z, axis=0, keepdims=True), SUMSQ(z)

    got = f(jnp.asarray(x), jnp.asarray(y))
    z = _eager(ADD2(x, y))
    want = (_eager(SCALE(z, 0.5)), _eager(SUMSQ(z, axis=1)), _eager(SUMSQ(z, axis=0, keepdims=True)), _eager(SUMSQ(z)))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), ((x + 2 * y) ** 2).sum(axis=1), rtol=1e-5)


def test_reduction_out_is_a_result():
    x, o = _data((3, 5)), np.zeros((3,), np.float32)
    got = jax.jit(lambda a, b: SUMSQ(a, axis=1, out=b))(jnp.asarray(x), jnp.asarray(o))
    np.testing.assert_allclose(np.asarray(got), (x * x).sum(axis=1), rtol=1e-5)


def test_generated_and_spec_file_kernels_in_jit():
    elementwise, reduction = _modules()
    library = kspec.load(REPO / "specs" / "reduction.toml")
    x, y, m = _data((33,)), _data((33,), 1), _data((5, 9), 2)

    @jax.jit
    def f(a, b, c):
        return elementwise.squared_diff_generic(a, b), reduction.l2norm(c, axis=1), library.l2norm(c, axis=0)

    got = f(jnp.asarray(x), jnp.asarray(y), jnp.asarray(m))
    np.testing.assert_allclose(np.asarray(got[0]), _eager(elementwise.squared_diff_generic(x, y)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), _eager(reduction.l2norm(m, axis=1)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), np.linalg.norm(m, axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[2]), np.linalg.norm(m, axis=0), rtol=1e-5)


def test_fused_functions_in_jit():
    x, y = _data((4, 8)), _data((4, 8), 1)
    got = jax.jit(lambda a, b: (fused_mul_add(a, b), fused_rowdot(a, b=b)))(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got[0]), _eager(fused_mul_add(x, y)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), _eager(fused_rowdot(x, y)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), (x * y).sum(axis=-1), rtol=1e-5)


def test_new_values_do_not_trace_again():
    elementwise, reduction = _modules()
    traces = []

    @jax.jit
    def f(a, b):
        traces.append(a.shape)
        z = ADD2(a, b)
        return fused_mul_add(elementwise.squared_diff_generic(z, b), b), reduction.l2norm(z, axis=1)

    for seed in range(3):
        x, y = _data((3, 7), seed), _data((3, 7), seed + 10)
        got = f(jnp.asarray(x), jnp.asarray(y))
        z = x + 2 * y
        np.testing.assert_allclose(np.asarray(got[0]), (z - y) ** 2 * y + 1, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(got[1]), np.linalg.norm(z, axis=1), rtol=1e-5)
    assert len(traces) == 1 and f._cache_size() == 1


def test_a_traced_call_keeps_no_prepared_call():
    """The hand-off happens on the planner's failure: nothing is kept for tracers, eager calls plan as before."""
    x = _data((5,))
    before = len(ADD2._calls)
    jax.jit(lambda a: ADD2(a, a))(jnp.asarray(x))
    assert len(ADD2._calls) == before
    np.testing.assert_allclose(_eager(ADD2(x, x)), 3 * x, rtol=1e-6)


# -- jax.vmap -----------------------------------------------------------------------------------------------


def test_vmap_of_bare_calls():
    x, y = _data((6, 3, 4)), _data((4,), 1)
    got = jax.vmap(lambda a, b: ADD2(a, b), in_axes=(0, None))(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got), x + 2 * y, rtol=1e-6)
    got = jax.jit(jax.vmap(lambda a: SUMSQ(a, axis=1, keepdims=True)))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), (x * x).sum(axis=2, keepdims=True), rtol=1e-5)
    got = jax.vmap(fused_mul_add)(jnp.asarray(x), jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), x * x + 1, rtol=1e-6)
    got = jax.vmap(fused_rowdot)(jnp.asarray(x), jnp.asarray(x))  # its kernels batched one by one
    np.testing.assert_allclose(np.asarray(got), (x * x).sum(axis=-1), rtol=1e-5)


# -- what kspec.jax does not run: kspec's errors ------------------------------------------------------------


def test_raw_kernel_on_tracers_says_what_to_do():
    x = _data((8,))
    y = np.zeros_like(x)
    COPY((1,), (8,), (x, y, np.int32(8)))  # an eager launch first: its fast path is installed
    np.testing.assert_array_equal(y, x)
    for transform, name in ((jax.jit, "jax.jit"), (jax.vmap, "jax.vmap")):
        with pytest.raises(kspec.KspecNotImplementedError) as info:
            transform(lambda a: COPY((1,), (8,), (a, a, np.int32(8))))(jnp.asarray(x[None] if name == "jax.vmap" else x))
        message = str(info.value)
        assert "kernel 'bare_copy'" in message and f"RawKernel cannot run inside {name}" in message
        assert f"Call it outside {name} on concrete arrays" in message and "ElementwiseKernel" in message


def test_spec_file_raw_kernel_and_kspec_jit_on_tracers():
    library = kspec.load(REPO / "specs" / "raw.toml")
    a = jnp.ones((8,), jnp.float32)
    with pytest.raises(kspec.KspecNotImplementedError, match="kernel 'my_add': a RawKernel cannot run inside jax.jit"):
        jax.jit(lambda v: library.my_add((1,), (8,), (v, v, v)))(a)

    @kspec.jit.rawkernel()
    def bare_jit_copy(x, y):
        i = kspec.jit.threadIdx.x
        y[i] = x[i]

    with pytest.raises(kspec.KspecNotImplementedError, match="kernel 'bare_jit_copy': a kspec.jit kernel cannot run inside jax.jit"):
        jax.jit(lambda v: bare_jit_copy((1,), (8,), (v, v)))(a)


def test_stream_gets_kspec_jax_error():
    a = jnp.ones((4,), jnp.float32)
    with pytest.raises(kspec.KspecTypeError, match="stream=: kernel 'bare_add2' runs on XLA's stream"):
        jax.jit(lambda v: ADD2(v, v, stream=0))(a)


def test_differentiation_gets_kspec_jax_error_and_stop_gradient_runs():
    a = _data((5,))
    with pytest.raises(kspec.KspecNotImplementedError, match="kernel 'bare_add2' cannot be differentiated"):
        jax.grad(lambda v: ADD2(v, v).sum())(a)
    with pytest.raises(kspec.KspecNotImplementedError, match="kernel 'bare_add2' cannot be differentiated"):
        jax.jvp(lambda v: ADD2(v, v), (a,), (a,))
    # a kernel call off the differentiated path: its inputs' gradients stopped, the rest differentiates
    value, grad = jax.value_and_grad(lambda v: (ADD2(*[jax.lax.stop_gradient(v)] * 2) * 0 + v * v).sum())(a)
    np.testing.assert_allclose(np.asarray(grad), 2 * np.asarray(a), rtol=1e-6)
    np.testing.assert_allclose(float(value), float((np.asarray(a) ** 2).sum()), rtol=1e-5)


def test_planning_errors_stay_kspecs():
    with pytest.raises(TypeError, match="Wrong number of arguments"):
        jax.jit(lambda v: ADD2(v))(jnp.ones((3,), jnp.float32))


# -- eager calls: their own path -----------------------------------------------------------------------------


def test_only_tracers_are_handed_off():
    assert traced_by((jnp.ones(3), np.ones(3), 1.0, None)) is None
    seen = []
    jax.jit(lambda v: seen.append(traced_by((v,))) or v)(jnp.ones(3))
    assert [f.name for f in seen] == ["jax"]


def test_no_jax_imported_by_a_failed_plan():
    """A process without JAX: the planner's error path looks at sys.modules only."""
    script = textwrap.dedent(
        """
        import sys
        import kspec
        kspec.use_device("cpu")
        kernel = kspec.ElementwiseKernel("T x", "T y", "y = x", "bare_absent")
        try:
            kernel(object())
        except TypeError as exc:
            print("refused:", exc)
        assert "jax" not in sys.modules and "kspec.jax" not in sys.modules, "imported"
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                          env=child_env(), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout


# -- eager calls on concrete JAX arrays: kspec.jax runs them -------------------------------------------------


def test_eager_calls_on_jax_arrays_go_through_kspec_jax(monkeypatch):
    import kspec.jax as kj

    seen = []
    real = kj.call
    monkeypatch.setattr(kj, "call", lambda kernel, *a, **k: seen.append(kernel.name) or real(kernel, *a, **k))
    x, y = _data((6, 4)), _data((4,), 1)
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    got = ADD2(xj, yj)
    assert isinstance(got, jax.Array) and seen == ["bare_add2"]
    np.testing.assert_allclose(np.asarray(got), x + 2 * y, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(SCALE(xj, 3.0)), x * 3, rtol=1e-6)  # a number beside them
    np.testing.assert_allclose(np.asarray(SUMSQ(xj, axis=1)), (x * x).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fused_mul_add(xj, xj)), x * x + 1, rtol=1e-6)
    assert seen[:3] == ["bare_add2", "bare_scale", "bare_sumsq"]
    seen.clear()
    ADD2(x, y)  # NumPy arrays alone: the CPU device's launch path
    assert seen == []


def test_eager_calls_that_give_outputs_or_a_stream_launch_as_before(monkeypatch):
    import kspec.jax as kj

    seen = []
    real = kj.call
    monkeypatch.setattr(kj, "call", lambda kernel, *a, **k: seen.append(kernel.name) or real(kernel, *a, **k))
    x = _data((8,))
    out = np.zeros(8, np.float32)
    ADD2(jnp.asarray(x), jnp.asarray(x), out)  # CuPy's contract: the output given is written
    np.testing.assert_allclose(out, 3 * x, rtol=1e-6)
    with kspec.Stream():
        np.testing.assert_allclose(np.asarray(ADD2(jnp.asarray(x), jnp.asarray(x))), 3 * x, rtol=1e-6)
    assert seen == []


def test_outputs_given_as_jax_arrays_come_back_new_and_are_never_written(monkeypatch):
    """JAX arrays are immutable: an eager call that gives its outputs as JAX arrays runs as kspec.jax.call (the
    results are new arrays; the ones given keep their values, as inside jax.jit), and the launch path (a stream
    given) refuses to write one, naming the output. It wrote into the array before."""
    import kspec.jax as kj

    seen = []
    real = kj.call
    monkeypatch.setattr(kj, "call", lambda kernel, *a, **k: seen.append(kernel.name) or real(kernel, *a, **k))
    x = _data((3, 8))
    given = jnp.zeros((3, 8), jnp.float32)
    got = ADD2(jnp.asarray(x), jnp.asarray(x), given)
    np.testing.assert_allclose(np.asarray(got), 3 * x, rtol=1e-6)
    assert not np.asarray(given).any() and seen == ["bare_add2"]
    out = jnp.zeros((3,), jnp.float32)
    np.testing.assert_allclose(np.asarray(SUMSQ(jnp.asarray(x), axis=1, out=out)), (x * x).sum(1), rtol=1e-5)
    assert not np.asarray(out).any()
    with kspec.Stream(), pytest.raises(kspec.KspecTypeError, match="output z is a JAX array: JAX arrays are immutable"):
        ADD2(jnp.asarray(x), jnp.asarray(x), given)
    assert not np.asarray(given).any()
