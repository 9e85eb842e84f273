"""CuPy's indexer inside ElementwiseKernel bodies, run: kspec's CPU device (NumPy arrays, CI) and a GPU (CuPy arrays,
``@pytest.mark.gpu``) through the ``xp`` fixture, against NumPy.

An ndimage-style correlation reads ``_raw_y.shape()`` of its output and ``x.shape()`` / ``x.strides()`` of a raw input
with ``reduce_dims=False``; ``x[_ind.get()]`` indexes a raw input by the loop's n-d index; ``_raw_<operand>`` views
of transposed, reversed and broadcast operands (and of an output, written through it) index by flat C-order index
and by n-d index, and report CuPy's shapes and strides, with ``reduce_dims=False`` (every dim) and with CuPy's
merging; ``continue`` in bodies of every entry; ``i`` and ``_ind.size()`` mixed with other integer types.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kspec
from test_indexer import CORRELATE_2D


def ew(*args, **kwargs):
    return kspec.ElementwiseKernel(*args, **kwargs)


def filled(xp, shape, value=7.0, dtype=np.float64):
    return xp.asarray(np.full(shape, value, dtype=dtype))  # not zeros: a missed write shows


def correlate_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A 3 x 3 correlation with cells outside ``x`` counted as 0."""
    padded = np.pad(x.astype(np.float64), 1)
    rows, cols = x.shape
    out = np.zeros(x.shape)
    for a in range(3):
        for b in range(3):
            out += w[a, b] * padded[a : a + rows, b : b + cols]
    return out


# -- _raw_y.shape() with reduce_dims=False: ndimage's kernels ----------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "reversed-strided"])
@pytest.mark.parametrize("out_layout", ["c", "f"])
def test_ndimage_style_correlate_reads_the_outputs_shape(xp, layout, out_layout):
    k = ew("raw X x, raw W w", "Y y", CORRELATE_2D, "indexer_correlate", reduce_dims=False)
    rng = np.random.default_rng(1)
    shape = (37, 29)
    host = {
        "contiguous": lambda: rng.standard_normal(shape).astype(np.float32),
        "transposed": lambda: np.ascontiguousarray(rng.standard_normal(shape[::-1]).astype(np.float32)),
        "reversed-strided": lambda: rng.standard_normal((shape[0], 2 * shape[1])).astype(np.float32),
    }[layout]()
    weights = rng.standard_normal((3, 3))
    dx = xp.asarray(host)
    x = {"contiguous": lambda: dx, "transposed": lambda: dx.T, "reversed-strided": lambda: dx[::-1, ::2]}[layout]()
    xh = {"contiguous": host, "transposed": host.T, "reversed-strided": host[::-1, ::2]}[layout]
    y = filled(xp, shape) if out_layout == "c" else filled(xp, shape[::-1]).T
    k(x, xp.asarray(weights), y)
    np.testing.assert_allclose(xp.asnumpy(y), correlate_reference(xh, weights), rtol=1e-6, atol=1e-6)


def test_ndimage_style_correlate_in_3d_takes_sizes_from_the_output(xp):
    """A 3 x 1 x 1 window over a 3-d input: the coordinates come from i and _raw_y.shape(); every dim is kept,
    extent-1 ones too (the static rank-3 entry)."""
    body = """
    const int ys1 = _raw_y.shape()[1], ys2 = _raw_y.shape()[2], xs0 = x.shape()[0];
    int c = i; const int k2 = c % ys2; c /= ys2; const int k1 = c % ys1; const int k0 = c / ys1;
    Y s = 0;
    for (int d = -1; d <= 1; ++d)
      if (k0 + d >= 0 && k0 + d < xs0) s += x[((k0 + d) * ys1 + k1) * ys2 + k2];
    y = s;"""
    k = ew("raw X x", "Y y", body, "indexer_window3d", reduce_dims=False)
    host = np.random.default_rng(2).standard_normal((6, 1, 5))
    y = filled(xp, host.shape)
    k(xp.asarray(host), y)
    padded = np.pad(host, ((1, 1), (0, 0), (0, 0)))
    np.testing.assert_allclose(xp.asnumpy(y), padded[:-2] + padded[1:-1] + padded[2:], rtol=1e-12)


