"""The layouts of issue 17 on a GPU, against NumPy: the tiled elementwise entry (transposed inputs and
outputs, mixed layouts, sizes that are not multiples of the tile, 3-d loops, bodies that read their output
or use ``i``) and the two-pass reduction over reduced axes that do not merge (4-d over (1, 3), (0, 2),
(1, 2, 3), keepdims, no identity).

Every call checks which plan it took (kspec.kernels.planning._plan), so that a silent fallback to another entry
cannot make these tests pass without testing the new code. Outputs are poisoned with NaN first.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._plan import plan_elementwise
from kspec.kernels.planning._reduction_plan import plan_reduction
from kspec.kernels.planning._reduction_strategy import reduction_strategy

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def sqd():
    return kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_layouts")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _entry(kernel, *args):
    nin = kernel.nin
    bound = bind(kernel.spec, args[:nin], args[nin:] or None)
    plan = plan_elementwise(kernel.spec, bound, kernel._specializer)
    return plan.variant.entry if plan.variant is not None else None


# A body that accumulates into its output and adds its flat index: an element visited twice or never shows.
ACCUMULATE = "z = z + x * y + (T)(i % 64)"


def _assert_accumulated(got, z0, a, perm, b, dtype, atol16):
    """``got`` (on the host) against ``z0 + a.transpose(perm) * b + (flat index % 64)`` in ``dtype``."""
    flat = (np.arange(z0.size) % 64).reshape(z0.shape).astype(dtype)
    ref = z0 + a.transpose(perm) * b + flat
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=2e-3 if dtype == "float16" else 1e-6,
                               atol=atol16 if dtype == "float16" else 1e-6)


def _poisoned(cp, shape, dtype, order="C"):
    out = cp.empty(shape, dtype=dtype, order=order)
    out.fill(np.nan if np.dtype(dtype).kind in "fc" else 0)
    return out


# -- tiled elementwise ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(64, 64), (1000, 777), (33, 65), (17, 1031), (2049, 40)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_transposed_input_against_a_contiguous_one(cp, sqd, shape, dtype, monkeypatch):
    import kspec.kernels.planning._entry_point as plan_module

    monkeypatch.setattr(plan_module, "TILED_MIN_FILL", 0.0)  # (33, 65) of float16 fills a quarter of its one step
    rng = _rng(1)
    a = rng.standard_normal(shape[::-1]).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype)
    x, y = cp.asarray(a).T, cp.asarray(b)  # x: transposed view, y: C-contiguous
    assert _entry(sqd, x, y) == "tiled"
    ref = (a.T.astype(np.float64) - b) ** 2
    got = sqd(x, y).get()
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=1e-2 if dtype == "float16" else 1e-6, atol=1e-3 if dtype == "float16" else 0)


@pytest.mark.parametrize("shape", [(256, 300), (31, 1000), (1025, 33)])
def test_transposed_output(cp, sqd, shape):
    rng = _rng(2)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    z = _poisoned(cp, shape, np.float32, order="F")  # column-major output, contiguous inputs
    assert _entry(sqd, cp.asarray(a), cp.asarray(b), z) == "tiled"
    sqd(cp.asarray(a), cp.asarray(b), z)
    np.testing.assert_allclose(z.get(), (a.astype(np.float64) - b) ** 2, rtol=1e-6)


def test_every_operand_transposed_and_x_dot_t_minus_x(cp, sqd):
    rng = _rng(3)
    a = rng.standard_normal((300, 300)).astype(np.float32)
    x = cp.asarray(a)
    z = _poisoned(cp, (300, 300), np.float32, order="F")
    assert _entry(sqd, x.T, x, z) == "tiled"
    sqd(x.T, x, z)
    np.testing.assert_allclose(z.get(), (a.T.astype(np.float64) - a) ** 2, rtol=1e-6)
    w = cp.asfortranarray(x)
    z2 = _poisoned(cp, (300, 300), np.float32, order="F")
    sqd(w, w.T.T, z2)  # all three column-major: tiled, each staged
    assert float(cp.abs(z2).max()) == 0.0


def test_mixed_broadcast_negative_strides_and_views(cp, sqd):
    rng = _rng(4)
    a = rng.standard_normal((500, 400)).astype(np.float32)
    r = rng.standard_normal(400).astype(np.float32)
    x = cp.asarray(a).T[::-1, 3:]  # transposed, reversed rows, sliced: (400, 497)
    y = cp.asarray(r)[:, None]  # a column broadcast along dim 0: stride 0 there, not staged
    assert _entry(sqd, x, y) == "tiled"
    got = sqd(x, y).get()
    np.testing.assert_allclose(got, (a.T[::-1, 3:].astype(np.float64) - r[:, None]) ** 2, rtol=1e-6)


@pytest.mark.parametrize("perm", [(0, 2, 1), (1, 2, 0), (2, 1, 0)])
def test_three_d_loops(cp, sqd, perm):
    rng = _rng(5)
    a = rng.standard_normal((6, 70, 45)).astype(np.float32)
    x = cp.asarray(a).transpose(perm)
    b = rng.standard_normal(x.shape).astype(np.float32)
    got = sqd(x, cp.asarray(b)).get()  # whichever entry the plan picks, the values are NumPy's
    np.testing.assert_allclose(got, (a.transpose(perm).astype(np.float64) - b) ** 2, rtol=1e-6)
    if perm == (0, 2, 1):  # a batch of transposes: planes of (45, 70) tiles
        assert _entry(sqd, x, cp.asarray(b)) == "tiled"


def test_body_sees_the_flat_c_order_index_and_reads_its_output(cp):
    k = kspec.ElementwiseKernel("T x", "T z", "z = z + x + (T)i", "accumulate_i")
    rng = _rng(6)
    a = rng.standard_normal((130, 97)).astype(np.float64)
    z0 = rng.standard_normal((97, 130)).astype(np.float64)
    z = cp.asarray(z0).T  # transposed output that the body reads
    x = cp.asarray(a)
    assert _entry(k, x, z) == "tiled"
    k(x, z)
    ref = z0.T + a + np.arange(a.size, dtype=np.float64).reshape(a.shape)
    np.testing.assert_allclose(z.get(), ref, rtol=1e-14)


@pytest.mark.parametrize(
    ("shape", "perm", "y_shape", "dtype", "block"),
    [
        ((64, 33, 128), (0, 1, 2), (64, 1, 128), "float32", None),  # inner vectors (a middle-axis broadcast)
        ((40, 300, 12), (0, 2, 1), None, "float64", None),  # chunks, a 3-dim walk, a partial last chunk
        ((7, 9, 11, 13), (3, 1, 0, 2), None, "float32", 128),  # chunks, a 4-dim walk, other blocks
        ((7, 9, 11, 13), (3, 1, 0, 2), None, "float32", 96),  # chunks of a block not a power of two: counted by division
        ((5000, 9), (1, 0), None, "float32", 1024),  # chunks, the static 2-dim walk
        ((3, 4, 5, 6, 7), (4, 3, 2, 1, 0), None, "float64", None),  # 5 dims: one element at a time
        ((100, 1001), (0, 1), (1001,), "float16", None),  # unaligned rows: chunks over inner-dense operands
        ((64, 33, 8), (0, 1, 2), (64, 33, 1), "int8", None),  # 1-byte rows of 8: half vectors, y one per row
        ((64, 33, 8), (0, 1, 2), (64, 1, 8), "int8", None),  # half vectors, y's row repeated along dim 1
        ((64, 33, 24), (0, 1, 2), (1, 33, 24), "int8", None),  # 24 = 3 half vectors
    ],
)
def test_strided_paths_visit_each_element_once(cp, shape, perm, y_shape, dtype, block):
    k = kspec.ElementwiseKernel("T x, T y", "T z", ACCUMULATE, "accumulate_strided")
    rng = _rng(21)
    a = rng.standard_normal(shape).astype(dtype)
    x = cp.asarray(a).transpose(perm)
    out_shape = x.shape
    b = rng.standard_normal(y_shape or out_shape).astype(dtype)
    y = cp.asarray(b)
    if y_shape == (1001,):  # one element off the vector alignment
        y = cp.asarray(rng.standard_normal(1002).astype(dtype))[1:]
        b = y.get()
    z0 = rng.standard_normal(out_shape).astype(dtype)
    z = cp.asarray(z0)
    assert _entry(k, x, y, z) == "strided"
    k(x, y, z, block_size=block)
    _assert_accumulated(z.get(), z0, a, perm, b, dtype, 2e-2)


@pytest.mark.parametrize(("shape", "dtype", "block"), [((1000, 263, 4, 8), "float16", None), ((500, 263, 4, 8), "float32", 128),
                                                    ((700, 263, 4, 8), "float32", 96)])  # chunks and runs divided, not shifted
def test_strided_runs_of_chunks_visit_each_element_once(cp, shape, dtype, block):
    # channels of 8 transposed to 4 (dim 1 too short for tiles): the strided entry, its blocks in runs of chunks, the
    # last run short and a partial chunk left to the scalar loop
    from kspec.kernels.planning._plan import EW_UNROLL

    k = kspec.ElementwiseKernel("T x, T y", "T z", ACCUMULATE, "accumulate_runs")
    rng = _rng(22)
    a = rng.standard_normal(shape).astype(dtype)
    x = cp.asarray(a).transpose(0, 1, 3, 2)
    b = rng.standard_normal(x.shape).astype(dtype)
    z0 = rng.standard_normal(x.shape).astype(dtype)
    y, z = cp.asarray(b), cp.asarray(z0)
    bound = bind(k.spec, (x, y), (z,))
    plan = plan_elementwise(k.spec, bound, k._specializer, block_size=block)
    chunks = plan.size // (EW_UNROLL * plan.block)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    assert plan.variant.entry == "strided" and plan.runs and chunks // 8 < plan.grid(sms) < chunks
    assert plan.size % (EW_UNROLL * plan.block) and chunks % -(-chunks // plan.grid(sms))  # a partial chunk, a short run
    k(x, y, z, block_size=block)
    _assert_accumulated(z.get(), z0, a, (0, 1, 3, 2), b, dtype, 3e-2)


@pytest.mark.parametrize(
    ("shape", "perm", "y_shape", "dtype"),
    [
        ((64, 33, 128), (0, 1, 2), (64, 1, 128), "float32"),  # inner vectors
        ((40, 300, 12), (0, 2, 1), None, "float64"),  # chunks, a 3-dim walk, a partial last chunk
        ((7, 9, 11, 13), (3, 1, 0, 2), None, "float32"),  # a 4-dim walk
        ((1000, 263, 4, 8), (0, 1, 3, 2), None, "float16"),  # runs of chunks
        ((3, 4, 5, 6, 7), (4, 3, 2, 1, 0), None, "float64"),  # 5 dims: one element at a time
    ],
)
def test_64_bit_launches_walk_in_32_bit_coordinates(cp, shape, perm, y_shape, dtype, monkeypatch):
    # the planner's 32-bit limit lowered, so that these loops take the 64-bit entry, which walks its chunks and
    # vectors in 32-bit coordinates (at most 2**32 elements) with 64-bit offsets
    import kspec.kernels.planning._plan as plan_module

    monkeypatch.setattr(plan_module, "INT32_LIMIT", 1000)
    k = kspec.ElementwiseKernel("T x, T y", "T z", ACCUMULATE, "accumulate_wide")
    rng = _rng(23)
    a = rng.standard_normal(shape).astype(dtype)
    x = cp.asarray(a).transpose(perm)
    b = rng.standard_normal(y_shape or x.shape).astype(dtype)
    z0 = rng.standard_normal(x.shape).astype(dtype)
    y, z = cp.asarray(b), cp.asarray(z0)
    plan = plan_elementwise(k.spec, bind(k.spec, (x, y), (z,)), k._specializer)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    assert plan.variant.entry == "strided" and plan.variant.index == "int64"
    assert (plan.grid(sms) * plan.block < plan.size) == (len(plan.extents) <= 4)  # chunks or vectors, else a thread each
    k(x, y, z)
    _assert_accumulated(z.get(), z0, a, perm, b, dtype, 3e-2)


def _wide_pattern(cp, rows, cols):
    """A (rows, cols) uint8 array holding (r * cols + c) % 241, filled a band of rows at a time."""
    base = cp.empty((rows, cols), cp.uint8)
    for start in range(0, rows, 1 << 12):
        r = cp.arange(start, min(start + (1 << 12), rows), dtype=cp.int64)[:, None]
        base[start:start + (1 << 12)] = (r * cols + cp.arange(cols, dtype=cp.int64)[None, :]) % 241
    return base


@pytest.mark.parametrize(("rows", "cols"), [(1 << 16, (1 << 15) + 1), ((1 << 16) + 3, 1 << 16)], ids=["2**31-bytes", "2**32-elements"])
def test_transposes_past_2_to_the_31_bytes(cp, rows, cols):
    # a uint8 transpose past 2**31 bytes: the 64-bit entry, its chunks walked in 32-bit coordinates; past 2**32
    # elements, one element a thread (the walk's coordinates would wrap)
    need = 3 * rows * cols
    free, _total = cp.cuda.runtime.memGetInfo()
    if free < need + (1 << 30):
        pytest.skip(f"needs {need / 2**30:.1f} GiB of free device memory, {free / 2**30:.1f} GiB free")
    k = kspec.ElementwiseKernel("uint8 x", "uint8 z", "z = x + (unsigned char)(i % 251)", "wide_transpose")
    pool = cp.get_default_memory_pool()
    try:
        base = _wide_pattern(cp, rows, cols)
        x = base.T
        plan = plan_elementwise(k.spec, bind(k.spec, (x,), None), k._specializer)
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        assert plan.variant.entry == "strided" and plan.variant.index == "int64"
        assert (plan.grid(sms) * plan.block < plan.size) == (plan.size < 2**32)
        z = k(x)
        step = 1 << 9  # output rows at a time: z[c, r] = (r * cols + c) % 241 + (c * rows + r) % 251
        for start in list(range(0, cols, step * 4)) + [cols - 7]:
            c = cp.arange(start, min(start + step, cols), dtype=cp.int64)[:, None]
            r = cp.arange(rows, dtype=cp.int64)[None, :]
            want = ((r * cols + c) % 241 + (c * rows + r) % 251).astype(cp.uint8)
            assert bool((z[start:start + step] == want).all()), f"wrong values in output rows from {start}"
            del c, r, want
    finally:
        base = x = z = None  # noqa: F841
        pool.free_all_blocks()


def test_inner_vectors_past_2_to_the_32_elements(cp):
    # a uint8 row broadcast over 2**32 + 3 * 2**16 elements: the 64-bit entry's inner vectors, their walk split in
    # 64 bits and moved in 32-bit coordinates
    rows, cols = (1 << 16) + 3, 1 << 16
    free, _total = cp.cuda.runtime.memGetInfo()
    if free < 2 * rows * cols + (2 << 30):
        pytest.skip(f"needs {2 * rows * cols / 2**30:.1f} GiB of free device memory, {free / 2**30:.1f} GiB free")
    k = kspec.ElementwiseKernel("uint8 x, uint8 y", "uint8 z", "z = x + y", "wide_row_broadcast")
    pool = cp.get_default_memory_pool()
    try:
        x = _wide_pattern(cp, rows, cols)
        y = (cp.arange(cols, dtype=cp.int64) % 7).astype(cp.uint8)
        plan = plan_elementwise(k.spec, bind(k.spec, (x, y), None), k._specializer)
        assert plan.variant.entry == "strided" and plan.variant.index == "int64" and plan.inner_dense
        z = k(x, y)
        for start in list(range(0, rows, 1 << 13)) + [rows - 5]:
            r = cp.arange(start, min(start + 512, rows), dtype=cp.int64)[:, None]
            c = cp.arange(cols, dtype=cp.int64)[None, :]
            want = ((r * cols + c) % 241 + c % 7).astype(cp.uint8)
            assert bool((z[start:start + 512] == want).all()), f"wrong values in rows from {start}"
            del r, c, want
    finally:
        x = y = z = None  # noqa: F841
        pool.free_all_blocks()


def test_two_outputs_one_transposed_and_a_scalar(cp):
    k = kspec.ElementwiseKernel("T x, T y, float32 s", "T u, T v", "u = x * s + y; v = x - y", "two_out")
    rng = _rng(7)
    a = rng.standard_normal((200, 150)).astype(np.float32)
    b = rng.standard_normal((150, 200)).astype(np.float32)
    x, y = cp.asarray(a), cp.asarray(b).T
    u = _poisoned(cp, (200, 150), np.float32)
    v = _poisoned(cp, (200, 150), np.float32, order="F")
    assert _entry(k, x, y, np.float32(2), u, v) == "tiled"
    k(x, y, np.float32(2.0), u, v)
    np.testing.assert_allclose(u.get(), a * 2 + b.T, rtol=1e-6)
    np.testing.assert_allclose(v.get(), a - b.T, rtol=1e-6)


def test_complex_and_integer_transposes(cp):
    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = x * y", "mul_layouts")
    rng = _rng(8)
    a = (rng.standard_normal((90, 70)) + 1j * rng.standard_normal((90, 70))).astype(np.complex64)
    np.testing.assert_allclose(k(cp.asarray(a).T, cp.asarray(a.T.copy())).get(), a.T * a.T, rtol=1e-5)
    n = rng.integers(-1000, 1000, (123, 45)).astype(np.int32)
    np.testing.assert_array_equal(k(cp.asarray(n).T, cp.asarray(n.T.copy())).get(), n.T * n.T)


# -- reductions over reduced dims that do not merge ------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "bool", "complex128"])
def test_every_permutation_of_a_4d_shape(cp, sqd, dtype):
    """Every permutation of odd, tile-straddling dims, each dtype size (1, 2, 4, 8, 16 bytes), against the same
    kernel on contiguous copies."""
    import itertools

    rng = _rng(7)
    shape = (3, 37, 18, 70)
    base = rng.standard_normal(shape) * 4
    base = base.astype(dtype) if dtype != "complex128" else (base + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype == "bool":
        base = base > 0
    for perm in itertools.permutations(range(4)):
        x = cp.asarray(base).transpose(perm)  # a permuted view
        y = cp.asarray(np.ascontiguousarray(base.transpose(perm))[::-1].copy())
        want = sqd(cp.ascontiguousarray(x), y).get()  # the same kernel on contiguous operands (no tile)
        got = sqd(x, y).get()
        np.testing.assert_array_equal(got, want, err_msg=f"perm {perm}")


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "float64"])
@pytest.mark.parametrize(
    "shape, widths",  # the tile width with steps of four tiles (1-, 2-byte types), of two (4-byte), of one (8-byte)
    [((2048, 16), (16, 16, 16)), ((16, 2048), (64, 64, 64)), ((24, 300), (32, 32, 32)), ((300, 24), (16, 16, 32)),
     ((100, 520), (32, 32, 32)), ((5, 999, 16), (16, 16, 16)), ((3, 16, 1001), (64, 64, 64)),
     ((7, 16, 16), (32, 32, 32)), ((2, 16, 40), (64, 64, 64)), ((2, 40, 16), (16, 16, 16)), ((2, 16, 17), (32, 32, 32)),
     ((3, 45, 70), (32, 64, 32)), ((9, 64, 16), (16, 16, 16)), ((5, 33, 200), (64, 64, 32)),
     ((37, 16, 16), (32, 32, 32)), ((5, 7, 20, 16), (32, 32, 32)), ((6, 5, 16, 48), (64, 64, 64)),
     ((11, 32, 32), (32, 32, 32)), ((300, 8), (8, 8, 8)), ((3, 200, 8), (8, 8, 8)), ((2, 100, 8), (8, 8, 8)),
     ((4, 130, 7), (8, 8, 8)), ((5, 40, 6), (8, 8, 8)),
     ((300, 4), (4, 4, 4)), ((3, 200, 3), (4, 4, 4)), ((5, 70, 2), (4, 4, 4)),
     ((5, 64, 32), (16, 16, 32)), ((4, 64, 64), (16, 32, 32)), ((3, 99, 72), (32, 16, 32)), ((2, 655, 81), (32, 32, 32))],
)
def test_short_dims_in_tiles(cp, sqd, shape, dtype, widths, monkeypatch):
    """A dim shorter than the tile's edge (16 under 2048: a permuted NHWC array of 16 channels), either way round,
    in tiles 16 wide along it (dim 0 short) or 16 high (dim 1 short), or 8 / 4 wide where dim 0 has at most 8 / 4
    (their columns swizzled, not padded: kspec/tile.cuh); planes of at most one tile, several to a
    step (consecutive along dim 2, never past its end: (5, 7, 20, 16)), extents that straddle tiles; steps turned
    the other way where that pads the plane a quarter less ((3, 99, 72) of 1- and 2-byte types and (2, 655, 81) of
    float32 in 32-wide tiles along dim 1, (5, 64, 32) in 16-wide ones along dim 0: kspec/tile.cuh's
    step_along_dim1). Every case takes the tiled entry here, however few of a step's slots it fills (the plan's
    threshold set to 0)."""
    import kspec.kernels.planning._entry_point as plan_module

    monkeypatch.setattr(plan_module, "TILED_MIN_FILL", 0.0)
    monkeypatch.setattr(plan_module, "NARROW_MIN_FILL", 0.0)
    monkeypatch.setattr(plan_module, "NARROW_FOLLOWED_MIN_FILL", 0.0)
    width = widths[{1: 0, 2: 0, 4: 1, 8: 2}[np.dtype(dtype).itemsize]]
    rng = _rng(8)
    perm = (*range(len(shape) - 2), len(shape) - 1, len(shape) - 2)
    a = (rng.standard_normal(tuple(shape[p] for p in perm)) * 8).astype(dtype)
    b = (rng.standard_normal(shape) * 8).astype(dtype)
    x, y = cp.asarray(a).transpose(perm), cp.asarray(b)
    bound = bind(sqd.spec, (x, y), None)
    plan = plan_elementwise(sqd.spec, bound, sqd._specializer)
    assert plan.variant.entry == "tiled" and plan.variant.vec == width
    z = _poisoned(cp, shape, dtype)
    sqd(x, y, z)
    np.testing.assert_array_equal(z.get(), sqd(cp.ascontiguousarray(x), y).get())
    w = _poisoned(cp, shape[::-1], dtype).transpose(tuple(range(len(shape)))[::-1])  # a transposed output too
    sqd(x, y, w)
    np.testing.assert_array_equal(w.get(), z.get())


@pytest.mark.parametrize(
    "dtype, shape",
    [("float32", (3, 40, 70, 2)), ("float16", (2, 37, 130, 3)), ("int8", (4, 50, 130, 5)), ("float16", (3, 17, 300, 6)),
     ("float32", (2, 64, 64, 3))],
)
def test_short_inner_dim_outside_the_tiles(cp, sqd, dtype, shape):
    """z's short rows (2-6 elements) from x stored with another axis innermost, two dims away (x transposed (0, 3,
    2, 1)): the plan moves the rows outside tiles over the two dims beyond them (kspec/kernels/planning/_loop_order.py,
    short_dim_outward); every element right, extents that straddle tiles, the rows' planes written in parts."""
    rng = _rng(10)
    perm = (0, 3, 2, 1)
    a = (rng.standard_normal(tuple(shape[p] for p in perm)) * 8).astype(dtype)
    b = (rng.standard_normal(shape) * 8).astype(dtype)
    x, y = cp.asarray(a).transpose(perm), cp.asarray(b)
    plan = plan_elementwise(sqd.spec, bind(sqd.spec, (x, y), None), sqd._specializer)
    assert plan.variant.entry == "tiled" and plan.extents[2] == shape[-1]
    z = _poisoned(cp, shape, dtype)
    sqd(x, y, z)
    np.testing.assert_array_equal(z.get(), sqd(cp.ascontiguousarray(x), y).get())



