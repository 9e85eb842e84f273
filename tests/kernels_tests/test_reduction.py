"""kspec.ReductionKernel on both devices (the ``xp`` fixture: NumPy on kspec's CPU device, CuPy on a GPU),
against NumPy computed in float64 / complex128.

Every axis subset of a 4-d array with and without keepdims and out=; sizes around powers of two; short and
long rows; axis=0 of C-contiguous matrices; full reductions up to 10**7 elements; views; negative axes;
several inputs broadcast together; raw inputs over leading axes; reductions without identity; the
two-output argmax of the spec library; float16 with float32 accumulation, complex and integer sums; kspec
arrays (both devices), CuPy arrays and PyTorch tensors (GPU); zero-size inputs. GPU only (marked ``gpu``):
CuPy streams, PyTorch tensors. CPU device only: a raw input indexed out of bounds raises
``kspec.KernelIndexError``.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import numpy as np
import pytest

import kspec
from helpers.device_arrays import ArrayLibrary as Lib

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cp():
    """CuPy, for the GPU-only tests (each marked ``gpu``)."""
    return pytest.importorskip("cupy")


# -- helpers -------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def spec_kernels():
    return kspec.load(str(REPO / "specs"))


def rk(*args, **kwargs):
    return kspec.ReductionKernel(*args, **kwargs)


def sum_sq(**kwargs):
    """CuPy's guide's reduction without the sqrt: sum(x * x)."""
    return rk("T x", "T y", "x * x", "a + b", "y = a", "0", "sum_sq", **kwargs)


def plain_sum():
    return rk("T x", "T y", "x", "a + b", "y = a", "0", "plain_sum")


def max_no_identity():
    return rk("T x", "T y", "x", "a > b ? a : b", "y = a", None, "max_no_identity")


def rand(rng: np.random.Generator, shape, dtype, positive: bool = False) -> np.ndarray:
    """No zeros: magnitude uniform in [0.5, 2), random sign unless `positive`; complex: both parts so."""
    dt = np.dtype(dtype)

    def part():
        mag = rng.uniform(0.5, 2.0, size=shape)
        return np.asarray(mag if positive else mag * rng.choice([-1.0, 1.0], size=shape))

    if dt.kind == "c":
        return (part() + 1j * part()).astype(dt)
    return part().astype(dt)


def wide(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a


def axes_of(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % ndim for a in axes)


def check(actual, want, rtol, scale=None) -> None:
    """Close to `want` (float64 / complex128); `scale` (the same reduction of |terms|) bounds the absolute error
    where terms of both signs cancel."""
    actual, want = np.asarray(actual), np.asarray(want)
    assert actual.shape == want.shape, (actual.shape, want.shape)
    atol = 0.0 if scale is None else rtol * float(np.max(np.abs(scale), initial=0.0))
    np.testing.assert_allclose(wide(actual), want, rtol=rtol, atol=atol)


def sum_rtol(n: int) -> float:
    """float32 sums of n positive terms: ~1e-5 up to 10**6 terms (a little more for the longest), 1e-4 beyond."""
    return 1e-5 if n <= 2**17 else 3e-5 if n <= 2**21 else 1e-4


# -- every axis subset of a 4-d array --------------------------------------------------------------------------

SHAPE4 = (5, 6, 7, 33)
AXES4 = [None] + [c for r in range(5) for c in itertools.combinations(range(4), r)]


@pytest.mark.parametrize("with_out", [False, True], ids=["alloc", "out"])
@pytest.mark.parametrize("keepdims", [False, True], ids=["drop", "keepdims"])
@pytest.mark.parametrize("axis", AXES4, ids=str)
def test_sum_of_squares_every_axis_subset(xp, axis, keepdims, with_out):
    rng = np.random.default_rng(300)
    h = rand(rng, SHAPE4, np.float32)
    x = xp.asarray(h)
    want = np.asarray(np.sum(wide(h) ** 2, axis=axis, keepdims=keepdims))
    k = sum_sq()
    if with_out:
        out = xp.full(want.shape, np.nan, np.float32)
        result = k(x, axis=axis, keepdims=keepdims, out=out)
        assert result is out
    else:
        result = k(x, axis=axis, keepdims=keepdims)
        assert isinstance(result, xp.ndarray) and result.dtype == np.float32
    assert result.shape == want.shape
    check(xp.asnumpy(result), want, 1e-5)


def test_positional_output(xp):
    rng = np.random.default_rng(301)
    h = rand(rng, (40, 50), np.float32)
    out = xp.empty(40, np.float32)
    assert sum_sq()(xp.asarray(h), out, axis=1) is out
    check(xp.asnumpy(out), (wide(h) ** 2).sum(axis=1), 1e-5)
    out = xp.empty((1, 50), np.float32)
    assert sum_sq()(xp.asarray(h), out, axis=0, keepdims=True) is out
    check(xp.asnumpy(out), (wide(h) ** 2).sum(axis=0, keepdims=True), 1e-5)


def test_output_both_positional_and_keyword_is_refused(xp):
    x = xp.ones((4, 5), np.float32)
    with pytest.raises(ValueError):
        sum_sq()(x, xp.empty(4, np.float32), axis=1, out=xp.empty(4, np.float32))


def test_bad_axes(xp):
    x = xp.ones((4, 5), np.float32)
    with pytest.raises(ValueError):
        sum_sq()(x, axis=2)
    with pytest.raises(ValueError):
        sum_sq()(x, axis=-3)
    with pytest.raises(ValueError):
        sum_sq()(x, axis=(0, 0))
    with pytest.raises(ValueError):
        sum_sq()(x, axis=(1, -1))


# -- sizes and layouts ---------------------------------------------------------------------------------------

FULL_SIZES = [1, 2, 31, 32, 33, 1023, 1024, 1025, 65535, 65536, 65537]


@pytest.mark.parametrize("n", FULL_SIZES)
def test_full_reduction_sizes(xp, n):
    rng = np.random.default_rng(310 + FULL_SIZES.index(n))
    h = rand(rng, (n,), np.float32)
    result = sum_sq()(xp.asarray(h))
    assert isinstance(result, xp.ndarray) and result.shape == ()
    check(xp.asnumpy(result), np.sum(wide(h) ** 2), 1e-5)
    check(xp.asnumpy(sum_sq()(xp.asarray(h), axis=0)), np.sum(wide(h) ** 2), 1e-5)


@pytest.mark.parametrize("n", [1, 2**20 + 3, 10**7])
def test_full_reduction_large(xp, n):
    rng = np.random.default_rng(320)
    h = rand(rng, (n,), np.float32)
    result = sum_sq()(xp.asarray(h))
    assert result.shape == ()
    check(xp.asnumpy(result), np.sum(wide(h) ** 2), sum_rtol(n))
    h64 = h.astype(np.float64)
    check(xp.asnumpy(sum_sq()(xp.asarray(h64))), np.sum(h64**2), 1e-12)


@pytest.mark.parametrize(
    ("shape", "axis", "dtype"),
    [
        ((16, 64, 64, 8), (0, 1, 2), np.float32),  # NHWC statistics: rows shared by each warp, split
        ((16, 64, 64, 8), (0, 1, 2), np.float64),
        ((8, 32, 32, 16), (0, 1, 2), np.float32),
        ((4, 64, 32, 512), 1, np.float32),  # a middle axis over many adjacent outputs: vectorised cols lanes
        ((8, 64, 16, 128), 2, np.float32),
        ((3, 40, 5, 36), 1, np.float32),  # 180 outputs a row: no 16-byte lanes for every tile
    ],
    ids=str,
)
def test_one_reduced_dim_over_adjacent_outputs(xp, shape, axis, dtype):
    """Layouts whose reduced axes merge into one, outputs adjacent in memory (kspec/kernels/planning/_reduction_cols.py:
    the runtime-rank cols entry on the dim as (R, 1), its warps shared between rows or its lanes vectorised)."""
    rng = np.random.default_rng(345)
    h = rand(rng, shape, dtype)
    axes = (axis,) if isinstance(axis, int) else axis
    n = int(np.prod([shape[a] for a in axes]))
    result = sum_sq()(xp.asarray(h), axis=axis)
    check(xp.asnumpy(result), (wide(h) ** 2).sum(axis=axis), sum_rtol(n) if dtype == np.float32 else 1e-12)
    sliced = xp.asarray(h)[..., : shape[-1] // 2]  # every row's second half skipped: not one row after another
    check(xp.asnumpy(sum_sq()(sliced, axis=axis)), (wide(h[..., : shape[-1] // 2]) ** 2).sum(axis=axis),
          sum_rtol(n) if dtype == np.float32 else 1e-12)  # fmt: skip


@pytest.mark.parametrize("shape", [(1000, 1), (3000, 16), (777, 1000), (3, 10**6), (70_000, 33)], ids=str)
def test_rows(xp, shape):
    rng = np.random.default_rng(330)
    h = rand(rng, shape, np.float32)
    want = (wide(h) ** 2).sum(axis=1)
    for axis in (1, -1):
        result = sum_sq()(xp.asarray(h), axis=axis)
        assert result.shape == (shape[0],)
        check(xp.asnumpy(result), want, sum_rtol(shape[1]))


@pytest.mark.parametrize("shape", [(1000, 333), (4097, 64), (65537, 3), (7, 100_001), (2, 1)], ids=str)
def test_axis0_of_c_contiguous(xp, shape):
    rng = np.random.default_rng(340)
    h = rand(rng, shape, np.float32)
    result = sum_sq()(xp.asarray(h), axis=0)
    assert result.shape == (shape[1],)
    check(xp.asnumpy(result), (wide(h) ** 2).sum(axis=0), 1e-5)


@pytest.mark.parametrize("axis", [0, 1, None, (0, 1)], ids=str)
def test_transposed_input(xp, axis):
    rng = np.random.default_rng(350)
    h = rand(rng, (300, 517), np.float32)
    x = xp.asarray(h).T
    check(xp.asnumpy(sum_sq()(x, axis=axis)), (wide(h.T) ** 2).sum(axis=axis), 1e-5)


@pytest.mark.parametrize("axis", [0, 1, None], ids=str)
def test_sliced_input(xp, axis):
    rng = np.random.default_rng(351)
    h = rand(rng, (400, 301), np.float32)
    x = xp.asarray(h)[::2, 1::3]
    check(xp.asnumpy(sum_sq()(x, axis=axis)), (wide(h[::2, 1::3]) ** 2).sum(axis=axis), 1e-5)
    x = xp.asarray(h)[::-3, ::-1]
    check(xp.asnumpy(sum_sq()(x, axis=axis)), (wide(h[::-3, ::-1]) ** 2).sum(axis=axis), 1e-5)


@pytest.mark.parametrize("axis", [-1, -2, -3, (-1, -2), (0, -1), (-3, 1)], ids=str)
def test_negative_axes(xp, axis):
    rng = np.random.default_rng(352)
    h = rand(rng, (20, 30, 40), np.float32)
    for keepdims in (False, True):
        result = sum_sq()(xp.asarray(h), axis=axis, keepdims=keepdims)
        check(xp.asnumpy(result), (wide(h) ** 2).sum(axis=axis, keepdims=keepdims), 1e-5)


@pytest.mark.parametrize("axis", [1, 0, None], ids=str)
def test_several_inputs_broadcast(xp, axis):
    rng = np.random.default_rng(353)
    k = rk("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "weighted_sum")
    hx, hw = rand(rng, (300, 1001), np.float32), rand(rng, (1, 1001), np.float32)
    terms = wide(hx) * wide(hw)
    result = k(xp.asarray(hx), xp.asarray(hw), axis=axis)
    check(xp.asnumpy(result), terms.sum(axis=axis), 1e-5, scale=np.abs(terms).sum(axis=axis))
    hv = rand(rng, (1001,), np.float32)  # a 1-d w broadcasts the same way
    terms = wide(hx) * wide(hv)
    check(xp.asnumpy(k(xp.asarray(hx), xp.asarray(hv), axis=axis)), terms.sum(axis=axis), 1e-5,
          scale=np.abs(terms).sum(axis=axis))


def test_scalar_input(xp):
    rng = np.random.default_rng(354)
    k = rk("T x, T s", "T y", "x * s", "a + b", "y = a", "0", "scaled_sum")
    h = rand(rng, (64, 100), np.float64, positive=True)
    check(xp.asnumpy(k(xp.asarray(h), 2.5, axis=1)), (h * 2.5).sum(axis=1), 1e-12)


def test_map_uses_the_reduction_index(xp):
    # _J: the element's position along the reduced axes (C order over them for a C-contiguous input; for other
    # layouts CuPy and kspec order the reduced axes by stride, so only contiguous inputs are checked here)
    k = rk("T x", "int64 y", "(long long)_J * (long long)x", "a + b", "y = a", "0", "index_weighted",
           reduce_type="int64")
    h = np.random.default_rng(355).integers(1, 5, size=(6, 7, 8)).astype(np.int32)
    np.testing.assert_array_equal(xp.asnumpy(k(xp.asarray(h), axis=2)), (h * np.arange(8)).sum(axis=2))
    np.testing.assert_array_equal(xp.asnumpy(k(xp.asarray(h), axis=(0, 1))),
                                  (h.reshape(42, 8) * np.arange(42)[:, None]).sum(axis=0))
    np.testing.assert_array_equal(xp.asnumpy(k(xp.asarray(h))), (h.ravel() * np.arange(h.size)).sum())


def test_reduce_dims_false_gives_the_same_result(xp):
    rng = np.random.default_rng(356)
    h = rand(rng, (8, 30, 40), np.float32)
    for axis in (None, 0, 2, (1, 2), (0, 2)):
        want = (wide(h) ** 2).sum(axis=axis)
        for k in (sum_sq(), sum_sq(reduce_dims=False)):
            check(xp.asnumpy(k(xp.asarray(h), axis=axis)), want, 1e-5)
            check(xp.asnumpy(k(xp.asarray(h)[:, ::-1], axis=axis)), (wide(h[:, ::-1]) ** 2).sum(axis=axis), 1e-5)


@pytest.mark.gpu
def test_cupy_stream(cp):
    rng = np.random.default_rng(357)
    h = rand(rng, (512, 4096), np.float32)
    x = cp.asarray(h)
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    rows = sum_sq()(x, axis=1, stream=stream)
    full = sum_sq()(x, stream=stream)
    stream.synchronize()
    check(cp.asnumpy(rows), (wide(h) ** 2).sum(axis=1), 1e-5)
    check(cp.asnumpy(full), (wide(h) ** 2).sum(), 1e-5)


# -- raw inputs over the leading axes --------------------------------------------------------------------------


def _raw_weighted():
    return rk("T x, raw T w", "T y", "x * w[_J]", "a + b", "y = a", "0", "raw_weighted")


def test_raw_input_axis0(xp):
    rng = np.random.default_rng(360)
    hx, hw = rand(rng, (300, 50), np.float64, positive=True), rand(rng, (300,), np.float64, positive=True)
    result = _raw_weighted()(xp.asarray(hx), xp.asarray(hw), axis=0)
    check(xp.asnumpy(result), (hx * hw[:, None]).sum(axis=0), 1e-12)


def test_raw_input_axes_0_1(xp):
    rng = np.random.default_rng(361)
    hx, hw = rand(rng, (12, 20, 7), np.float64, positive=True), rand(rng, (240,), np.float64, positive=True)
    result = _raw_weighted()(xp.asarray(hx), xp.asarray(hw), axis=(0, 1))
    check(xp.asnumpy(result), (hx * hw.reshape(12, 20, 1)).sum(axis=(0, 1)), 1e-12)


def test_raw_input_with_trailing_axes_is_not_implemented(xp):
    x, w = xp.ones((4, 5), np.float64), xp.ones(5, np.float64)
    with pytest.raises(NotImplementedError):
        _raw_weighted()(x, w, axis=1)


def test_raw_input_out_of_bounds_raises_on_the_cpu_device(on_cpu_device):
    # a GPU would read past w; the CPU device names the kernel and the index
    k = rk("T x, raw T w", "T y", "x * w[_J + 1]", "a + b", "y = a", "0", "raw_weighted_past_end")
    x = np.ones((4, 5))
    with pytest.raises(kspec.KernelIndexError, match=r"raw_weighted_past_end.*index 4\b.*size 4"):
        k(x, np.ones(4), axis=0)
    check(k(x, np.arange(5.0), axis=0), np.full(5, 1.0 + 2 + 3 + 4), 1e-12)  # in bounds: it runs on


# -- axes that do not merge, at sizes that take each path ---------------------------------------------------
# (on an H200: cols split, cols, the two-dim rows path vectorised and not, and its split; the CPU device runs
# the same plans through its own entries)

UNMERGED = [
    ((64, 8, 32, 16), (0, 2)),  # 4 tiles of 32 outputs: the cols split
    ((4, 40, 5, 48), (0, 2)),  # cols, one pass
    ((8, 64, 8, 64), (1, 3)),  # two reduced dims, inner extent a multiple of 4: vector loads
    ((8, 63, 8, 61), (1, 3)),  # ... and not: scalar loads
    ((16, 2048, 2, 64), (1, 3)),  # few outputs, long rows: the split over the two-dim entry
    ((48, 5, 3, 36), (0, 3)),  # R K R after merging
    ((512, 6, 5, 16), (0, 3)),  # a block per row over two reduced dims, pieces of 4 vectors: 64 threads
    ((256, 6, 5, 48), (0, 3)),  # ... pieces of 12 vectors: 128 threads
]


@pytest.mark.parametrize("shape, axis", UNMERGED, ids=str)
def test_unmerged_axes(xp, shape, axis):
    rng = np.random.default_rng(310)
    h = rand(rng, shape, np.float32)
    x = xp.asarray(h)
    check(xp.asnumpy(sum_sq()(x, axis=axis)), np.sum(wide(h) ** 2, axis=axis), 1e-4)  # float32 sums of 2**17
    # no identity: every partial of a split must hold a value
    np.testing.assert_array_equal(xp.asnumpy(max_no_identity()(x, axis=axis)), h.max(axis=axis))


# -- no identity -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
def test_max_without_identity(xp, dtype, axis):
    rng = np.random.default_rng(370)
    if dtype == "int32":
        h = -rng.integers(1, 10**6, size=(37, 1001)).astype(np.int32)
    else:
        h = -rand(rng, (37, 1001), dtype, positive=True)  # all negative: an identity of 0 would show
    result = max_no_identity()(xp.asarray(h), axis=axis)
    np.testing.assert_array_equal(xp.asnumpy(result), np.asarray(h.max(axis=axis)))


def test_max_without_identity_single_element_rows(xp):
    h = -np.arange(1, 11, dtype=np.float32).reshape(10, 1)
    np.testing.assert_array_equal(xp.asnumpy(max_no_identity()(xp.asarray(h), axis=1)), h[:, 0])
    np.testing.assert_array_equal(xp.asnumpy(max_no_identity()(xp.asarray(h[:1]))), h[0, 0])


@pytest.mark.parametrize("shape, axis", [((0,), None), ((0,), 0), ((3, 0), 1), ((0, 5), 0), ((0, 5), None)], ids=str)
def test_max_without_identity_zero_size_raises(xp, shape, axis):
    with pytest.raises(ValueError, match="max_no_identity"):
        max_no_identity()(xp.empty(shape, np.float32), axis=axis)


# -- argmax: two outputs, a struct accumulator (spec library) ------------------------------------------------


def np_argmax(h: np.ndarray, axis):
    """Max and first index of it along the reduced axes (flattened in C order), as the spec defines."""
    axes = axes_of(axis, h.ndim)
    kept = [d for d in range(h.ndim) if d not in axes]
    t = h.transpose(kept + list(axes)).reshape([h.shape[d] for d in kept] + [-1])
    return t.max(axis=-1), t.argmax(axis=-1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)], ids=str)
def test_argmax_spec(xp, dtype, axis):
    argmax = spec_kernels().argmax
    assert isinstance(argmax, kspec.ReductionKernel)
    rng = np.random.default_rng(380)
    if dtype == "int32":
        h = rng.integers(-3, 4, size=(9, 40, 31)).astype(np.int32)  # many ties: the first index wins
    else:
        h = rng.standard_normal((9, 40, 31)).astype(dtype)
    result = argmax(xp.asarray(h), axis=axis)
    assert isinstance(result, tuple) and len(result) == 2  # all outputs (CuPy returns only the first)
    value, index = result
    want_value, want_index = np_argmax(h, axis)
    assert value.dtype == np.dtype(dtype) and index.dtype == np.int64
    assert value.shape == want_value.shape and index.shape == want_index.shape
    np.testing.assert_array_equal(xp.asnumpy(value), want_value)
    np.testing.assert_array_equal(xp.asnumpy(index), want_index)


def test_argmax_spec_transposed_input_and_outputs_given(xp):
    argmax = spec_kernels().argmax
    h = np.random.default_rng(381).standard_normal((300, 70)).astype(np.float32)
    x = xp.asarray(h).T  # (70, 300), reduce over its logical axis 1
    value, index = xp.empty(70, np.float32), xp.empty(70, np.int64)
    result = argmax(x, value, index, axis=1)
    assert result[0] is value and result[1] is index
    np.testing.assert_array_equal(xp.asnumpy(value), h.T.max(axis=1))
    np.testing.assert_array_equal(xp.asnumpy(index), h.T.argmax(axis=1))


# -- dtypes ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [1, 0, None], ids=str)
def test_float16_with_float32_accumulation(xp, axis):
    rng = np.random.default_rng(390)
    h = rand(rng, (32, 500), np.float16, positive=True)  # every sum stays below float16's 65504
    want = (wide(h) ** 2).sum(axis=axis)
    # inline: float16 in and out, a float32 accumulator (float16 accumulation would be far less accurate)
    k = rk("T x", "T y", "float(x) * float(x)", "a + b", "y = T(a)", "0", "half_sumsq_f32", reduce_type="float32")
    result = k(xp.asarray(h), axis=axis)
    assert result.dtype == np.float16
    check(xp.asnumpy(result), want, 1e-3)  # one float16 rounding of the float32 total
    # the spec library's sum_of_squares: float16 in, float32 out (U binds from the given output)
    out = xp.empty(np.shape(want), np.float32)
    assert spec_kernels().sum_of_squares(xp.asarray(h), axis=axis, out=out) is out
    check(xp.asnumpy(out), want, 1e-5)


def test_float16_accumulation_short_rows(xp):
    rng = np.random.default_rng(391)
    h = rand(rng, (500, 16), np.float16, positive=True)
    result = plain_sum()(xp.asarray(h), axis=1)
    assert result.dtype == np.float16
    check(xp.asnumpy(result), wide(h).sum(axis=1), 1e-2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sum_of_squares_spec_same_type(xp, dtype):
    rng = np.random.default_rng(392)
    h = rand(rng, (30, 999), dtype)
    out = xp.empty(30, dtype)
    assert spec_kernels().sum_of_squares(xp.asarray(h), axis=1, out=out) is out
    check(xp.asnumpy(out), (wide(h) ** 2).sum(axis=1), 1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("axis", [1, 0, None], ids=str)
def test_complex_sums(xp, dtype, axis):
    rng = np.random.default_rng(393)
    h = rand(rng, (100, 1000), dtype)
    result = plain_sum()(xp.asarray(h), axis=axis)
    assert result.dtype == np.dtype(dtype)
    want = wide(h).sum(axis=axis)
    scale = np.abs(wide(h)).sum(axis=axis)
    check(xp.asnumpy(result), want, 1e-5 if dtype == "complex64" else 1e-12, scale=scale)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32"])
@pytest.mark.parametrize("axis", [1, 0, None, (0, 1)], ids=str)
def test_integer_sums_are_exact(xp, dtype, axis):
    rng = np.random.default_rng(394)
    bound = {"int32": 1000, "int64": 2**40, "uint32": 1000}[dtype]
    lo = 0 if dtype.startswith("u") else -bound
    h = rng.integers(lo, bound, size=(300, 1001)).astype(dtype)
    result = plain_sum()(xp.asarray(h), axis=axis)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(xp.asnumpy(result), np.asarray(h.sum(axis=axis, dtype=dtype)))


# -- array libraries and the spec library ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", [*(pytest.param(name, marks=pytest.mark.gpu) for name in ("cupy", "torch", "kspec")), "kspec-on-cpu"]
)
def test_libraries(request, name):
    if name == "kspec-on-cpu":  # kspec arrays in host memory, on kspec's CPU device
        request.getfixturevalue("on_cpu_device")
        name = "kspec"
    lib = Lib(name)
    rng = np.random.default_rng(400)
    h = rand(rng, (33, 1000), np.float32)
    x = lib.asarray(h)
    check(lib.get(sum_sq()(x, axis=1)), (wide(h) ** 2).sum(axis=1), 1e-5)
    full = sum_sq()(x)
    assert tuple(full.shape) == ()
    check(lib.get(full), (wide(h) ** 2).sum(), 1e-5)
    out = lib.asarray(np.zeros((1, 1000), np.float32))
    assert sum_sq()(x, axis=0, keepdims=True, out=out) is out
    check(lib.get(out), (wide(h) ** 2).sum(axis=0, keepdims=True), 1e-5)
    hw = rand(rng, (1, 1000), np.float32, positive=True)
    k = rk("T x, T w", "T y", "x * x * w", "a + b", "y = a", "0", "weighted_sumsq")
    check(lib.get(k(x, lib.asarray(hw), axis=1)), (wide(h) ** 2 * wide(hw)).sum(axis=1), 1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_l2norm_spec(xp, dtype):
    l2norm = spec_kernels().l2norm
    assert isinstance(l2norm, kspec.ReductionKernel)
    rng = np.random.default_rng(401)
    h = rand(rng, (50, 777), dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for axis in (1, 0, None, (0, 1)):
        result = l2norm(xp.asarray(h), axis=axis)
        assert result.dtype == np.dtype(dtype)
        check(xp.asnumpy(result), np.sqrt((wide(h) ** 2).sum(axis=axis)), tol)


# -- zero-size ------------------------------------------------------------------------------------------------


def test_zero_size_with_identity(xp):
    x = xp.empty((0, 5), np.float32)
    over0 = sum_sq()(x, axis=0)
    assert isinstance(over0, xp.ndarray) and over0.shape == (5,) and over0.dtype == np.float32
    np.testing.assert_array_equal(xp.asnumpy(over0), np.zeros(5, np.float32))
    over1 = sum_sq()(x, axis=1)
    assert over1.shape == (0,) and over1.dtype == np.float32
    full = sum_sq()(x)
    assert full.shape == ()
    assert float(full) == 0.0
    kept = sum_sq()(x, axis=0, keepdims=True)
    assert kept.shape == (1, 5)
    np.testing.assert_array_equal(xp.asnumpy(kept), np.zeros((1, 5), np.float32))
    out = xp.full(5, np.nan, np.float32)
    assert sum_sq()(x, axis=0, out=out) is out
    np.testing.assert_array_equal(xp.asnumpy(out), np.zeros(5, np.float32))


def test_repeated_calls_key_every_keyword_and_keep_every_check(xp):
    """The call path keys a reduction by its arguments' signature and its keyword values: repeats with other
    axes, keepdims, out= or a two-pass split give their own results, and the checks of a first call still
    run on a repeat (kspec/kernels/callpath/_call_path.py)."""
    k = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "repeat_keys")
    rng = np.random.default_rng(312)
    h = rng.uniform(0.5, 2.0, (6, 4, 5))
    x = xp.asarray(h)
    for _ in range(2):
        for axis in (None, 0, 2, -1, (0, 2), [0, 2], np.int64(1)):
            for keepdims in (False, True, np.True_, 0):
                want = h.sum(axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=bool(keepdims))
                np.testing.assert_allclose(xp.asnumpy(k(x, axis=axis, keepdims=keepdims)), want, rtol=1e-12)
        out = xp.empty(4)
        assert k(x, axis=(0, 2), out=out) is out
        assert k(x, out, axis=(0, 2)) is out
        np.testing.assert_allclose(xp.asnumpy(out), h.sum(axis=(0, 2)), rtol=1e-12)
        with pytest.raises(ValueError, match="cannot specify 'out' as both"):
            k(x, out, axis=(0, 2), out=out)
        with pytest.raises(ValueError, match="Out shape is mismatched|shape"):
            k(x, axis=0, out=out)
        with pytest.raises(ValueError, match="duplicate|repeated"):
            k(x, axis=(1, 1))
    long = rng.uniform(0.5, 2.0, 1 << 20)  # one output, a long row: the two-pass split with its workspace
    for _ in range(3):
        np.testing.assert_allclose(float(k(xp.asarray(long))), long.sum(), rtol=1e-10)
