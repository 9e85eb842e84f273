"""kspec kernels inside JAX on its CPU backend, end to end: kspec.jax.call / wrap under jax.jit, eagerly, under vmap.

JAX's CPU backend runs a kspec call as an XLA FFI custom call whose handler launches the kernel on kspec's CPU
device (the host-compiled binary), so everything the GPU path does short of CUDA is checked here: outputs from
kspec's planning, results equal to kspec's own eager calls on the same data (constructor elementwise and
reduction kernels, a generated module's kernel, fused functions, scalars, broadcasting, outputs given, a
workspace), no retrace, no re-planning and no file read on a second call, vmap's re-planning and its refusals,
the errors, the Python fallback handler and a stale executable from another process. Skipped without JAX
(CI has none) or without a host compiler.
"""

from __future__ import annotations

import builtins
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
import kspec.jax as kj  # noqa: E402
from helpers.jax_cases import fused_mul_add, fused_rowdot  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

ADD2 = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "jax_add2")
SCALE = kspec.ElementwiseKernel("T x, float32 s", "T z", "z = x * s", "jax_scale")
ACCUMULATE = kspec.ElementwiseKernel("T x", "T z", "z = z + x", "jax_accumulate")
SUMSQ = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "jax_sumsq")
USES_INDEX = kspec.ElementwiseKernel("T x", "T z", "z = x + i", "jax_plus_index")
RAW_FIRST = kspec.ElementwiseKernel("raw T x, T y", "T z", "z = x[0] + y", "jax_first_plus")




@pytest.fixture(autouse=True)
def cpu_device():
    reason = host_compiler_missing()
    if reason is not None:
        pytest.skip(reason)
    # JAX's CPU backend even where a GPU is its default (these tests run kspec's CPU device; test_jax_gpu.py
    # has the CUDA ones)
    with kspec.use_device("cpu"), jax.default_device(jax.devices("cpu")[0]):
        yield


def _data(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


def _eager(result):
    """kspec's own eager result on the CPU device, as NumPy."""
    if isinstance(result, tuple):
        return tuple(_eager(r) for r in result)
    return np.asarray(result.get() if hasattr(result, "get") else result)


# -- results: the same as kspec's own calls ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_jit_elementwise_equals_eager(dtype):
    x, y = _data((3, 5), dtype), _data((5,), dtype, 1)
    f = jax.jit(lambda a, b: kj.call(ADD2, a, b))
    got = f(jnp.asarray(x), jnp.asarray(y))
    assert got.shape == (3, 5) and got.dtype == dtype
    np.testing.assert_array_equal(np.asarray(got), _eager(ADD2(x, y)))


def test_static_scalars_are_part_of_the_plan():
    x = _data((7,))
    f = jax.jit(lambda a: kj.call(SCALE, a, 2.5) + kj.call(SCALE, a, -1.0))
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(x))), x * 2.5 - x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kj.call(ADD2, jnp.asarray(x), 3.0)), _eager(ADD2(x, 3.0)), rtol=1e-6)


@pytest.mark.parametrize(("axis", "keepdims"), [(None, False), (1, False), (0, True), (-1, True), ((0, 2), False)])
def test_jit_reduction_equals_eager(axis, keepdims):
    x = _data((4, 6, 5))
    got = jax.jit(lambda a: kj.call(SUMSQ, a, axis=axis, keepdims=keepdims))(jnp.asarray(x))
    want = _eager(SUMSQ(x, axis=axis, keepdims=keepdims))
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


def test_reduction_with_a_workspace():
    from kspec.kernels import ArraySpec

    x = _data((2, 1 << 18))
    plan = SUMSQ.plan_launch(ArraySpec(x.shape, "float32", device="cpu", device_id=-1), axis=1)
    assert plan.workspace > 0 and len(plan.steps) == 2, "this shape no longer splits: pick one that does"
    got = kj.call(SUMSQ, jnp.asarray(x), axis=1)
    np.testing.assert_allclose(np.asarray(got), _eager(SUMSQ(x, axis=1)), rtol=1e-5)


def test_reduction_out_and_given_outputs_are_results():
    x = _data((3, 4))
    out = jnp.zeros((3,), jnp.float32)
    np.testing.assert_allclose(np.asarray(kj.call(SUMSQ, jnp.asarray(x), axis=1, out=out)), (x * x).sum(1), rtol=1e-5)
    z0 = _data((3, 4), seed=3)
    z = jnp.asarray(z0)
    got = jax.jit(lambda a, b: kj.call(ACCUMULATE, a, b))(jnp.asarray(x), z)  # the kernel reads its output
    np.testing.assert_allclose(np.asarray(got), z0 + x, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(z), z0)  # JAX arrays stay as they were