@pytest.mark.parametrize(
    "dtype, shape, perm, extents",
    [("float32", (33, 71, 4), (2, 1, 0), (4, 33, 71)), ("float16", (5, 37, 19, 8), (0, 3, 2, 1), (8, 37, 19, 5)),
     ("float64", (2, 130, 300, 2), (0, 3, 2, 1), (300, 130, 2, 2))],
)
def test_steps_stack_planes_along_a_deep_dim_2(cp, sqd, dtype, shape, perm, extents, monkeypatch):
    """z's rows of 16 bytes interleaved along a dim 2 deeper than a step's tiles (71 and 19 planes: the last group of
    a step's planes part-filled), stacked at one position per step (templates/elementwise.cu.j2's `_planes`), and
    float64 rows of 2 moved outside tiles over the two dims beyond them (kspec/kernels/planning/_loop_order.py,
    MAX_WIDE_ROW_BYTES): every element right, a transposed output too."""
    import kspec.kernels.planning._entry_point as plan_module

    monkeypatch.setattr(plan_module, "TILED_MIN_FILL", 0.0)
    monkeypatch.setattr(plan_module, "NARROW_MIN_FILL", 0.0)
    monkeypatch.setattr(plan_module, "NARROW_FOLLOWED_MIN_FILL", 0.0)
    rng = _rng(12)
    a = (rng.standard_normal(tuple(shape[p] for p in sorted(range(len(shape)), key=lambda d: perm[d]))) * 8).astype(dtype)
    b = (rng.standard_normal(shape) * 8).astype(dtype)
    x, y = cp.asarray(a).transpose(perm), cp.asarray(b)
    assert x.shape == shape
    plan = plan_elementwise(sqd.spec, bind(sqd.spec, (x, y), None), sqd._specializer)
    assert plan.variant.entry == "tiled" and plan.extents == extents
    assert any(0 < abs(s[2]) < 32 for s in plan.strides.values())  # an operand interleaves dim 2: stacked steps
    z = _poisoned(cp, shape, dtype)
    sqd(x, y, z)
    np.testing.assert_array_equal(z.get(), sqd(cp.ascontiguousarray(x), y).get())

