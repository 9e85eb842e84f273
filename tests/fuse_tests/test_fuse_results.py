"""kspec.fuse's results against NumPy on the same function, across dtypes, shapes and libraries.

Kernel tests take ``xp`` (tests/conftest.py): they run on kspec's CPU device (NumPy arrays, which the CPU
device's fused functions trace into kernels) and on a GPU (CuPy). PyTorch inputs, NumPy arrays mixed with
CuPy's (NumPy arrays are host arrays there) and ``kspec build`` for a GPU arch are GPU tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kspec

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _numpy(fn, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _host(value):
    if hasattr(value, "get"):
        return value.get()
    if type(value).__module__.startswith("torch"):
        return value.cpu().numpy()
    return value


def _assert_same(got, want, dtype, rtol=None):
    got, want = np.asarray(_host(got)), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    kind = np.dtype(dtype).kind
    if kind in "biu" or want.dtype.kind in "bui":
        np.testing.assert_array_equal(got, want)
    else:
        tol = rtol or {2: 4e-3, 4: 2e-6, 8: 1e-13, 16: 1e-13}[np.dtype(dtype).itemsize]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def _random(shape, dtype, rng, positive=False):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        low = 1 if positive or dt.kind == "u" else -50
        return rng.integers(low, 50, shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    x = rng.standard_normal(shape)
    return (np.abs(x) + 0.1 if positive else x).astype(dt)


# -- the seed's examples ---------------------------------------------------------------------------------


def test_seed_squared_diff_on_device_and_numpy_arrays(xp):
    @kspec.fuse()
    def squared_diff(x, y):
        return (x - y) * (x - y)

    out = squared_diff(xp.arange(10), xp.arange(10)[::-1])
    assert isinstance(out, xp.ndarray)
    assert xp.asnumpy(out).tolist() == [81, 49, 25, 9, 1, 1, 9, 25, 49, 81]
    assert squared_diff(np.arange(10), np.arange(10)[::-1]).tolist() == [81, 49, 25, 9, 1, 1, 9, 25, 49, 81]

    @kspec.fuse(kernel_name="squared_diff")
    def named(x, y):
        return (x - y) * (x - y)

    assert xp.asnumpy(named(xp.arange(10), xp.arange(10)[::-1])).tolist() == xp.asnumpy(out).tolist()


def test_seed_sum_of_products(xp):
    @kspec.fuse()
    def sum_of_products(x, y):
        return xp.sum(x * y, axis=-1)

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((7, 33)).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    _assert_same(sum_of_products(xp.asarray(x), xp.asarray(y)), np.sum(x * y, axis=-1), "float32", rtol=1e-5)


# -- operators and ufuncs over dtypes --------------------------------------------------------------------


def arith(x, y):
    return (x + y, x - y, x * y, x / y, np.maximum(x, y), np.minimum(x, y), x < y, x == y,
            np.where(x > y, x, y), abs(x), -x, x * 3, 2.5 * y, np.square(x))


def integer_ops(x, y):
    return (x // y, x % y, x & y, x | y, x ^ y, x << 2, x >> 1, ~x, np.gcd(x, y), x ** 2, divmod(x, y)[0])


def float_math(x, y):
    return (np.sin(x), np.cos(x), np.exp(x), np.log(y), np.sqrt(y), np.tanh(x), np.arctan2(x, y),
            np.hypot(x, y), np.floor(x), np.rint(x * 4), np.isnan(x / x), np.isfinite(x), np.clip(x, -0.5, 0.5),
            x ** 2, np.cbrt(x), np.expm1(x), np.log1p(y), np.fmod(x, y), x // y, x % y, np.copysign(y, x),
            np.logaddexp(x, y), np.sign(x), np.reciprocal(y), np.arcsinh(x), np.heaviside(x, 0.5))


def complex_math(x, y):
    return (x * y, x + y, x / y, abs(x), np.exp(x), x.real, x.imag, x.conj(), np.sqrt(x), x == y, np.log(x),
            np.square(x))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32", "float16", "float32", "float64"])
def test_arithmetic_and_comparisons_match_numpy(xp, dtype):
    rng = np.random.default_rng(1)
    x, y = _random((5, 31), dtype, rng, positive=True), _random((31,), dtype, rng, positive=True)
    f = kspec.fuse(arith)
    got = f(xp.asarray(x), xp.asarray(y))
    for g, w in zip(got, _numpy(arith, x, y)):
        _assert_same(g, w, w.dtype)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint64"])
def test_integer_operators_match_numpy(xp, dtype):
    rng = np.random.default_rng(2)
    x = _random((300,), dtype, rng)
    y = _random((300,), dtype, rng, positive=True)
    f = kspec.fuse(integer_ops)
    for g, w in zip(f(xp.asarray(x), xp.asarray(y)), _numpy(integer_ops, x, y)):
        _assert_same(g, w, dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_math_matches_numpy(xp, dtype):
    rng = np.random.default_rng(3)
    x, y = _random((513,), dtype, rng), _random((513,), dtype, rng, positive=True)
    f = kspec.fuse(float_math)
    for g, w in zip(f(xp.asarray(x), xp.asarray(y)), _numpy(float_math, x, y)):
        rtol = {"float16": 4e-3, "float32": 1e-5, "float64": 1e-12}[dtype]
        _assert_same(g, w, w.dtype, rtol=rtol)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_math_matches_numpy(xp, dtype):
    rng = np.random.default_rng(4)
    x, y = _random((200,), dtype, rng), _random((200,), dtype, rng)
    f = kspec.fuse(complex_math)
    for g, w in zip(f(xp.asarray(x), xp.asarray(y)), _numpy(complex_math, x, y)):
        _assert_same(g, w, w.dtype, rtol=1e-5 if dtype == "complex64" else 1e-12)


# -- reductions ------------------------------------------------------------------------------------------


REDUCTION_CASES = [
    *[("sum", d) for d in ("bool", "int32", "uint8", "float16", "float32", "float64", "complex64")],
    *[("prod", d) for d in ("int32", "float32", "float64", "complex64")],
    *[(op, d) for op in ("max", "min") for d in ("int32", "uint8", "float16", "float32")],
    *[(op, d) for op in ("all", "any") for d in ("bool", "float32")],
]


def _reducer(op, axis, keepdims):
    return lambda v: getattr(v, op)(axis=axis, keepdims=keepdims)


@pytest.mark.parametrize(("op", "dtype"), REDUCTION_CASES)
def test_reductions_match_numpy(xp, op, dtype):
    rng = np.random.default_rng(5)
    x = _random((4, 5, 6), dtype, rng)
    if op == "prod" and np.dtype(dtype).kind in "fc":
        x = (1 + 0.01 * x).astype(dtype)
    xd = xp.asarray(x)
    for axis, keepdims in [(None, False), (1, True), (-1, False), ((0, 2), False)]:
        fn = _reducer(op, axis, keepdims)
        want = np.asarray(_numpy(fn, x))
        rtol = {"float16": 5e-3, "float32": 1e-5, "complex64": 1e-5}.get(dtype, 1e-12)
        _assert_same(kspec.fuse(fn)(xd), want, want.dtype, rtol=rtol)


def test_elementwise_work_before_and_after_a_reduction(xp):
    @kspec.fuse
    def l2norm(x, y):
        return np.sqrt(xp.sum((x - y) ** 2, axis=1)) * 2

    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((64, 1000)).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    assert len(l2norm.specs(x, y)) == 1  # the sqrt and * 2 are the post-map
    _assert_same(l2norm(xp.asarray(x), xp.asarray(y)), np.sqrt(np.sum((x - y) ** 2, axis=1)) * 2, "float32", rtol=1e-5)


def test_functions_cupy_refuses_run_as_several_kernels(xp):
    @kspec.fuse
    def centered_max(x):
        return (x - x.sum(axis=1, keepdims=True)).max(axis=1)

    @kspec.fuse
    def normalized(x, y):
        return x / np.sqrt((x * x).sum()), x.sum() + y.sum(), x.max(axis=0).min()

    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((20, 30)), rng.standard_normal(7)
    _assert_same(centered_max(xp.asarray(x)), (x - x.sum(axis=1, keepdims=True)).max(axis=1), "float64")
    got = normalized(xp.asarray(x), xp.asarray(y))
    want = (x / np.sqrt((x * x).sum()), x.sum() + y.sum(), x.max(axis=0).min())
    for g, w in zip(got, want):
        _assert_same(g, np.asarray(w), "float64")


def test_zero_size_and_zero_dim(xp):
    f = kspec.fuse(lambda x, y: (x * y + 1, (x * y).sum(axis=0)))
    e = xp.zeros((0, 3), xp.float32)
    a, b = f(e, e)
    assert a.shape == (0, 3) and b.shape == (3,) and not xp.asnumpy(b).any()
    g = kspec.fuse(lambda x, y: (x * y + 1, (x * y).sum()))
    z = xp.asarray(np.float32(3))
    a, b = g(z, z)
    assert a.shape == () and float(xp.asnumpy(a)) == 10.0 and b.shape == () and float(xp.asnumpy(b)) == 9.0
    with pytest.raises(ValueError):
        kspec.fuse(lambda x: x.max())(e)


def test_broadcast_transposed_and_negative_strides(xp):
    f = kspec.fuse(lambda x, y: x * 2 - y)
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((40, 30)), rng.standard_normal((30,))
    xd = xp.asarray(x)
    _assert_same(f(xd.T, xp.asarray(y[:, None])), x.T * 2 - y[:, None], "float64")
    _assert_same(f(xd[::-1, ::2], xp.asarray(y[::2])), x[::-1, ::2] * 2 - y[::2], "float64")


def test_in_place_updates_write_into_the_arguments(xp):
    @kspec.fuse
    def sgd(p, g, lr):
        p -= lr * g

    @kspec.fuse
    def accumulate(acc, x):
        acc += x * x
        return acc

    rng = np.random.default_rng(9)
    p, g = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    pd = xp.asarray(p)
    assert sgd(pd, xp.asarray(g), 0.1) is None
    _assert_same(pd, p - np.float32(0.1) * g, "float32")
    acc = xp.zeros(1000, xp.float32)
    assert accumulate(acc, pd) is acc
    _assert_same(acc, xp.asnumpy(pd) ** 2, "float32")

    @kspec.fuse
    def swap_like(x, y):
        t = x * 2
        np.add(y, 1, out=x)
        return t

    x, y = xp.arange(5.0), xp.arange(5.0) * 10
    t = swap_like(x, y)
    assert xp.asnumpy(t).tolist() == [0, 2, 4, 6, 8] and xp.asnumpy(x).tolist() == [1, 11, 21, 31, 41]


def test_several_outputs_arguments_constants_and_none(xp):
    @kspec.fuse
    def many(x, y):
        return x + y, x, 3, None, np.divmod(x, y)

    x, y = xp.arange(1, 6), xp.asarray([2, 2, 2, 2, 2])
    s, same, three, none, (q, r) = many(x, y)
    assert same is x and three == 3 and none is None
    assert xp.asnumpy(s).tolist() == [3, 4, 5, 6, 7] and xp.asnumpy(q).tolist() == [0, 1, 1, 2, 2]
    assert xp.asnumpy(r).tolist() == [1, 0, 1, 0, 1]


def test_scalars_are_parameters_a_new_value_does_not_retrace(xp):
    @kspec.fuse
    def axpy(a, x, y):
        return a * x + y

    x, y = xp.arange(4, dtype=xp.float32), xp.ones(4, xp.float32)
    assert xp.asnumpy(axpy(2.0, x, y)).tolist() == [1, 3, 5, 7]
    assert xp.asnumpy(axpy(3.0, x, y)).tolist() == [1, 4, 7, 10]
    assert axpy(np.float32(0.5), x, y).dtype == xp.float32
    assert len(axpy._by_types) == 2  # Python float, then NumPy float32: two signatures, not three


def test_kspec_arrays_in_kspec_arrays_out(xp):
    f = kspec.fuse(lambda x, y: (x - y) ** 2)
    k = kspec.asarray(np.arange(6, dtype=np.float32))  # on the CPU device: a kspec array in host memory
    out = f(k, k)
    assert isinstance(out, kspec.DeviceArray) and out.get().tolist() == [0] * 6
    out = f(k, kspec.asarray(np.arange(6, dtype=np.float32)[::-1].copy()))
    assert isinstance(out, kspec.DeviceArray) and out.get().tolist() == [25, 9, 1, 1, 9, 25]


@pytest.mark.gpu
def test_pytorch_tensors(cp):
    torch = pytest.importorskip("torch")
    f = kspec.fuse(lambda x, y: (x - y) ** 2)
    a = torch.arange(6, dtype=torch.float32, device="cuda")
    out = f(a, a.flip(0))
    assert isinstance(out, torch.Tensor) and out.cpu().tolist() == [25, 9, 1, 1, 9, 25]
    s = kspec.fuse(lambda x: x.sum(axis=0))(torch.ones((3, 2), device="cuda"))
    assert isinstance(s, torch.Tensor) and s.cpu().tolist() == [3, 3]


@pytest.mark.gpu
def test_host_and_device_arrays_mixed_is_a_type_error(cp):
    # on a GPU machine NumPy arrays are host arrays; on the CPU device they are the device's (no mix exists)
    f = kspec.fuse(lambda x, y: x + y)
    with pytest.raises(TypeError, match="host arrays"):
        f(cp.arange(3), np.arange(3))


def test_library_ufuncs_inside_a_fused_function(xp):
    # CuPy's on a GPU, NumPy's on the CPU device
    @kspec.fuse
    def f(x, y):
        z = xp.sin(x) + xp.true_divide(y, 2)
        w = xp.where(x > y, z, xp.clip(y, 0, 1))
        return xp.sum(w, axis=1), xp.amax(z, axis=0, keepdims=True)

    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((8, 9)), rng.standard_normal((8, 9))
    got = f(xp.asarray(x), xp.asarray(y))
    z = np.sin(x) + y / 2
    w = np.where(x > y, z, np.clip(y, 0, 1))
    _assert_same(got[0], w.sum(axis=1), "float64")
    _assert_same(got[1], z.max(axis=0, keepdims=True), "float64")


@pytest.mark.gpu
def test_fused_spec_precompiled_runs_without_nvrtc(cp, tmp_path):
    """Trace, save the spec, `kspec build` it in a process that sees no GPU, run it where NVRTC is blocked."""
    from helpers.deploy_build import NO_NVRTC
    from kspec.spec import dumps_json

    @kspec.fuse(kernel_name="fused_axpy")
    def axpy(a, x, y):
        return a * x + y

    @kspec.fuse(kernel_name="fused_norm")
    def norm(x):
        return np.sqrt((x * x).sum(axis=1))

    stand_in = np.zeros((2, 3), np.float32)
    path = tmp_path / "fused.json"  # JSON: the GPU machine has no TOML writer
    path.write_text(dumps_json([axpy.spec(2.0, stand_in, stand_in), norm.spec(stand_in)]))
    arch = kspec.get_device().arch
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", KSPEC_CACHE_DIR=str(tmp_path / "cache1"))
    done = subprocess.run([sys.executable, "-m", "kspec", "build", str(path), "--arch", arch, "-o", str(tmp_path / "bin")],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    script = NO_NVRTC + f"""
