"""The ElementwiseKernel / ReductionKernel examples of the seed documents, run as written on both devices.

Seed 002 (CuPy's user-defined kernels guide) and seed 004 (the custom CUDA kernels tutorial) with
``kspec.ElementwiseKernel`` / ``kspec.ReductionKernel`` in place of ``cp.*``, checking the values the documents
show; then the same kernels from the repository's spec files (``kspec.load``), which must give the same
results. The ``xp`` fixture gives the data's library: CuPy on a GPU, NumPy on kspec's CPU device (``xp.random``
is then NumPy's, so the documents' ``cp.random`` calls read the same).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

import kspec

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"

SOURCES = ["inline", "spec"]


@functools.lru_cache(maxsize=1)
def spec_kernels():
    """The repository's kernel library, loaded once per session."""
    return kspec.load(str(SPECS))


# The seed documents' kernels, constructed exactly as the documents write them (kspec in place of cp).
def _inline(name: str):
    if name == "squared_diff":
        return kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff")
    if name == "squared_diff_generic":
        return kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "squared_diff_generic")
    if name == "squared_diff_generic_body":
        return kspec.ElementwiseKernel(
            "T x, T y",
            "T z",
            """
                T diff = x - y;
                z = diff * diff;
            """,
            "squared_diff_generic",
        )
    if name == "squared_diff_super_generic":
        return kspec.ElementwiseKernel("X x, Y y", "Z z", "z = (x - y) * (x - y)", "squared_diff_super_generic")
    if name == "add_reverse":
        return kspec.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[_ind.size() - i - 1]", "add_reverse")
    if name == "l2norm":
        return kspec.ReductionKernel(
            "T x",  # input params
            "T y",  # output params
            "x * x",  # map
            "a + b",  # reduce
            "y = sqrt(a)",  # post-reduction map
            "0",  # identity value
            "l2norm",  # kernel name
        )
    if name == "clipped_relu":
        return kspec.ElementwiseKernel(
            "float64 x, float64 cap",  # input params
            "float64 y",  # output param
            "y = min(max(x, 0.0), cap)",  # CUDA C body
            "clipped_relu",  # kernel name
        )
    if name == "l2_norm_squared":
        return kspec.ReductionKernel(
            "float64 x",  # input
            "float64 y",  # output
            "x * x",  # map expression
            "a + b",  # reduce expression
            "y = a",  # post-map (assign result)
            "0",  # identity value
            "l2_norm_sq",  # kernel name
        )
    if name == "abs_squared":
        return kspec.ElementwiseKernel(
            "complex128 z", "float64 mag2", "mag2 = z.real() * z.real() + z.imag() * z.imag()", "abs_squared"
        )
    raise AssertionError(name)


def kernel(source: str, name: str):
    """The kernel `name`: built inline as the seed documents do, or the spec file's kernel of that name."""
    if source == "inline":
        return _inline(name)
    k = getattr(spec_kernels(), name)
    expected = kspec.ReductionKernel if name in ("l2norm", "l2_norm_squared") else kspec.ElementwiseKernel
    assert isinstance(k, expected), f"spec kernel {name} is a {type(k).__name__}"
    return k


# -- seed 002: the user-defined kernels guide --------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_squared_diff_broadcast(xp, source):
    squared_diff = kernel(source, "squared_diff")
    x = xp.arange(10, dtype=np.float32).reshape(2, 5)
    y = xp.arange(5, dtype=np.float32)
    z = squared_diff(x, y)
    assert isinstance(z, xp.ndarray)
    assert z.dtype == np.float32 and z.shape == (2, 5)
    np.testing.assert_array_equal(xp.asnumpy(z), [[0.0, 0.0, 0.0, 0.0, 0.0], [25.0, 25.0, 25.0, 25.0, 25.0]])


@pytest.mark.parametrize("source", SOURCES)
def test_squared_diff_with_scalar(xp, source):
    squared_diff = kernel(source, "squared_diff")
    x = xp.arange(10, dtype=np.float32).reshape(2, 5)
    z = squared_diff(x, 5)
    assert isinstance(z, xp.ndarray) and z.dtype == np.float32 and z.shape == (2, 5)
    np.testing.assert_array_equal(xp.asnumpy(z), [[25.0, 16.0, 9.0, 4.0, 1.0], [0.0, 1.0, 4.0, 9.0, 16.0]])


@pytest.mark.parametrize("source", SOURCES)
def test_squared_diff_explicit_output(xp, source):
    squared_diff = kernel(source, "squared_diff")
    x = xp.arange(10, dtype=np.float32).reshape(2, 5)
    y = xp.arange(5, dtype=np.float32)
    z = xp.empty((2, 5), dtype=np.float32)
    result = squared_diff(x, y, z)
    assert result is z
    np.testing.assert_array_equal(xp.asnumpy(z), [[0.0, 0.0, 0.0, 0.0, 0.0], [25.0, 25.0, 25.0, 25.0, 25.0]])


