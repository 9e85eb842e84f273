"""kspec.fuse where CuPy's own fusion tests look, run on a device: results against NumPy for ``x[...] = v``,
views of arguments, nan reductions and ``clear_cache``, on kspec's CPU device (NumPy arrays, NumPy's routines)
and on a GPU (CuPy arrays, CuPy's routines). What only CuPy's routines do (``cupy.nanmax`` refusing to fuse,
keepdims under CuPy's fusion dispatch, ``cupy.get_array_module``) is GPU-only."""

from __future__ import annotations

import numpy as np
import pytest

import kspec


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_whole_array_assignment_writes_the_argument(xp, dtype, value):
    @kspec.fuse
    def fill(x):
        x[:] = value
        return x

    x = xp.arange(12, dtype=dtype).reshape(3, 4)
    out = fill(x)
    assert out is x
    np.testing.assert_array_equal(xp.asnumpy(x), np.full((3, 4), value, dtype))


def test_ellipsis_assignment_of_a_broadcast_traced_value(xp):
    @kspec.fuse
    def f(x, y):
        x[...] = y * 2.5

    x, y = xp.zeros((3, 4), xp.int32), xp.arange(4, dtype=xp.float64)
    f(x, y)
    want = np.zeros((3, 4), np.int32)
    want[...] = np.arange(4) * 2.5
    np.testing.assert_array_equal(xp.asnumpy(x), want)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("special", [np.inf, np.nan])
def test_where_with_a_new_axis_view_of_the_mask(xp, dtype, special):
    @kspec.fuse
    def f(points, mask):
        return xp.where(mask[:, xp.newaxis], special, points)

    rng = np.random.default_rng(3)
    points = rng.random((256, 2)).astype(dtype)
    mask = rng.random(256) > 0.5
    got = f(xp.asarray(points), xp.asarray(mask))
    want = np.where(mask[:, np.newaxis], special, points)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(xp.asnumpy(got), want)


def test_slice_and_int_views_of_arguments(xp):
    @kspec.fuse
    def f(x, y):
        return x[::-1, 1:] * y[0]

    x, y = np.arange(12.0).reshape(3, 4), np.arange(6.0).reshape(2, 3)
    got = f(xp.asarray(x), xp.asarray(y))
    np.testing.assert_array_equal(xp.asnumpy(got), x[::-1, 1:] * y[0])


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmax", "nanmin"])
@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
@pytest.mark.parametrize("axis", [None, 1])
def test_nan_reductions(xp, name, dtype, axis):
    # on a GPU: cupy.nansum / nanprod go through CuPy's fusion dispatch; cupy.nanmax / nanmin do not fuse (in
    # cupy.fuse neither: they branch on their result), numpy's do. On the CPU device xp is NumPy throughout.
    routine = getattr(xp if name in ("nansum", "nanprod") else np, name)

    @kspec.fuse
    def f(x):
        return routine(x, axis=axis)

    rng = np.random.default_rng(5)
    x = (rng.random((4, 30)) * 2 + 0.5).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[rng.random(x.shape) < 0.2] = np.nan
    got = f(xp.asarray(x))
    want = getattr(np, name)(x, axis=axis)
    assert got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(xp.asnumpy(got), want, rtol=1e-5)


def test_numpy_nan_reductions_on_device_arrays(xp):
    @kspec.fuse
    def f(x):
        return np.nansum(x, axis=0), np.nanmax(x)

    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.0]])
    total, top = f(xp.asarray(x))
    np.testing.assert_array_equal(xp.asnumpy(total), np.nansum(x, axis=0))
    assert float(top) == 3.0


@pytest.mark.gpu
def test_cupy_nanmax_does_not_fuse_and_says_what_does(cp):
    @kspec.fuse
    def f(x):
        return cp.nanmax(x)

    with pytest.raises(TypeError, match="Python scalar") as info:
        f(cp.arange(4.0))
    assert "numpy.nanmax" in "".join(getattr(info.value, "__notes__", []))


@pytest.mark.gpu
def test_keepdims_next_to_a_routine_that_needs_cupys_dispatch(cp):
    # under CuPy's fusion dispatch (which cupy.nansum needs) CuPy refuses keepdims, as cupy.fuse does; the
    # array method traces without it
    @kspec.fuse
    def refused(x):
        return cp.amax(x, axis=0, keepdims=True) + cp.nansum(x)

    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(NotImplementedError, match="keepdims") as info:
        refused(cp.asarray(x))
    assert "x.max(keepdims=True)" in "".join(getattr(info.value, "__notes__", []))


def test_keepdims_reduction_next_to_a_nansum(xp):
    # on a GPU, cupy.nansum runs under CuPy's fusion dispatch; the array method's keepdims traces beside it
    @kspec.fuse
    def f(x):
        return x.max(axis=0, keepdims=True) + xp.nansum(x)

    x = np.arange(12.0).reshape(3, 4)
    got = f(xp.asarray(x))
    np.testing.assert_allclose(xp.asnumpy(got), x.max(axis=0, keepdims=True) + x.sum())


@pytest.mark.gpu
def test_get_array_module_inside_a_fused_function_is_cupy(cp):
    seen = []

    @kspec.fuse
    def f(x):
        seen.append(cp.get_array_module(x))
        return x + 1

    np.testing.assert_array_equal(f(cp.arange(3)).get(), [1, 2, 3])
    assert seen == [cp]
    assert cp.get_array_module(np.arange(3)) is np  # untouched outside


def test_clear_cache_then_call(xp):
    traced = []

    @kspec.fuse
    def f(x, y):
        traced.append(1)
        return x - y * 2

    x = xp.arange(9, dtype=xp.int16).reshape(3, 3)
    f.clear_cache()
    first = xp.asnumpy(f(x, x))
    f.clear_cache()
    second = xp.asnumpy(f(x, x))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(second, np.arange(9, dtype=np.int16).reshape(3, 3) * -1)
    assert len(traced) == 2


def test_ufunc_where_with_out(xp):
    @kspec.fuse
    def f(x, y, m):
        np.add(x, y, out=x, where=m)

    x, y, m = np.arange(6.0), np.full(6, 10.0), np.arange(6) % 2 == 0
    xd = xp.asarray(x)
    f(xd, xp.asarray(y), xp.asarray(m))
    np.add(x, y, out=x, where=m)
    np.testing.assert_array_equal(xp.asnumpy(xd), x)


def test_out_of_range_axis_on_the_device_is_numpy_axis_error(xp):
    f = kspec.fuse(lambda x: xp.sum(x, axis=2))
    with pytest.raises(np.exceptions.AxisError):
        f(xp.zeros((3, 4)))


def test_a_ufunc_of_python_numbers_alone_inside_a_fused_function(xp):
    # cupyx.scipy.signal's cspline1d: _hc(0, cs, rho, omega) reaches cupy.greater(k, -1) with k the Python int 0
    @kspec.fuse
    def gated(k, scale):
        return scale * (2.0 ** k) * xp.greater(k, -1) + xp.add(k, 1.5)

    scale = xp.asarray(np.array([0.5, 2.0]))
    for k in (0, -3, 2):
        want = np.array([0.5, 2.0]) * (2.0 ** k) * np.greater(k, -1) + np.add(k, 1.5)
        np.testing.assert_allclose(xp.asnumpy(gated(k, scale)), want)