@pytest.mark.parametrize(
    "dtype, shape, perm, extents",
    [("float64", (3, 1024, 8, 3), (0, 3, 2, 1), (3, 8, 1024, 3)), ("float32", (3, 1024, 16, 4), (0, 3, 2, 1), (4, 16, 1024, 3)),
     ("float64", (2, 1000, 7, 3), (0, 3, 2, 1), (3, 7, 1000, 2)), ("float64", (7, 8, 64, 32), (0, 3, 1, 2), (2048, 8, 7)),
     ("float64", (3, 50, 40, 2), (0, 3, 2, 1), (2, 40, 50, 3))],  # rows of 2 whose x sectors lie 320 elements apart
)
def test_strided_loops_of_wide_items_without_runs(cp, sqd, dtype, shape, perm, extents):
    """Narrow rows of 4- and 8-byte items that by_stride's tiles would write across the loop run strided in C order,
    and no strided loop of 8-byte items takes runs of chunks (kspec/kernels/planning/_order_choice.py, _loop_order.py's
    runs_pay): a block per chunk, every element right at extents that do not divide a chunk."""
    rng = _rng(11)
    a = (rng.standard_normal(tuple(shape[p] for p in sorted(range(4), key=lambda d: perm[d]))) * 8).astype(dtype)
    b = (rng.standard_normal(shape) * 8).astype(dtype)
    x, y = cp.asarray(a).transpose(perm), cp.asarray(b)
    assert x.shape == shape
    plan = plan_elementwise(sqd.spec, bind(sqd.spec, (x, y), None), sqd._specializer)
    assert plan.variant.entry == "strided" and not plan.runs and plan.extents == extents
    z = _poisoned(cp, shape, dtype)
    sqd(x, y, z)
    np.testing.assert_array_equal(z.get(), sqd(cp.ascontiguousarray(x), y).get())