GENERIC_DTYPES = ["float16", "float32", "float64", "int32", "int64"]  # the spec file's instantiations (less bfloat16)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    "name, dtype",
    [("squared_diff_generic", d) for d in GENERIC_DTYPES]
    + [("squared_diff_generic_body", d) for d in ("float32", "float64")],
)
def test_squared_diff_generic(xp, source, name, dtype):
    squared_diff_generic = kernel(source, name)
    x = xp.arange(10, dtype=dtype).reshape(2, 5)
    y = xp.arange(5, dtype=dtype)
    z = squared_diff_generic(x, y)
    assert isinstance(z, xp.ndarray) and z.dtype == np.dtype(dtype) and z.shape == (2, 5)
    np.testing.assert_array_equal(xp.asnumpy(z), np.array([[0] * 5, [25] * 5], dtype=dtype))
    # a scalar converts to the placeholder type bound by the array
    z = squared_diff_generic(x, 5)
    assert z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(xp.asnumpy(z), np.array([[25, 16, 9, 4, 1], [0, 1, 4, 9, 16]], dtype=dtype))
    # explicit output
    out = xp.empty((2, 5), dtype=dtype)
    assert squared_diff_generic(x, y, out) is out
    np.testing.assert_array_equal(xp.asnumpy(out), np.array([[0] * 5, [25] * 5], dtype=dtype))


def test_generic_kernel_rejects_mixed_dtypes(xp):
    squared_diff_generic = _inline("squared_diff_generic")
    x = xp.arange(5, dtype=np.float32)
    with pytest.raises(TypeError):
        squared_diff_generic(x, xp.arange(5, dtype=np.float64))


SUPER_GENERIC_CASES = {
    # (x dtype, y dtype, z dtype); "spec" only runs the spec file's instantiations
    "inline": [("float32", "float32", "float32"), ("float32", "float32", "float64"), ("float32", "float64", "float64"),
               ("int32", "float32", "float64")],
    "spec": [("float32", "float32", "float32"), ("float32", "float64", "float64")],
}


@pytest.mark.parametrize(
    "source, types",
    [(s, t) for s in SOURCES for t in SUPER_GENERIC_CASES[s]],
    ids=lambda v: v if isinstance(v, str) else "-".join(v),
)
def test_squared_diff_super_generic_explicit_output(xp, source, types):
    squared_diff_super_generic = kernel(source, "squared_diff_super_generic")
    xt, yt, zt = types
    x = xp.arange(10, dtype=xt).reshape(2, 5)
    y = xp.arange(5, dtype=yt)
    z = xp.empty((2, 5), dtype=zt)
    assert squared_diff_super_generic(x, y, z) is z
    assert z.dtype == np.dtype(zt)
    np.testing.assert_array_equal(xp.asnumpy(z), np.array([[0] * 5, [25] * 5], dtype=zt))


def test_squared_diff_super_generic_needs_its_output(xp):
    # "this kernel requires the output argument explicitly specified": Z cannot be bound from the inputs
    squared_diff_super_generic = _inline("squared_diff_super_generic")
    x = xp.arange(10, dtype=np.float32).reshape(2, 5)
    y = xp.arange(5, dtype=np.float32)
    with pytest.raises(TypeError, match="Z"):
        squared_diff_super_generic(x, y)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_reverse(xp, source, dtype):
    add_reverse = kernel(source, "add_reverse")
    hx = np.arange(7, dtype=dtype)
    hy = np.arange(7, dtype=dtype) * 10
    z = add_reverse(xp.asarray(hx), xp.asarray(hy))
    assert isinstance(z, xp.ndarray) and z.dtype == np.dtype(dtype) and z.shape == (7,)
    np.testing.assert_array_equal(xp.asnumpy(z), hx + hy[::-1])
    # "y can be arbitrarily shaped and strided": a reversed view and a 2-d transposed y of the same size
    np.testing.assert_array_equal(xp.asnumpy(add_reverse(xp.asarray(hx), xp.asarray(hy)[::-1])), hx + hy)
    hx12 = np.arange(12, dtype=dtype)
    hy2 = np.arange(12, dtype=dtype).reshape(3, 4) * 100
    z = add_reverse(xp.asarray(hx12), xp.asarray(hy2).T)
    np.testing.assert_array_equal(xp.asnumpy(z), hx12 + hy2.T.ravel()[::-1])


@pytest.mark.parametrize("source", SOURCES)
def test_l2norm_axis1(xp, source):
    l2norm_kernel = kernel(source, "l2norm")
    x = xp.arange(10, dtype=np.float32).reshape(2, 5)
    y = l2norm_kernel(x, axis=1)
    assert isinstance(y, xp.ndarray) and y.dtype == np.float32 and y.shape == (2,)
    np.testing.assert_allclose(xp.asnumpy(y), np.array([5.477226, 15.9687195], dtype=np.float32), rtol=1e-6)


@pytest.mark.parametrize("source", SOURCES)
def test_l2norm_other_axes(xp, source):
    l2norm_kernel = kernel(source, "l2norm")
    h = np.arange(10, dtype=np.float64).reshape(2, 5)
    x = xp.asarray(h)
    np.testing.assert_allclose(xp.asnumpy(l2norm_kernel(x, axis=0)), np.sqrt((h * h).sum(axis=0)), rtol=1e-14)
    full = l2norm_kernel(x)
    assert full.shape == ()
    np.testing.assert_allclose(float(full), np.sqrt((h * h).sum()), rtol=1e-14)


