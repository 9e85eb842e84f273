"""The slab strategy (kspec/kernels/planning/_reduction_slab.py): its canonical shapes address the plan's elements, the
layouts it takes and declines, and its results on both devices (the ``xp`` fixture: NumPy on kspec's CPU
device, CuPy on a GPU, where the slab entry itself runs)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._reduction_strategy import reduction_strategy

from helpers.reduction_results import check_dot, check_norms, check_strided_output
from test_kernel_plan import H200_SMS, fake, rplan


@pytest.fixture(scope="module")
def ssq():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq")


def unravel(index, extents):
    """A linear index -> its coordinates over ``extents``, innermost first."""
    coords = []
    for n in extents:
        coords.append(index % n)
        index //= n
    return coords


def _offsets(kept, red, in_strides, out_strides):
    """(output index, reduced index) -> (input byte offsets, output byte offsets): dims innermost first."""
    table = {}
    for o, j in itertools.product(range(int(np.prod(kept))), range(int(np.prod(red)))):
        ko, rj = unravel(o, kept), unravel(j, red)
        ins = tuple(sum(c * s for c, s in zip(ko, ks)) + sum(c * s for c, s in zip(rj, rs)) for ks, rs in in_strides.values())
        outs = tuple(sum(c * s for c, s in zip(ko, os)) for os in out_strides.values())
        table[o, j] = ins + outs
    return table


SLAB_CASES = [((4, 8, 16, 8), (1, 3)), ((8, 4, 8, 16), (0, 2)), ((8, 4, 4, 16), (0, 3)), ((2, 16, 8, 32), (1, 3)),
              ((64, 4, 2, 16), (0, 2)), ((2, 64, 4, 256), (0, 2))]  # the last in two parts of K0 at 64 SMs


@pytest.mark.parametrize("shape, axis", SLAB_CASES, ids=str)
@pytest.mark.parametrize("sms", [1, 64])
def test_the_canonical_shape_addresses_the_plans_elements(ssq, shape, axis, sms):
    _, plan = rplan(ssq, fake(shape), axis=axis)
    strategy = reduction_strategy(plan, sms)
    assert strategy.kind in ("slab", "slab split")
    first = strategy.passes[0]
    assert first.variant.entry == "slab" and first.variant.index == "int32" and first.block == 256
    canon = first.shape
    assert canon.out_size == plan.out_size and canon.red_size == plan.red_size
    assert _offsets(canon.kept, canon.red, canon.in_strides, canon.out_strides) == _offsets(
        plan.kept, plan.red, plan.in_strides, plan.out_strides)


def test_sweep_layouts_take_a_block_per_tile(ssq):
    _, plan = rplan(ssq, fake((16, 256, 256, 16)), axis=(1, 3))  # 4096 rows of 256 pieces of 16 float32
    (only,) = reduction_strategy(plan, H200_SMS).passes
    # 4 rows per tile: 16 vectors (256 bytes) read together per reduced position, 1024 tiles
    assert only.group == 4 and only.grid == 1024 and only.nchunks == 1 and only.chunk == plan.red_size
    assert only.shape.kept == (4, 64, 16) and only.shape.red == (16, 256)
    _, plan = rplan(ssq, fake((64, 1024, 16, 16)), axis=(0, 2))  # 1024 tiles of 16 outputs
    (only,) = reduction_strategy(plan, H200_SMS).passes
    assert only.group == 0 and only.grid == 1024 and only.shape.kept == (16, 1024) and only.shape.red == (16, 64)


def test_rows_tiles_widen_to_split_rather_than_run_one_wave(ssq):
    _, plan = rplan(ssq, fake((16, 256, 16, 256)), axis=(1, 3))  # 256 rows: 256 tiles of one row, or 128 of two
    first, _ = reduction_strategy(plan, H200_SMS).passes
    assert first.group == 2 and first.grid == 128 * first.nchunks and first.nchunks > 1
    _, plan = rplan(ssq, fake((16, 64, 16, 1024)), axis=(1, 3))  # rows of a block's width: 256 tiles, split
    first, _ = reduction_strategy(plan, H200_SMS).passes
    assert first.group == 1 and first.grid == 256 * first.nchunks and first.nchunks > 1


def test_few_tiles_split_the_outer_reduced_dim(ssq):
    _, plan = rplan(ssq, fake((1024, 16, 64, 16)), axis=(0, 2))  # 16 tiles of 16 outputs, 65536 elements each
    strategy = reduction_strategy(plan, H200_SMS)
    first, second = strategy.passes
    assert strategy.kind == "slab split" and second.variant.entry == "slab_final" and second.variant.index == "int32"
    assert second.block == 256 and second.grid == -(-plan.out_size // 32)  # a lane per output
    assert 1 < first.nchunks <= 32 and first.grid == 16 * first.nchunks
    assert first.chunk % 64 == 0  # whole positions of the outer reduced dim (R0 = 64)
    assert (first.nchunks - 1) * first.chunk < plan.red_size <= first.nchunks * first.chunk  # no empty chunk
    assert second.nchunks == first.nchunks and strategy.workspace_items == plan.out_size * first.nchunks
    assert second.dependent and not first.dependent  # split_final may start as the slab pass begins
    _, plan = rplan(ssq, fake((16, 64, 16, 1000)), axis=(1, 3))  # the generic split's split_final too
    first, second = reduction_strategy(plan, H200_SMS).passes
    assert first.variant.entry == "rows" and second.variant.entry == "split_final"
    assert second.dependent and not first.dependent


def test_dependent_launches_are_plain_on_the_cpu_device():
    from kspec.runtime import HOST_DEVICE_ID, dependent_launcher

    calls = []

    class Driver:
        def cuLaunchKernel(self, *args):
            calls.append(args)
            return (0,)

    launch = dependent_launcher(Driver(), HOST_DEVICE_ID)
    assert launch("fn", 7, 64, "hs", 123) == (0,)
    assert calls == [("fn", 7, 1, 1, 64, 1, 1, 0, "hs", 123, 0)]


def test_few_cols_tiles_take_parts_of_k0(ssq):
    def first(shape):
        _, plan = rplan(ssq, fake(shape), axis=(0, 2))
        strategy = reduction_strategy(plan, H200_SMS)
        return strategy.passes[0]

    # as few parts as give two tiles per SM: 256 K1 x 2 parts of 64 lanes; 16 K1 x 32 parts of 8 lanes
    assert first((16, 256, 16, 256)).shape.kept == (128, 2, 256) and first((16, 256, 16, 256)).nchunks == 1
    parted = first((16, 16, 64, 1024))
    assert parted.shape.kept == (32, 32, 16) and parted.grid == 512 and parted.nchunks == 1
    assert parted.shape.in_strides["x"][0] == (4, 128, 4 * 64 * 1024)  # a part's rows stay at stride K0
    # the most parts (runs of 8 vectors) split too, where whole-K0 tiles would split into short blocks
    parted = first((16, 16, 256, 256))
    assert parted.shape.kept == (32, 8, 16) and parted.nchunks == 4
    # and whole-K0 tiles keep long blocks: 16 tiles x 32 chunks of 32 R1 positions x 4096 vectors
    whole = first((1024, 16, 64, 256))
    assert whole.shape.kept == (256, 16) and whole.nchunks == 32


@pytest.mark.parametrize("shape, axis", [
    ((8, 63, 8, 61), (1, 3)),  # not powers of two
    ((16, 1024), 0),  # one reduced dim
])
def test_slab_declines(ssq, shape, axis):
    _, plan = rplan(ssq, fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind not in ("slab", "slab split")


def test_slab_declines_what_its_entry_cannot_see(ssq):
    shape, axis = (16, 256, 256, 16), (1, 3)
    _, plan = rplan(ssq, fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS, block_size=128).kind != "slab"  # the caller's block
    row_index = kspec.ReductionKernel("T x", "T y", "x * _J", "a + b", "y = a", "0", "row_index")
    _, plan = rplan(row_index, fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "slab"  # map_expr reads the row index
    strides = np.empty(shape, np.float32).strides
    swapped = fake(shape, strides=(strides[0], strides[1], strides[3], strides[2]))
    _, plan = rplan(ssq, swapped, axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "slab"  # the reduced pieces are not contiguous
    dot = kspec.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "dotw")
    _, plan = rplan(dot, fake(shape), fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind == "slab"  # two inputs of one layout
    _, plan = rplan(dot, fake(shape), swapped, axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "slab"  # two inputs of different layouts


# -- results on both devices ----------------------------------------------------------------------------------

RESULT_CASES = [
    ((32, 1024, 16, 16), (0, 3)),  # rows: 16 rows per tile on a GPU
    ((4, 32, 256, 16), (1, 3)),  # rows with K2
    ((8, 1024, 4, 32), (0, 2)),  # cols, one tile per K1
    ((64, 8, 16, 64), (0, 2)),  # cols split on a GPU (8 tiles)
    ((64, 4, 32, 16), (0, 2)),  # cols split, tiles of 16 outputs
    ((16, 300, 4, 64), (0, 2)),  # a K1 that is not a power of two
    ((16, 64, 4, 256), (0, 2)),  # cols tiles of 8 parts of K0 on a GPU (512 tiles)
    ((256, 16, 8, 256), (0, 2)),  # 8 parts of K0, split in 2 on a GPU
]


@pytest.mark.parametrize("shape, axis", RESULT_CASES, ids=str)
def test_slab_results(xp, shape, axis):
    check_norms(xp, shape, axis, seed=31)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8"])
def test_slab_types_and_two_inputs(xp, dtype):
    check_dot(xp, dtype, (64, 8, 16, 64), (0, 2), seed=32)


def test_slab_writes_a_strided_output(xp):
    check_strided_output(xp, (32, 1024, 16, 16), (0, 3), seed=33)
