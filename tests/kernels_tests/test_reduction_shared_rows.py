"""One reduced dim whose contiguous outputs are a short run inside each row (axis 2 of (N, C, R, 16)): the cols
entry's vectorised lanes, either walking their rows alone (kspec/kernels/planning/_reduction_cols.py,
``_lanes_alone``) or as (R, 1) tiles whose warps share each load between rows: a tile per warp where one warp covers
its rows in up to twice COLS_WARP_LOADS loads a lane (``warps_own_segments``; short rows widen the tile over several
runs of outputs, and the lanes of a column halve the outputs between them), else as many warps a block as their loads
per lane call for (``SHARED_LOADS_PER_LANE``); float16 tiles that are few split their vector lanes
(``FEW_TILES_PER_SM``). The plans, and results on both devices."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels.planning import _reduction_cols
from kspec.kernels.planning._cols_tiles import OWNED_TILE_WARPS, cols_tile_width, warps_own_segments, with_outer_unit_dim
from kspec.kernels.planning._reduction_strategy import reduction_strategy
from kspec.render import VariantKey

from helpers.reduction_results import check_dot, check_norms
from test_kernel_plan import H200_SMS, fake, rplan


@pytest.fixture(scope="module")
def ssq():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "shared_rows_ssq")


def test_lanes_walk_their_rows_alone_where_they_fill_the_device(ssq):
    # 2^19 float16 outputs in runs of 16, rows of 64: 2048 warps of lanes of 8 outputs, each lane its whole row
    _, plan = rplan(ssq, fake((16, 2048, 64, 16), "float16"), axis=2)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert only.variant == VariantKey("cols", "int64", 0, 8) and only.shape is None  # the plan's one reduced dim
    assert only.grid * (only.block // 32) * 32 * 8 >= plan.out_size
    # 2^16 outputs give 256 such warps: too few, so (R, 1) tiles share each warp load between 16 rows
    _, plan = rplan(ssq, fake((8, 512, 256, 16), "float16"), axis=2)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert only.shape is not None and only.shape.red == (256, 1)
    # runs a warp's lanes span share nothing: NCHW statistics over the channels keep their (R, 1) tiles
    _, plan = rplan(ssq, fake((4096, 64, 128)), axis=1)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert only.shape is not None and only.shape.red == (64, 1)


@pytest.mark.parametrize("shape, axis, dtype, warps", [
    ((8, 512, 1024, 16), 2, "float16", 4),  # 16 rows a warp load, rows of 1024: 4 warps split them, 16 loads a lane
    ((4, 512, 512, 16), 2, "float32", 4),  # 8 rows a warp load, rows of 512
    ((128, 256, 8, 128), 1, "float16", 8),  # 2 rows a warp load
])
def test_shared_rows_take_warps_by_their_loads_per_lane(ssq, shape, axis, dtype, warps):
    _, plan = rplan(ssq, fake(shape, dtype), axis=axis)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert only.shape is not None and only.block == 32 * warps
    assert not warps_own_segments(with_outer_unit_dim(plan), only.variant, warps, only.chunk)
    assert only.grid == -(-plan.out_size // cols_tile_width(with_outer_unit_dim(plan), only.variant.vec))


@pytest.mark.parametrize("shape, dtype, lanes", [
    ((8, 512, 256, 16), "float16", 2),  # 16 rows a warp load, rows of 256: 16 loads a lane
    ((8, 512, 256, 16), "float32", 4),  # 8 rows a load: 32 loads a lane, still the warp's own
    ((16, 512, 128, 16), "float16", 4),  # rows of 128: a tile spans two runs of 16 outputs, 8 rows a load
    ((8, 512, 64, 16), "float16", 8),  # rows of 64: four runs, 4 rows a load
])
def test_warps_own_the_tiles_whose_rows_they_cover(ssq, shape, dtype, lanes):
    """A warp a tile in blocks of OWNED_TILE_WARPS (one warp a block ran in 1.24 waves: the entry's shared memory
    holds 25 such blocks per SM), the grid counting a tile per warp."""
    _, plan = rplan(ssq, fake(shape, dtype), axis=2)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    view = with_outer_unit_dim(plan)
    assert only.shape is not None and only.variant.vec > 1 and only.block == 32 * OWNED_TILE_WARPS
    width = cols_tile_width(view, only.variant.vec)
    assert width == lanes * only.variant.vec
    assert warps_own_segments(view, only.variant, OWNED_TILE_WARPS, only.chunk)
    assert only.grid == -(-plan.out_size // width // OWNED_TILE_WARPS)


@pytest.mark.parametrize("shape, alone", [
    ((64, 512, 256, 16), False),  # 15.5 warps a SM of lanes alone, rows of 256: owned tiles
    ((64, 256, 128, 32), True),  # the same warps, rows of 128: lanes alone
    ((64, 256, 128, 16), False),  # 7.75 warps a SM, rows of 128
])
def test_lanes_alone_give_way_to_owned_tiles_unless_many(ssq, shape, alone):
    _, plan = rplan(ssq, fake(shape, "float16"), axis=2)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert (only.shape is None) == alone


def test_few_float16_tiles_split_their_vector_lanes(ssq):
    # 32768 outputs over 2048 rows: 128 tiles of 8-output lanes, under FEW_TILES_PER_SM per SM
    _, plan = rplan(ssq, fake((2048, 512, 64), "float16"), axis=0)
    strategy = reduction_strategy(plan, H200_SMS)
    assert strategy.kind == "cols split" and strategy.passes[0].variant.vec == 8
    _, plan = rplan(ssq, fake((2048, 512, 64), "float32"), axis=0)  # 4-byte lanes: unsplit
    assert reduction_strategy(plan, H200_SMS).kind == "cols"


# -- results on both devices ----------------------------------------------------------------------------------

@pytest.fixture
def alone_at_any_size(monkeypatch):
    monkeypatch.setattr(_reduction_cols, "LANES_ALONE_WARPS_PER_SM", 0)


@pytest.mark.parametrize("shape, axis", [((4, 8, 40, 16), (2,)), ((3, 5, 100, 8), (2,))], ids=str)
def test_lanes_alone_results(xp, alone_at_any_size, shape, axis):
    check_norms(xp, shape, axis, seed=61)  # includes a view one element in: not 16-byte aligned


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_lanes_alone_types_and_two_inputs(xp, alone_at_any_size, dtype):
    check_dot(xp, dtype, (2, 8, 48, 32), (2,), seed=62)


def test_owned_tiles_write_every_output(xp):
    """(R, 1) tiles a warp each (the planner's rule for this layout, checked first) merge in the warp alone."""
    shape, axis = (8, 512, 256, 16), 2
    ssq32 = kspec.ReductionKernel("T x", "float32 y", "float(x) * x", "a + b", "y = a", "0", "one_warp_ssq")
    _, plan = rplan(ssq32, fake(shape, "float16"), axis=axis)
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert only.block == 32 * OWNED_TILE_WARPS and only.shape is not None
    h = np.random.default_rng(63).standard_normal(shape).astype(np.float16)
    want = np.sum(h.astype(np.float64) ** 2, axis=axis)
    np.testing.assert_allclose(xp.asnumpy(ssq32(xp.asarray(h), axis=axis)), want, rtol=1e-4)


# owned tiles whose lanes end with 1, 2 or 4 of their outputs' totals (16, 4 or 2 lanes a column), in partial tiles
OWNED_LAYOUTS = [((3, 5, 256, 16), (2,)), ((2, 7, 100, 16), (2,)), ((5, 3, 40, 16), (2,)), ((3, 50, 33, 16), (2,))]


@pytest.mark.parametrize("shape, axis", OWNED_LAYOUTS, ids=str)
def test_owned_tiles_results(xp, shape, axis):
    check_norms(xp, shape, axis, seed=64)  # float32 with double sums: halved; a max with no identity; unaligned


@pytest.mark.parametrize("shape, axis", OWNED_LAYOUTS, ids=str)
def test_owned_tiles_halve_float16_float_sums(xp, shape, axis):
    h = np.random.default_rng(65).standard_normal(shape).astype(np.float16)
    ssq32 = kspec.ReductionKernel("T x", "float32 y", "float(x) * x", "a + b", "y = a", "0", "owned_ssq")
    want = np.sum(h.astype(np.float64) ** 2, axis=axis)
    np.testing.assert_allclose(xp.asnumpy(ssq32(xp.asarray(h), axis=axis)), want, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "int8"])  # double sums of 8 outputs, 16 a lane: warps split the rows
def test_shared_rows_types_and_two_inputs(xp, dtype):
    check_dot(xp, dtype, (2, 7, 100, 32), (2,), seed=66)