@pytest.mark.parametrize("out_layout", ["c", "f", "sliced"])
def test_a_views_only_body_takes_the_dense_entry_where_its_operands_are_c_contiguous(xp, out_layout):
    """A body that reads views only (ndimage's) has a dense entry besides the strided one: the planner launches it
    where every array operand is C-contiguous over the loop (each addressed by the flat index), the strided one
    otherwise (each element's index unravelled); the same results either way."""
    body = """
    const ptrdiff_t n1 = _raw_y.shape()[1], n2 = _raw_y.shape()[2];
    const ptrdiff_t c = i % n2, r = (i / n2) % n1;
    y = x[i] * 2 + (Y)(r * 10 + c);"""
    k = ew("raw X x", "Y y", body, "indexer_dense_or_strided", reduce_dims=False)
    shape = (3, 5, 7)
    host = np.random.default_rng(4).standard_normal(math.prod(shape)).astype(np.float32)
    y = {"c": lambda: filled(xp, shape, dtype=np.float32), "f": lambda: filled(xp, shape[::-1], dtype=np.float32).T,
         "sliced": lambda: filled(xp, (3, 5, 14), dtype=np.float32)[:, :, ::2]}[out_layout]()  # fmt: skip
    k(xp.asarray(host), y)
    loads = [e.what for e in kspec.compile_log() if e.kernel == "indexer_dense_or_strided"]
    entry = "dense" if out_layout == "c" else "strided"
    assert loads and f"indexer_dense_or_strided__{entry}<" in loads[-1], loads
    coords = np.indices(shape)
    want = host.reshape(shape) * 2 + (coords[1] * 10 + coords[2]).astype(np.float32)
    np.testing.assert_array_equal(xp.asnumpy(y), want)


# -- x[_ind.get()]: a raw input indexed by the loop's n-d index --------------------------------------------------

GATHER_BODY = "y = a + x[_ind.get()] * 10 + _ind.get()[0] * 1000 + _ind.get()[1]"


@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 6), (2, 3, 2, 5)], ids=["2d", "3d", "4d-runtime-rank"])
def test_ind_get_indexes_a_raw_input(xp, shape):
    k = ew("T a, raw T x", "T y", GATHER_BODY, "indexer_gather", reduce_dims=False)
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape[-1:])  # broadcast along every other dim
    x = rng.standard_normal(shape[::-1])  # given transposed: the raw view keeps its own strides
    y = filled(xp, shape)  # the output decides the loop's shape
    k(xp.asarray(a), xp.asarray(x).T, y)
    index = np.indices(shape)
    expected = a + x.T * 10 + index[0] * 1000 + index[1]
    np.testing.assert_allclose(xp.asnumpy(y), expected, rtol=1e-12)


def test_reduce_dims_makes_the_loop_cupys(xp):
    """With reduce_dims (the default) the loop has the dims CuPy's would: all operands C-contiguous -> one dim, so
    x[_ind.get()] takes a 1-d raw x; a broadcast operand in a 2-d loop keeps both dims, so it takes a 2-d one."""
    k = ew("T a, raw T x", "T y", "y = a + x[_ind.get()] * 10", "indexer_merged")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 6))
    flat = rng.standard_normal(24)
    np.testing.assert_allclose(xp.asnumpy(k(xp.asarray(a), xp.asarray(flat))), a + flat.reshape(4, 6) * 10, rtol=1e-12)
    row = rng.standard_normal(6)
    x2 = rng.standard_normal((4, 6))
    y = filled(xp, (4, 6))
    k(xp.asarray(row), xp.asarray(x2), y)
    np.testing.assert_allclose(xp.asnumpy(y), row + x2 * 10, rtol=1e-12)


def test_all_raw_with_size_and_a_0d_loop(xp):
    copy2 = ew("raw T x", "raw T y", "y[_ind.get()] = x[_ind.get()] * 2 + _ind.size()", "indexer_sized")
    x = np.arange(11, dtype=np.float64)
    y = filled(xp, 11)
    copy2(xp.asarray(x), y, size=11)
    np.testing.assert_array_equal(xp.asnumpy(y), x * 2 + 11)
    scalar = ew("T a", "T y", "y = a + _raw_a[_ind.get()] + _ind.size() + _raw_y.size()", "indexer_0d")
    got = scalar(xp.asarray(np.array(2.5)))
    assert got.shape == () and float(xp.asnumpy(got)) == 2.5 + 2.5 + 1 + 1


# -- _raw_<operand>: CuPy's views of non-raw operands -------------------------------------------------------------