# -- seed 004: the custom CUDA kernels tutorial ------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_clipped_relu(xp, source):
    clipped_relu = kernel(source, "clipped_relu")
    xp.random.seed(4)
    x = xp.random.randn(10_000_000)
    y = clipped_relu(x, 6.0)  # runs on the device (the document's GPU, or the CPU device)
    assert isinstance(y, xp.ndarray) and y.dtype == np.float64 and y.shape == (10_000_000,)
    hx = xp.asnumpy(x)
    np.testing.assert_array_equal(xp.asnumpy(y), np.minimum(np.maximum(hx, 0.0), 6.0))


@pytest.mark.parametrize("source", SOURCES)
def test_clipped_relu_matrix_with_scalar_cap(xp, source):
    # "if x has shape (1000, 1000) and cap is a scalar, CuPy broadcasts correctly"; scaled so the cap bites
    clipped_relu = kernel(source, "clipped_relu")
    hx = np.random.default_rng(5).standard_normal((1000, 1000)) * 4
    y = clipped_relu(xp.asarray(hx), 6.0)
    assert y.shape == (1000, 1000)
    expected = np.minimum(np.maximum(hx, 0.0), 6.0)
    assert (expected == 6.0).any() and (expected == 0.0).any()
    np.testing.assert_array_equal(xp.asnumpy(y), expected)
    # the cap may be an array that broadcasts too (a column of caps)
    caps = np.linspace(0.5, 8.0, 1000).reshape(1000, 1)
    np.testing.assert_array_equal(xp.asnumpy(clipped_relu(xp.asarray(hx), xp.asarray(caps))),
                                  np.minimum(np.maximum(hx, 0.0), caps))


@pytest.mark.parametrize("source", SOURCES)
def test_l2_norm_squared(xp, source):
    l2_norm_squared = kernel(source, "l2_norm_squared")
    xp.random.seed(6)
    x = xp.random.randn(10_000_000)
    result = l2_norm_squared(x)  # sum of squares on the device
    assert isinstance(result, xp.ndarray) and result.shape == () and result.dtype == np.float64
    norm = float(xp.sqrt(result))  # L2 norm
    hx = xp.asnumpy(x)
    np.testing.assert_allclose(norm, np.sqrt(np.dot(hx, hx)), rtol=1e-10)
    np.testing.assert_allclose(float(result), float(xp.sum(x * x)), rtol=1e-10)


@pytest.mark.parametrize("source", SOURCES)
def test_abs_squared(xp, source):
    abs2_kernel = kernel(source, "abs_squared")
    xp.random.seed(7)
    z = xp.random.randn(10_000_000) + 1j * xp.random.randn(10_000_000)
    assert z.dtype == np.complex128
    mag2_custom = abs2_kernel(z)  # no intermediate arrays
    mag2_standard = xp.abs(z) ** 2
    assert isinstance(mag2_custom, xp.ndarray) and mag2_custom.dtype == np.float64 and mag2_custom.shape == z.shape
    assert bool(xp.allclose(mag2_custom, mag2_standard))
    hz = xp.asnumpy(z)
    np.testing.assert_allclose(xp.asnumpy(mag2_custom), hz.real**2 + hz.imag**2, rtol=1e-14)


# -- the spec library ---------------------------------------------------------------------------------------


def test_load_one_spec_file(xp):
    kernels = kspec.load(str(SPECS / "elementwise.toml"))
    assert isinstance(kernels.squared_diff, kspec.ElementwiseKernel)
    x = xp.arange(10, dtype=np.float32).reshape(2, 5)
    np.testing.assert_array_equal(xp.asnumpy(kernels.squared_diff(x, 5)), [[25, 16, 9, 4, 1], [0, 1, 4, 9, 16]])
    reductions = kspec.load(str(SPECS / "reduction.toml"))
    assert isinstance(reductions.l2norm, kspec.ReductionKernel)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_spec_saxpy(xp, dtype):
    saxpy = spec_kernels().saxpy
    rng = np.random.default_rng(11)
    hx, hy = rng.standard_normal(1001).astype(dtype), rng.standard_normal(1001).astype(dtype)
    out = saxpy(2.5, xp.asarray(hx), xp.asarray(hy))
    assert out.dtype == np.dtype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(xp.asnumpy(out), 2.5 * hx.astype(np.float64) + hy, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_spec_relu(xp, dtype):
    relu = spec_kernels().relu
    hx = np.random.default_rng(12).standard_normal((33, 17)).astype(dtype)
    y = relu(xp.asarray(hx))
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(xp.asnumpy(y), np.maximum(hx, 0).astype(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_spec_clamp(xp, dtype):
    clamp = spec_kernels().clamp
    rng = np.random.default_rng(13)
    hx = (rng.standard_normal(500) * 10).astype(dtype)
    y = clamp(xp.asarray(hx), -3, 4)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(xp.asnumpy(y), np.clip(hx, -3, 4).astype(dtype))