def test_unaligned_two_byte_views_take_scalar_lanes(cp, sqd):
    """float16 views starting one element in (not 4-byte aligned) and odd row strides, a transposed output."""
    rng = _rng(9)
    a = rng.standard_normal((129, 301)).astype(np.float16)
    b = rng.standard_normal((300, 129)).astype(np.float16)
    x = cp.asarray(a)[1:, 1:].T  # (300, 128), transposed, odd offset
    y = cp.asarray(b)[:, 1:]  # (300, 128), row stride of 129 elements
    assert _entry(sqd, x, y) == "tiled"
    z = _poisoned(cp, (300, 128), np.float16)
    sqd(x, y, z)
    np.testing.assert_array_equal(z.get(), sqd(cp.ascontiguousarray(x), cp.ascontiguousarray(y)).get())
    w = _poisoned(cp, (128, 300), np.float16, order="C")[:, :].T  # a transposed output
    sqd(cp.ascontiguousarray(x), cp.ascontiguousarray(y), w)
    np.testing.assert_array_equal(w.get(), z.get())


def test_mixed_widths_in_one_tile(cp):
    """float16 inputs and a float32 output in one tile, and a transposed output."""
    k = kspec.ElementwiseKernel("X x, X y", "float32 z", "z = float(x) * float(y) + 1.0f", "tile_mixed_widths")
    rng = _rng(10)
    a = rng.standard_normal((77, 300)).astype(np.float16)
    b = rng.standard_normal((300, 77)).astype(np.float16)
    x, y = cp.asarray(a).T, cp.asarray(b)
    assert _entry(k, x, y) == "tiled"
    want = a.T.astype(np.float32) * b.astype(np.float32) + 1.0
    np.testing.assert_allclose(k(x, y).get(), want, rtol=1e-6)
    z = _poisoned(cp, (300, 77), np.float32, order="F")
    k(cp.ascontiguousarray(x), y, z)
    np.testing.assert_allclose(z.get(), want, rtol=1e-6)


