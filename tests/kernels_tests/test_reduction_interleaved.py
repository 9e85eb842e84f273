"""A few interleaved outputs: the innermost kept dim shorter than a warp, each reduced position's outputs right
after the previous one's (NHWC per channel, (N, H, W, 3) over (0, 1, 2); points (N, 3) over 0). The cols entry's
scalar lanes share each warp between 32 // width reduced positions, for any width below 32 (lanes past them idle;
cols.cu.j2 merges the rows with ``warp_combine_columns``). Plans here, results on both devices (``xp``: NumPy on
kspec's CPU device, CuPy on a GPU, where the GPU entry runs)."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._cols_tiles import cols_tile_width
from kspec.kernels.planning._reduction_cols import rows_share_warps
from kspec.kernels.planning._reduction_strategy import reduction_strategy
from kspec.render import VariantKey

from helpers.reduction_results import check_norms
from test_kernel_plan import H200_SMS, fake, rplan


@pytest.fixture(scope="module")
def ssq():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq")


@pytest.mark.parametrize("channels", [2, 3, 5, 6, 12, 24])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_few_channels_take_scalar_cols_lanes_that_share_warps(ssq, channels, dtype):
    _, plan = rplan(ssq, fake((64, 512, 512, channels), dtype), axis=(0, 1, 2))
    assert plan.rndim == 1 and plan.kept == (channels,) and rows_share_warps(plan)
    strategy = reduction_strategy(plan, H200_SMS)
    first, second = strategy.passes
    assert strategy.kind == "cols split" and first.variant == VariantKey("cols", "int64", 0, 1), (channels, dtype)
    view = plan._replace(**first.shape._asdict(), rndim=0)  # the (R, 1) view pass 1 runs
    assert cols_tile_width(view, 1) == channels  # a tile is one reduced position's outputs
    assert second.variant.entry == "split_final" and second.nchunks == first.nchunks > 1


def test_vector_lanes_share_warps_only_as_a_power_of_two_per_row(ssq):
    _, plan = rplan(ssq, fake((64, 512, 512, 4)), axis=(0, 1, 2))  # one 16-byte vector a row: 32 rows a warp load
    assert reduction_strategy(plan, H200_SMS).passes[0].variant == VariantKey("cols", "int64", 0, 4)
    _, plan = rplan(ssq, fake((4096, 4096, 12)), axis=(0, 1))  # three vectors a row: the scalar lanes, 2 rows a warp
    assert reduction_strategy(plan, H200_SMS).passes[0].variant == VariantKey("cols", "int64", 0, 1)


def test_a_kept_dim_of_a_warp_or_more_takes_whole_warps(ssq):
    _, plan = rplan(ssq, fake((4096, 4096, 32)), axis=(0, 1))
    assert not rows_share_warps(plan)
    _, plan = rplan(ssq, fake((4096, 4096, 3)), axis=(0,))  # the reduced dim is not right outside the kept one
    assert plan.rndim == 1 and not rows_share_warps(plan)
    assert reduction_strategy(plan, H200_SMS).passes[0].variant == VariantKey("cols", "int64", 1, 1)


RESULT_CASES = [
    ((4096, 3), (0,)),  # points: a centroid's sums
    ((64, 64, 64, 3), (0, 1, 2)),  # NHWC RGB
    ((512, 128, 5), (0, 1)),  # 6 rows share a warp, 2 lanes idle
    ((1024, 6), (0,)),
    ((300, 7, 12), (0, 1)),  # 2 rows a warp, 8 lanes idle
    ((2048, 24), (0,)),  # one row a warp, 8 lanes idle
    ((64, 4, 64, 3), (0, 2)),  # two reduced dims: (R0, R1) with the kept pair of dims between
]


@pytest.mark.parametrize("shape, axis", RESULT_CASES, ids=str)
def test_interleaved_results(xp, shape, axis):
    check_norms(xp, shape, axis, seed=51)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int8", "complex64"])
def test_interleaved_types(xp, dtype):
    shape, axis = (2000, 3), (0,)
    rng = np.random.default_rng(52)
    h = (rng.standard_normal(shape) * 4).astype(dtype)
    if dtype == "complex64":
        h = (h + 1j * rng.standard_normal(shape)).astype(dtype)
    total = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "ilv_sum")
    got = xp.asnumpy(total(xp.asarray(h), axis=axis))
    want = h.astype(np.complex128 if dtype == "complex64" else np.float64).sum(axis=0)
    tol = {"float16": 2e-2, "int8": 0}.get(dtype, 1e-5)
    np.testing.assert_allclose(got.astype(want.dtype), want, rtol=tol, atol=tol * 100)