def test_fused_functions():
    x, y = _data((4, 8)), _data((4, 8), seed=1)
    np.testing.assert_allclose(np.asarray(jax.jit(kj.wrap(fused_mul_add))(jnp.asarray(x), jnp.asarray(y))), x * y + 1, rtol=1e-6)
    got = jax.jit(kj.wrap(fused_rowdot))(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got), _eager(fused_rowdot(x, y)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(kj.call(fused_mul_add, a=jnp.asarray(x), b=jnp.asarray(y))), x * y + 1, rtol=1e-6)


def test_generated_module_kernels():
    sys.path.insert(0, str(REPO))
    try:
        from generated import elementwise, reduction
    finally:
        sys.path.remove(str(REPO))
    x, y = _data((33,)), _data((33,), seed=1)
    got = jax.jit(kj.wrap(elementwise.squared_diff_generic))(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got), _eager(elementwise.squared_diff_generic(x, y)), rtol=1e-6)
    m = _data((5, 9))
    got = kj.call(reduction.l2norm, jnp.asarray(m), axis=1)
    np.testing.assert_allclose(np.asarray(got), np.linalg.norm(m, axis=1), rtol=1e-5)


def test_hlo_holds_the_custom_call():
    x = jnp.ones((4,), jnp.float32)
    text = jax.jit(lambda a: kj.call(ADD2, a, a)).lower(x).as_text()
    assert "kspec_launch" in text and "kspec_process" in text


# -- a second call: no trace, no plan, no file read -------------------------------------------------------


class _CountingKernel:
    """A kernel whose plans are counted (and can be forbidden): kspec.jax only asks it for plans."""

    def __init__(self, kernel):
        self.kernel, self.plans, self.allowed = kernel, 0, True
        self.name = kernel.name

    def output_specs(self, *args, **kwargs):
        return self.kernel.output_specs(*args, **kwargs)

    def plan_launch(self, *args, **kwargs):
        assert self.allowed, "planned again"
        self.plans += 1
        return self.kernel.plan_launch(*args, **kwargs)


def test_second_call_does_not_trace_plan_or_read(monkeypatch):
    kernel = _CountingKernel(ADD2)
    traces = []

    @jax.jit
    def f(a, b):
        traces.append(a.shape)
        return kj.call(kernel, a, b) * 2

    x, y = jnp.asarray(_data((64,))), jnp.asarray(_data((64,), seed=1))
    first = np.asarray(f(x, y))
    assert (len(traces), kernel.plans, f._cache_size()) == (1, 1, 1)
    kernel.allowed = False

    def no_reads(*args, **kwargs):
        raise AssertionError(f"a file was opened: {args[:1]}")

    monkeypatch.setattr(builtins, "open", no_reads)
    monkeypatch.setattr(Path, "read_bytes", no_reads)
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x, y)), first)
    assert (len(traces), kernel.plans, f._cache_size()) == (1, 1, 1)


def test_eager_calls_reuse_one_plan():
    kernel = _CountingKernel(SCALE)
    x = jnp.asarray(_data((16,)))
    for _ in range(3):
        kj.call(kernel, x, 2.0)
    assert kernel.plans == 1
    kj.call(kernel, x, 3.0)  # another static scalar: another plan
    assert kernel.plans == 2


# -- vmap ---------------------------------------------------------------------------------------------------


def test_vmap_elementwise():
    x, y = _data((6, 3, 4)), _data((4,), seed=1)
    got = jax.vmap(lambda a, b: kj.call(ADD2, a, b), in_axes=(0, None))(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got), x + 2 * y, rtol=1e-6)
    got = jax.vmap(lambda a, b: kj.call(ADD2, a, b), in_axes=(2, 0))(jnp.asarray(x), jnp.asarray(_data((4, 3), seed=2)))
    want = np.moveaxis(x, 2, 0) + 2 * _data((4, 3), seed=2)[:, None, :]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize(("axis", "keepdims"), [(None, False), (0, False), (-1, True), ((0, 1), False)])