@pytest.fixture(scope="module")
def l2norm():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm_layouts")


def _strategy(kernel, x, axis, keepdims=False):
    bound = bind(kernel.spec, (x,), None)
    plan = plan_reduction(kernel.spec, bound, kernel._specializer, axis=axis, keepdims=keepdims)
    return reduction_strategy(plan, 132, slab=False).kind  # the generic entries' plan (test_reduction_slab.py: the slab's)


@pytest.mark.parametrize("axis", [(1, 3), (0, 2), (1, 2, 3), (0, 1, 3), (0, 3)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_l2norm_of_4d_over_axes(cp, l2norm, axis, keepdims):
    rng = _rng(9)
    shape = (6, 40, 5, 48)
    a = rng.standard_normal(shape).astype(np.float32)
    x = cp.asarray(a)
    got = l2norm(x, axis=axis, keepdims=keepdims).get()
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis, keepdims=keepdims))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    if axis in ((1, 3), (0, 1, 3), (0, 3)):  # two reduced dims, the inner contiguous: one pass
        assert _strategy(l2norm, x, axis, keepdims) == "rows"
    if axis == (0, 2):  # the innermost KEPT axis contiguous: adjacent outputs in adjacent lanes
        assert _strategy(l2norm, x, axis, keepdims).startswith("cols")