def test_views_index_by_flat_and_nd_index(xp):
    """_raw_a of a transposed input read at the next element in C order over the loop; _raw_b of a broadcast row
    read at the element's own n-d index."""
    k = ew("T a, T b", "T y", "y = _raw_a[(i + 1) % _raw_a.size()] + _raw_b[_ind.get()] * 100", "indexer_views",
           reduce_dims=False)  # fmt: skip
    rng = np.random.default_rng(5)
    a = rng.standard_normal((9, 8))  # used as a.T: (8, 9), F-ordered
    b = rng.standard_normal(9)
    got = xp.asnumpy(k(xp.asarray(a).T, xp.asarray(b)))
    expected = np.roll(a.T.ravel(), -1).reshape(8, 9) + np.broadcast_to(b, (8, 9)) * 100
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_an_output_written_through_its_view(xp):
    k = ew("T a", "T y", "_raw_y[_ind.get()] = a * 3", "indexer_write_view", reduce_dims=False)
    a = np.random.default_rng(6).standard_normal((5, 6))
    y = filled(xp, (6, 5)).T  # F-ordered
    k(xp.asarray(a), y)
    np.testing.assert_allclose(xp.asnumpy(y), a * 3, rtol=1e-12)


LAYOUT_BODY = """
s0 = _raw_a.shape()[0]; s1 = _raw_a.shape()[1];
ta0 = _raw_a.strides()[0]; ta1 = _raw_a.strides()[1];
tb0 = _raw_b.strides()[0]; tb1 = _raw_b.strides()[1];
n = _ind.size()"""


def _layout(xp, k, a, b):
    outs = k(xp.asarray(a), xp.asarray(b))
    return tuple(int(xp.asnumpy(o).ravel()[0]) for o in outs)


def test_views_report_cupys_shape_and_strides(xp):
    names = "int64 s0, int64 s1, int64 ta0, int64 ta1, int64 tb0, int64 tb1, int64 n"
    keep = ew("T a, T b", names, LAYOUT_BODY, "indexer_layout_kept", reduce_dims=False)
    a = np.zeros((3, 4))
    b = np.zeros(4)
    # every dim kept: C order, byte strides, 0 along the broadcast dim
    assert _layout(xp, keep, a, b) == (3, 4, 32, 8, 0, 8, 12)
    merge = ew("T a, T b", names, LAYOUT_BODY, "indexer_layout_merged")
    # CuPy's merging: (2, 3, 4) with a broadcast (3, 4) -> (2, 12); a C-contiguous, b 0 along dim 0
    assert _layout(xp, merge, np.zeros((2, 3, 4)), np.zeros((3, 4))) == (2, 12, 96, 8, 0, 8, 24)
    # a 2-d loop with a broadcast operand keeps its dims, as CuPy's does
    assert _layout(xp, merge, a, b) == (3, 4, 32, 8, 0, 8, 12)


# -- continue, i and _ind.size() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "broadcast", "transposed"])
@pytest.mark.parametrize("indexed", [False, True])
def test_continue_leaves_the_output_as_it_was(xp, layout, indexed):
    """`continue` skips the rest of an element's body in every entry (contiguous with vectors, strided, tiled; the
    indexed one): its output keeps what it held, as in CuPy, where outputs are references into memory."""
    body = "if (x < 0) continue; y = x * 2" + (" + _ind.get()[0] * 0" if indexed else "")
    k = ew("T x", "T y", body, f"indexer_continue_{int(indexed)}")
    rng = np.random.default_rng(7)
    shape = (48, 40)  # wide enough for the tiled entry
    host = {"contiguous": rng.standard_normal(shape), "broadcast": rng.standard_normal(shape[1]),
            "transposed": rng.standard_normal(shape[::-1])}[layout]  # fmt: skip
    x = xp.asarray(host).T if layout == "transposed" else xp.asarray(host)
    xh = host.T if layout == "transposed" else host
    y = filled(xp, shape)
    k(x, y)
    np.testing.assert_array_equal(xp.asnumpy(y), np.where(np.broadcast_to(xh, shape) < 0, 7.0, 2 * xh))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_i_and_ind_size_mix_with_other_integer_types(xp, dtype):
    """CuPy's label kernels: `Y j = i;`, `_ind.size()` compared and clamped against ptrdiff_t and Y values."""
    body = """
    Y j = i;
    const ptrdiff_t n = _ind.size();
    if (j == (Y)(n - 1)) { y[i] = -1; continue; }
    y[i] = (Y)min(i + 1, _ind.size() - 1) + (_ind.size() != n ? 1000 : 0);"""
    k = ew("", "raw Y y", body, "indexer_label_like")
    y = xp.asarray(np.zeros(10, dtype=dtype))
    k(y, size=10)
    np.testing.assert_array_equal(xp.asnumpy(y), [1, 2, 3, 4, 5, 6, 7, 8, 9, -1])