def test_vmap_reduction_shifts_the_axes(axis, keepdims):
    x = _data((5, 3, 4))
    got = jax.jit(jax.vmap(lambda a: kj.call(SUMSQ, a, axis=axis, keepdims=keepdims)))(jnp.asarray(x))
    want = np.stack([(x[k] * x[k]).sum(axis=axis, keepdims=keepdims) for k in range(5)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


def test_nested_vmap_and_fused():
    x, y = _data((2, 3, 4)), _data((3, 4), seed=1)
    got = jax.vmap(jax.vmap(kj.wrap(fused_mul_add), in_axes=(0, 0)), in_axes=(0, None))(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(np.asarray(got), x * y + 1, rtol=1e-6)


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_of_a_fused_reduction(in_axes):
    # its kernels run one by one (kspec.grad's program of differentiable kernels), each batched like a kernel
    x = _data((2, 3, 5))
    got = jax.vmap(lambda a: kj.call(fused_rowdot, a, a), in_axes=in_axes)(jnp.asarray(x))
    want = (x * x).sum(axis=-1)
    np.testing.assert_allclose(np.asarray(got), want if in_axes == 0 else want.T, rtol=1e-5)


def test_vmap_out_of_bounds_axis():
    with pytest.raises(kspec.AxisError, match="axis -3 is out of bounds for array of dimension 2"):
        jax.vmap(lambda a: kj.call(SUMSQ, a, axis=-3))(jnp.ones((2, 3, 4)))


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (lambda a: kj.call(USES_INDEX, a), r"reads the flat index \(i or _ind\)"),
        (lambda a: kj.call(RAW_FIRST, a, a), "has raw parameters"),
    ],
)
def test_vmap_refuses_kernels_that_do_not_batch(call, why):
    with pytest.raises(kspec.KspecNotImplementedError, match=f"jax.vmap of kernel .*{why}"):
        jax.vmap(call)(jnp.ones((2, 5), jnp.float32))


# -- errors -------------------------------------------------------------------------------------------------


def test_errors():
    x = jnp.ones((3,), jnp.float32)
    with pytest.raises(kspec.KspecTypeError, match="kernel: expected a kspec ElementwiseKernel.*got RawKernel"):
        kj.wrap(kspec.RawKernel('extern "C" __global__ void k() {}', "k"))
    with pytest.raises(kspec.KspecTypeError, match="stream=: kernel 'jax_add2' runs on XLA's stream"):
        kj.call(ADD2, x, x, stream=0)
    with pytest.raises(kspec.KspecTypeError, match="argument 1: kernel 'jax_add2' under kspec.jax takes JAX arrays"):
        kj.call(ADD2, x, [1.0, 2.0, 3.0])
    with pytest.raises(kspec.KspecTypeError, match="axis=: kernel 'jax_sumsq' under kspec.jax takes static"):
        kj.call(SUMSQ, x, axis={0: 1})
    with pytest.raises(TypeError, match="Wrong number of arguments"):  # the kernel's own planning error
        kj.call(ADD2, x)


def test_cpu_device_off_is_an_error():
    with kspec.use_device("cuda"):
        with pytest.raises(kspec.KspecValueError, match="JAX runs this computation on the CPU.*use_device\\('cpu'\\)"):
            kj.call(kspec.ElementwiseKernel("T x", "T y", "y = x", "jax_copy_off"), jnp.ones((2,)))


def test_wrap_is_one_object_per_kernel():
    assert kj.wrap(ADD2) is kj.wrap(ADD2)
    assert kj.wrap(ADD2).__name__ == "jax_add2"


# -- other processes ----------------------------------------------------------------------------------------


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO,
                          env=child_env(KSPEC_DEVICE="cpu", **env), capture_output=True, text=True, timeout=300)


_SMALL = """
    import warnings
    import numpy as np, jax, jax.numpy as jnp
    import kspec, kspec.jax as kj
    add = kspec.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "sub_add2")
    x = jnp.arange(8, dtype=jnp.float32)
"""


def test_python_handler_end_to_end():
    done = _run(_SMALL + """
    from kspec.jax import _library
    r = jax.jit(lambda a: kj.call(add, a, a) + 1)(x)
    assert np.array_equal(np.asarray(r), np.arange(8) * 3 + 1), r
    assert _library.handler().kind == "python"
    print("ok")
    """, KSPEC_JAX_HANDLER="python")
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


def test_no_host_compiler_falls_back_with_a_warning():
    done = _run(_SMALL + """
    from kspec.jax import _library
    def no_compiler():
        raise kspec.HostCompilerNotFoundError("none here")
    _library.build_handler = no_compiler
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = kj.call(add, x, x)
    assert np.array_equal(np.asarray(r), np.arange(8) * 3), r
    assert [w.category for w in seen] == [kspec.PerformanceWarning], [str(w.message) for w in seen]
    assert "Python FFI handler" in str(seen[0].message) and "tens of microseconds" in str(seen[0].message)
    print("ok")
    """)
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


def test_an_exported_call_run_in_another_process_is_refused(tmp_path):
    pytest.importorskip("flatbuffers", reason="jax.export serializes with flatbuffers")
    from jax import export

    x = jnp.arange(8, dtype=jnp.float32)
    exported = export.export(jax.jit(lambda a: kj.call(ADD2, a, a)),
                             disabled_checks=[export.DisabledSafetyCheck.custom_call("kspec_launch")])(x)  # fmt: skip
    path = tmp_path / "exported.bin"
    path.write_bytes(exported.serialize())
    done = _run(_SMALL + f"""
    from jax import export
    import kspec.jax._library as library
    library.handler()  # this process's handler is registered (a kspec.jax import does it on first use)
    call = export.deserialize(bytearray(open({str(path)!r}, "rb").read()))
    try:
        call.call(x).block_until_ready()
    except Exception as exc:
        print("refused:", exc)
    """)
    assert "refused:" in done.stdout and "planned by another process" in done.stdout, done.stdout + done.stderr