def _cols_lanes(kernel, x, axis):
    """The vector width of the cols entry the plan takes for ``x`` on this device, counting 32 resident blocks
    per SM (the most any holds), so that a width > 1 here is the width of every real plan."""
    from kspec.kernels.callpath._prepared import sm_count

    bound = bind(kernel.spec, (x,), None)
    plan = plan_reduction(kernel.spec, bound, kernel._specializer, axis=axis)
    strategy = reduction_strategy(plan, sm_count(x.device.id), resident=lambda variant, threads: 32, slab=False)
    assert strategy.kind.startswith("cols")
    return strategy.passes[0].variant.vec


@pytest.mark.parametrize(
    ("shape", "dtype", "offset"),
    [
        ((4, 1024, 8, 1024), "float32", 0),  # 8192 tiles of 128 outputs
        ((3, 1000, 5, 1028), "float32", 0),  # the last tile part-filled
        ((3, 1000, 5, 1028), "float64", 0),  # lanes of 2 outputs
        ((3, 1000, 5, 1028), "float32", 1),  # a pointer 4 bytes off 16: the entry keeps to its scalar lanes
    ],
)
def test_l2norm_over_0_2_with_vectorised_lanes(cp, l2norm, shape, dtype, offset):
    a = _rng(13).standard_normal(shape).astype(dtype)
    flat = cp.empty(a.size + offset, dtype=dtype)
    x = flat[offset:].reshape(shape)
    x[...] = cp.asarray(a)
    assert _cols_lanes(l2norm, x, (0, 2)) > 1  # the planner cannot see the pointer: it sizes vectorised tiles
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=(0, 2)))
    out = _poisoned(cp, ref.shape, dtype)
    l2norm(x, axis=(0, 2), out=out)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-5)
    np.testing.assert_allclose(l2norm(x, axis=(0, 2), keepdims=True).get(), ref[None, :, None, :], rtol=1e-5)


@pytest.mark.parametrize(("shape", "axis", "dtype"), [((2048, 1024, 16), (0, 1), "float32"), ((1000, 37, 8), (0, 1), "float64"),
                                                   ((5, 3001, 12), (0, 1), "float32"), ((4099, 9), 0, "float64")])
def test_few_contiguous_outputs_through_the_cols_split(cp, l2norm, shape, axis, dtype):
    a = _rng(23).standard_normal(shape).astype(dtype)
    x = cp.asarray(a)
    bound = bind(l2norm.spec, (x,), None)
    plan = plan_reduction(l2norm.spec, bound, l2norm._specializer, axis=axis)
    assert reduction_strategy(plan, 132).passes[0].variant.entry == "cols"
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    np.testing.assert_allclose(l2norm(x, axis=axis).get(), ref, rtol=1e-5 if dtype == "float32" else 1e-12)


def _first_pass(kernel, x, axis):
    bound = bind(kernel.spec, (x,), None)
    return reduction_strategy(plan_reduction(kernel.spec, bound, kernel._specializer, axis=axis), 132).passes[0]


@pytest.mark.parametrize(("shape", "axis", "dtype"), [((4096, 512, 32), (0, 1), "float16"), ((8192, 4096), 0, "float16"),
                                                   ((256, 256, 1024), (0, 1), "float16"), ((128, 128, 512, 8), (0, 1, 2), "float32"),
                                                   ((3, 400003, 8), (0, 1), "float32")])
def test_few_outputs_over_many_rows_on_split_vector_lanes(cp, shape, axis, dtype):
    """A few contiguous 2-byte outputs (or fewer than a warp of 4-byte ones) over many rows take the vectorised
    lanes split over the device, each block's VEC outputs merged after one barrier: the same sums as NumPy's,
    with and without an identity, the outputs given or made, the rows not a multiple of anything."""
    l2 = kspec.ReductionKernel("T x", "float32 y", "float(x) * float(x)", "a + b", "y = sqrt(a)", "0", "few_rows_l2",
                               reduce_type="float")
    a = _rng(29).standard_normal(shape).astype(dtype)
    x = cp.asarray(a)
    first = _first_pass(l2, x, axis)
    assert first.variant.entry == "cols" and first.variant.vec > 1 and first.nchunks > 1
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    np.testing.assert_allclose(l2(x, axis=axis).get(), ref, rtol=1e-4)
    out = _poisoned(cp, ref.shape, "float32")
    l2(x, axis=axis, out=out)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4)
    amax = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "few_rows_amax")  # no identity
    np.testing.assert_array_equal(amax(x, axis=axis).get(), a.max(axis=axis))



@pytest.mark.parametrize(("shape", "dtype"), [((3, 8, 5, 24), "float16"), ((4, 16, 132), "float32"), ((2, 32, 64, 256), "float16"),
                                           ((5, 3, 7, 16), "int8")])