def test_window_with_ind_size_in_loop_prep(xp):
    """cupyx.scipy.signal's windows: `_ind.size()` in loop_prep and the body, `i` against it."""
    k = ew("", "float64 w", "w = (i != 0 && i != (_ind.size() - 1)) ? start + delta * i : 0.0", "indexer_window",
           loop_prep="const double delta { 2.0 / ( _ind.size() - 1 ) }; const double start = -1.0")  # fmt: skip
    w = filled(xp, 9)
    k(w)
    expected = np.linspace(-1, 1, 9)
    expected[[0, -1]] = 0.0
    np.testing.assert_allclose(xp.asnumpy(w), expected, rtol=1e-12, atol=1e-15)


def test_reduction_post_map_reads_in_ind_size(xp):
    rms = kspec.ReductionKernel("X x", "Y y", "x * x", "a + b", "y = a / _in_ind.size() * _out_ind.size()", "0",
                                "indexer_rms")  # fmt: skip
    host = np.random.default_rng(8).standard_normal((3, 10))
    got = rms(xp.asarray(host), xp.asarray(np.zeros(3)), axis=1)
    np.testing.assert_allclose(xp.asnumpy(got), (host * host).mean(axis=1), rtol=1e-12)


@pytest.mark.gpu
def test_ndimage_style_body_past_2_31_bytes_runs_64bit_with_its_static_rank():
    """An output of 2 GiB and 256 bytes: 64-bit offsets, the static rank-3 entry (the runtime-rank one wrote the
    index and the views to local memory per element: ndimage's 4 GiB volumes ran 21x slower than CuPy's)."""
    cp = pytest.importorskip("cupy")
    body = """
    const ptrdiff_t ys1 = _raw_y.shape()[1], ys2 = _raw_y.shape()[2];
    ptrdiff_t c = i; const ptrdiff_t k2 = c % ys2; c /= ys2; const ptrdiff_t k1 = c % ys1; const ptrdiff_t k0 = c / ys1;
    y = (Y)(k0 * 100 + k1 * 10) + x[k2 % x.size()] + (Y)(_ind.get()[0] * 1000);"""
    k = ew("raw X x", "Y y", body, "indexer_window3d_i64", reduce_dims=False)
    n = 2**26 + 16
    x = cp.arange(16, dtype=cp.float32)
    y = cp.full((2, 4, n), -1.0, dtype=cp.float32)
    k(x, y)
    loads = [e.what for e in kspec.compile_log() if e.kernel == "indexer_window3d_i64"]
    assert loads and "strided<long long, 3>" in loads[-1], loads
    along = (cp.arange(n) % 16).astype(cp.float32)
    for k0 in range(2):
        for k1 in range(4):
            assert bool(cp.array_equal(y[k0, k1], along + np.float32(k0 * 1100 + k1 * 10))), (k0, k1)


@pytest.mark.gpu
def test_indexed_body_past_2_32_elements_unravels_in_64_bits():
    """A loop of 2**32 + 64 elements: the 64-bit entry's index past what 32-bit division holds (below it, that entry
    divides in 32 bits: the test above), checked at the plane ends and a sample of elements between."""
    cp = pytest.importorskip("cupy")
    n = 2**30 + 16
    body = "y = (Y)((_ind.get()[0] * 5 + _ind.get()[1] * 3 + _ind.get()[2] + i / 3) & 255);"
    k = ew("", "Y y", body, "indexer_past_2_32_elements", reduce_dims=False)
    y = cp.zeros((2, 2, n), dtype=cp.uint8)
    k(y)
    loads = [e.what for e in kspec.compile_log() if e.kernel == "indexer_past_2_32_elements"]
    assert loads and "strided<long long, 3>" in loads[-1], loads
    picks = np.unique(np.concatenate([np.arange(8), n - 1 - np.arange(8), np.random.default_rng(3).integers(0, n, 4096)]))
    for k0 in range(2):
        for k1 in range(2):
            flat = (k0 * 2 + k1) * n + picks
            want = (k0 * 5 + k1 * 3 + picks + flat // 3) & 255
            assert np.array_equal(cp.asnumpy(y[k0, k1][cp.asarray(picks)]), want.astype(np.uint8)), (k0, k1)