import numpy as np, cupy as cp, kspec
lib = kspec.load({str(path)!r}, binaries={str(tmp_path / 'bin')!r})
x = cp.arange(6, dtype=cp.float32).reshape(2, 3)
got = lib.fused_axpy(2.0, x, x)
assert got.get().tolist() == [[0, 3, 6], [9, 12, 15]], got
got = lib.fused_norm(x, axis=1)  # a saved reduction spec is a ReductionKernel: axis is a call argument
assert np.allclose(got.get(), np.sqrt((x.get() ** 2).sum(axis=1))), got
import kspec.compiler._nvrtc as nvrtc_layer
assert nvrtc_layer._module is None, "NVRTC was loaded"
print("ok")
"""
    env = child_env(REPO, REPO / "tests", KSPEC_CACHE_DIR=str(tmp_path / "cache2"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr


def test_python_int_that_does_not_fit_the_array_dtype_overflows_as_in_numpy(xp):
    f = kspec.fuse(lambda x, k: x + k)
    x = xp.arange(3, dtype=xp.int8)
    assert xp.asnumpy(f(x, 100)).tolist() == [100, 101, 102]
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        f(x, 300)
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        f(xp.arange(3, dtype=xp.uint8), -1)
    assert f(xp.arange(3, dtype=xp.int64), 2**40).dtype == xp.int64


def test_repeated_calls_served_by_the_kernels_prepared_call_stay_correct(xp) -> None:
    """A repeat of the last call goes straight to the fused kernel's prepared call (FusedFunction.__call__);
    another shape, a strided view, another dtype or NumPy inputs must still get their own results."""
    f = kspec.fuse(lambda x, y: (x - y) * (x - y))
    xs = np.arange(12, dtype=np.float32)
    ys = np.full(12, 2.5, np.float32)
    x, y = xp.asarray(xs), xp.asarray(ys)
    for _ in range(3):
        _assert_same(f(x, y), (xs - ys) ** 2, np.float32)
    assert f._fast_call is not None  # the repeats took the fast path
    _assert_same(f(x[::2], y[::2]), (xs[::2] - ys[::2]) ** 2, np.float32)
    _assert_same(f(x[:5], y[:5]), (xs[:5] - ys[:5]) ** 2, np.float32)
    _assert_same(f(x.astype(xp.float64), y.astype(xp.float64)), (xs.astype(np.float64) - ys) ** 2, np.float64)
    _assert_same(f(x, 1.5), (xs - np.float32(1.5)) ** 2, np.float32)
    # NumPy arrays: the plain function on a GPU machine, the kernel on the CPU device
    _assert_same(f(xs, ys), (xs - ys) ** 2, np.float32)
    _assert_same(f(x, y), (xs - ys) ** 2, np.float32)