def test_short_rows_stage_their_outputs_through_shared_memory(cp, shape, dtype):
    """One reduced dim of at most 32 (NCHW over 1, few channels) on the vectorised lanes: each warp stages its
    tile's VEC outputs per lane in shared memory and writes 32 adjacent outputs a store, the offsets taken from
    the lane that reduced them. Two outputs of different types, one given as a transposed view (its offsets are
    not the output index), a part-filled last tile, sums without an identity; int8's 16 outputs a lane do not
    fit the staging room of 8 warps and keep the direct stores."""
    two = kspec.ReductionKernel("T x", "float32 y, T z", "x", "a + b", "y = sqrt(float(a) * float(a)); z = a", "0",
                                "short_rows_two", reduce_type="float")
    a = _rng(37).integers(-3, 4, size=shape).astype(dtype)  # small integers: exact sums in every type
    x = cp.asarray(a)
    first = _first_pass(two, x, 1)
    assert first.variant.entry == "cols" and first.variant.vec > 1 and first.nchunks == 1 and first.chunk == shape[1]
    ref = a.astype(np.float64).sum(axis=1)
    kept = ref.shape
    y = _poisoned(cp, kept[::-1], "float32").T  # transposed: output e * 32 + l is not at that offset
    z = cp.full(kept, 99, dtype=dtype)
    two(x, y, z, axis=1)
    np.testing.assert_array_equal(y.get(), np.abs(ref).astype(np.float32))
    np.testing.assert_array_equal(z.get(), ref.astype(dtype))
    made_y, made_z = two(x, axis=1)
    np.testing.assert_array_equal(made_z.get(), ref.astype(dtype))
    amax = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "short_rows_amax")  # no identity
    np.testing.assert_array_equal(amax(x, axis=1).get(), a.max(axis=1))


@pytest.mark.parametrize("reduce_type", ["int", "long long"])
def test_one_byte_inputs_merge_their_sixteen_outputs_in_groups(cp, reduce_type):
    """int8 inputs load 16 outputs a lane: their block ends merge them in groups that fit the shared memory
    (KSPEC_COLS_VEC_SMEM: 2 groups of 8 with 4-byte sums, 4 of 4 with 8-byte ones). Exact sums either way."""
    out_type = "int32" if reduce_type == "int" else "int64"
    total = kspec.ReductionKernel("T x", f"{out_type} y", "x", "a + b", "y = a", "0", f"few_rows_sum_{out_type}",
                                  reduce_type=reduce_type)
    a = _rng(31).integers(-128, 128, size=(4096, 512, 32), dtype=np.int8)
    x = cp.asarray(a)
    first = _first_pass(total, x, (0, 1))
    assert first.variant.entry == "cols" and first.variant.vec == 16 and first.nchunks > 1
    np.testing.assert_array_equal(total(x, axis=(0, 1)).get(), a.sum(axis=(0, 1), dtype=np.int64))


def test_l2norm_over_three_unmerged_axes_in_two_passes(cp, l2norm):
    a = _rng(12).standard_normal((3, 8, 5, 6, 4, 40)).astype(np.float32)
    x = cp.asarray(a)
    assert _strategy(l2norm, x, (1, 3, 5)) == "inner"
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=(1, 3, 5)))
    np.testing.assert_allclose(l2norm(x, axis=(1, 3, 5)).get(), ref, rtol=1e-5)


def test_axes_1_3_with_out_and_odd_sizes(cp, l2norm):
    rng = _rng(10)
    a = rng.standard_normal((7, 33, 3, 1001)).astype(np.float32)
    out = _poisoned(cp, (7, 3), np.float32)
    l2norm(cp.asarray(a), axis=(1, 3), out=out)
    np.testing.assert_allclose(out.get(), np.sqrt((a.astype(np.float64) ** 2).sum(axis=(1, 3))), rtol=1e-5)
    out_t = _poisoned(cp, (3, 7), np.float32).T  # a transposed output
    l2norm(cp.asarray(a), axis=(1, 3), out=out_t)
    np.testing.assert_allclose(out_t.get(), np.sqrt((a.astype(np.float64) ** 2).sum(axis=(1, 3))), rtol=1e-5)


def test_axes_1_3_without_identity_and_with_a_float16_input(cp):
    kmax = kspec.ReductionKernel("T x", "T y", "x", "a > b ? a : b", "y = a", None, "max_layouts")
    rng = _rng(11)
    a = rng.standard_normal((4, 20, 6, 64)).astype(np.float32)
    x = cp.asarray(a)
    assert _strategy(kmax, x, (1, 3)) == "rows"
    np.testing.assert_array_equal(kmax(x, axis=(1, 3)).get(), a.max(axis=(1, 3)))
    ssq16 = kspec.ReductionKernel("T x", "float32 y", "float(x) * float(x)", "a + b", "y = a", "0", "ssq16_layouts",
                                  reduce_type="float")
    h = rng.standard_normal((3, 17, 5, 200)).astype(np.float16)
    got = ssq16(cp.asarray(h), axis=(1, 3)).get()
    np.testing.assert_allclose(got, (h.astype(np.float64) ** 2).sum(axis=(1, 3)), rtol=1e-4)


@pytest.mark.parametrize(("shape", "axis"), [((8, 32, 64, 32), 0), ((3, 1000), 0), ((32, 33, 70), 0), ((2, 5, 7), 0),
                                           ((16, 8, 100), (0, 1)), ((33, 100), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_short_reduced_rows_give_each_warp_its_own_columns(cp, l2norm, shape, axis, dtype):
    """One reduced dim of at most 32 elements, the kept outputs adjacent (cols): each warp of a full block takes its
    own 32 outputs (kspec/kernels/planning/_reduction_cols.py, _short_cols); a row of 33 keeps the warps splitting it.
    Partial tiles (33 x 70 outputs), keepdims, and a max without identity too."""
    from kspec.kernels.planning._reduction_strategy import reduction_strategy

    rng = _rng(12)
    a = rng.standard_normal(shape).astype(dtype)
    x = cp.asarray(a)
    bound = bind(l2norm.spec, (x,), None)
    plan = plan_reduction(l2norm.spec, bound, l2norm._specializer, axis=axis)
    strategy = reduction_strategy(plan, 132, slab=False)
    assert strategy.kind.startswith("cols")
    if plan.red_size <= 32:  # one pass of full blocks, however few the outputs
        assert strategy.kind == "cols" and len(strategy.passes) == 1 and strategy.passes[0].block == 256
    want = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    tol = 1e-2 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(l2norm(x, axis=axis).get().astype(np.float64), want, rtol=tol)
    np.testing.assert_allclose(l2norm(x, axis=axis, keepdims=True).get().astype(np.float64),
                               np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis, keepdims=True)), rtol=tol)  # fmt: skip
    kmax = kspec.ReductionKernel("T x", "T y", "x", "a > b ? a : b", "y = a", None, "max_short_rows")
    np.testing.assert_array_equal(kmax(x, axis=axis).get(), a.max(axis=axis))


@pytest.mark.parametrize(("shape", "axis"), [((64, 100, 16, 16), 2), ((3, 7, 40), 1), ((5, 32, 24), 1), ((200, 9, 12), 1),
                                           ((33, 3, 17, 8), 1)])
@pytest.mark.parametrize("dtype", ["float16", "int8"])
@pytest.mark.parametrize("offset", [0, 1])
def test_short_reduced_rows_of_narrow_types_take_vector_lanes(cp, shape, axis, dtype, offset):
    """One short reduced dim of a 1- or 2-byte type: lanes of VEC adjacent outputs (cols.cu.j2's short vector
    path) where the innermost kept dim is a multiple of VEC and everything is 16-byte aligned; an array one
    element into its buffer, or kept dims of 12 / 17, take the scalar lanes; partial tiles either way."""
    from kspec.kernels.planning._reduction_strategy import reduction_strategy

    ksum = kspec.ReductionKernel("T x", "float32 y", "float(x)", "a + b", "y = a", "0", "sum_short_narrow",
                                 reduce_type="float")
    rng = _rng(14)
    size = int(np.prod(shape))
    flat = (rng.standard_normal(size + 8) * 8).astype(dtype)
    a = flat[offset:offset + size].reshape(shape)
    x = cp.asarray(flat)[offset:offset + size].reshape(shape)
    bound = bind(ksum.spec, (x,), None)
    plan = plan_reduction(ksum.spec, bound, ksum._specializer, axis=axis)
    strategy = reduction_strategy(plan, 132, slab=False)
    vec = 16 // np.dtype(dtype).itemsize  # the module's vector: 16 bytes
    assert strategy.kind == "cols" and strategy.passes[0].variant.vec == (vec if plan.kept[0] % vec == 0 else 1)
    want = a.astype(np.float64).sum(axis=axis)
    np.testing.assert_allclose(ksum(x, axis=axis).get(), want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize(("shape", "axis"), [((36, 1 << 21), 0), ((4, 40, 1 << 19), 1)])  # 2^21 outputs: enough tiles
@pytest.mark.parametrize("offset", [0, 1])
def test_one_reduced_dim_of_float16_takes_vectorised_lanes(cp, l2norm, shape, axis, offset):
    """float16 inputs over one reduced dim, the outputs adjacent: the runtime-rank cols entry's vectorised lanes,
    the dim walked as (R, 1) (kspec/kernels/planning/_reduction_cols.py, with_outer_unit_dim); an array starting one
    element into its buffer (the plan cannot see that) fails the entry's alignment test there and takes its
    scalar lanes, with the same results."""
    from kspec.kernels.planning._reduction_strategy import reduction_strategy

    rng = _rng(13)
    size = int(np.prod(shape))
    flat = rng.standard_normal(size + 1).astype(np.float16)
    a = flat[offset:offset + size].reshape(shape)
    x = cp.asarray(flat)[offset:offset + size].reshape(shape)  # offset 1: C strides, a base 2 bytes off 16
    bound = bind(l2norm.spec, (x,), None)
    plan = plan_reduction(l2norm.spec, bound, l2norm._specializer, axis=axis)
    strategy = reduction_strategy(plan, 132, slab=False)
    assert strategy.kind == "cols" and strategy.passes[0].variant.vec > 1 and strategy.passes[0].shape is not None
    want = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    np.testing.assert_allclose(l2norm(x, axis=axis).get().astype(np.float64), want, rtol=1e-2)
    out = _poisoned(cp, want.shape, np.float16)
    l2norm(x, axis=axis, out=out)
    np.testing.assert_allclose(out.get().astype(np.float64), want, rtol=1e-2)


def test_map_expr_reading_the_row_index_keeps_the_one_pass_path(cp):
    # _J is the index within the whole reduced row: pass 1 would see another one, so the plan keeps one pass
    k = kspec.ReductionKernel("T x", "T y", "x * (T)(_J % 3)", "a + b", "y = a", "0", "row_index_sum")
    rng = _rng(12)
    a = rng.standard_normal((3, 8, 4, 32)).astype(np.float64)
    x = cp.asarray(a)
    assert _strategy(k, x, (1, 3)) == "rows"
    got = k(x, axis=(1, 3)).get()
    moved = np.moveaxis(a, 1, 2).reshape(3, 4, 8 * 32)  # reduced elements in the plan's order (stride order)
    weights = np.arange(8 * 32) % 3
    np.testing.assert_allclose(got, (moved * weights).sum(axis=-1), rtol=1e-12)


def test_the_bench_shape_at_full_size(cp, l2norm):
    rng = cp.random.default_rng(13)
    x = rng.standard_normal((64, 256, 64, 256), dtype=cp.float32)
    got = l2norm(x, axis=(1, 3))
    ref = cp.sqrt((x.astype(cp.float64) ** 2).sum(axis=(1, 3)))
    assert float(cp.abs(got - ref).max() / ref.max()) < 1e-5


@pytest.mark.parametrize(("shape", "axis", "dtype"), [((512, 256, 512), 1, "float32"), ((7, 300, 20004), 1, "float32"),
                                                   ((512, 256, 512), 1, "float16"), ((256, 128, 512, 3), (0, 3), "float16"),
                                                   ((5, 257, 40000), 1, "float16")])
def test_vectorised_tiles_on_the_warps_of_one_wave(cp, shape, axis, dtype):
    """Vectorised cols tiles on 2-5 warps each (one wave of them, blocks of 64-160 threads, the last tile part-filled,
    a fold's partials): NumPy's sums, with and without an identity."""
    l2 = kspec.ReductionKernel("T x", "float32 y", "float(x) * float(x)", "a + b", "y = sqrt(a)", "0", "wave_l2",
                               reduce_type="float")
    a = _rng(31).standard_normal(shape).astype(dtype)
    x = cp.asarray(a)
    first = _first_pass(l2, x, axis)
    assert first.variant.entry == "cols" and first.variant.vec > 1 and 64 <= first.block <= 160
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    np.testing.assert_allclose(l2(x, axis=axis).get(), ref, rtol=1e-4)
    amax = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "wave_amax")  # no identity
    np.testing.assert_array_equal(amax(x, axis=axis).get(), a.max(axis=axis))
