"""The pieces strategy (kspec/kernels/planning/_reduction_pieces.py): pieces shorter than a vector reduced in
one pass of the pieces entry (templates/reduction/pieces.cu.j2). The layouts it takes and
declines, and its results on both devices (``xp``: NumPy on kspec's CPU device, CuPy on a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels.planning import _reduction_pieces
from kspec.kernels.planning._reduction_strategy import reduction_strategy

from helpers.reduction_results import check_dot, check_keepdims, check_norms, check_strided_output
from test_kernel_plan import H200_SMS, fake, rplan


@pytest.fixture(scope="module")
def ssq():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "pieces_ssq")


@pytest.mark.parametrize("shape, axis, dtype, per_lane", [
    ((8, 1024, 1024, 2), (0, 3), "float32", 2),  # 2^20 outputs, each 8 pairs 8 MB apart
    ((16, 1 << 20, 2), (0, 2), "float32", 2),
    ((256, 1 << 17, 2), (0, 2), "float32", 2),  # 256 rows, 2048 tiles (15.5 per SM)
    ((512, 16, 2048, 2), (1, 3), "float16", 4),  # kept dims on both sides of the outer reduced one
    ((8, 2048, 2048, 4), (0, 3), "float16", 2),
    ((8, 512, 1024, 8), (0, 3), "int8", 2),
])
def test_pieces_of_few_rows_run_in_one_pass(ssq, shape, axis, dtype, per_lane):
    _, plan = rplan(ssq, fake(shape, dtype), axis=axis)
    strategy = reduction_strategy(plan, H200_SMS)
    assert strategy.kind == "pieces" and not strategy.workspace_items
    (only,) = strategy.passes
    assert only.variant.entry == "pieces" and only.variant.vec // plan.red[0] == per_lane
    assert only.shape is None  # the call's own shape: the template finds the pieces in its strides
    tiles = -(-plan.out_size // (32 * per_lane))
    assert only.grid * (only.block // 32) >= tiles  # a warp per tile


@pytest.mark.parametrize("shape, axis, dtype", [
    ((8, 1 << 20, 4), (0, 2), "float32"),  # pieces of a whole vector (4 float32)
    ((8, 1 << 20, 3), (0, 2), "float32"),  # 3 does not divide a vector
    ((8, 1 << 20, 2), (0, 2), "float64"),  # a vector of two float64 holds one piece
    ((8, 4096, 2), (0, 2), "float32"),  # 64 tiles: too few to fill the device unsplit
    ((512, 65536, 2), (0, 2), "float32"),  # 1024 tiles, 7.8 per SM: the fold's
    ((8, 1 << 20, 2), (1, 2), "float32"),  # the reduced dims merge: one row per output
    ((8, 4, 8, 16384, 2), (0, 2, 4), "float32"),  # three reduced dims
])
def test_pieces_declines(ssq, shape, axis, dtype):
    _, plan = rplan(ssq, fake(shape, dtype), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "pieces"


def test_pieces_declines_what_its_loads_cannot_read(ssq):
    shape, axis = (8, 1 << 20, 2), (0, 2)
    strides = np.empty(shape, np.float32).strides
    _, plan = rplan(ssq, fake(shape, strides=(strides[0], 8 * 2, 4)), axis=axis)  # the outputs' pieces not adjacent
    assert reduction_strategy(plan, H200_SMS).kind != "pieces"
    _, plan = rplan(ssq, fake(shape, strides=(strides[0], 4, 4 << 20)), axis=axis)  # the piece is not contiguous
    assert reduction_strategy(plan, H200_SMS).kind != "pieces"
    _, plan = rplan(ssq, fake((8, (1 << 20) + 1, 2)), axis=axis)  # an outer row 8-byte aligned only
    assert reduction_strategy(plan, H200_SMS).kind != "pieces"
    dot = kspec.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "pieces_dot")
    _, plan = rplan(dot, fake(shape), fake((1 << 20, 1)), axis=axis)  # an input broadcast along the piece
    assert reduction_strategy(plan, H200_SMS).kind != "pieces"
    _, plan = rplan(dot, fake(shape), fake(shape), axis=axis)  # two inputs of one layout
    assert reduction_strategy(plan, H200_SMS).kind == "pieces"


def test_a_tuning_records_pieces_knob_turns_it_off(ssq):
    _, plan = rplan(ssq, fake((8, 1024, 1024, 2)), axis=(0, 3))
    assert reduction_strategy(plan, H200_SMS, knobs={"pieces": 1}).kind == "pieces"
    assert reduction_strategy(plan, H200_SMS, knobs={"pieces": 0}).kind != "pieces"


def test_blocks_of_128_threads_unless_one_is_asked_for(ssq):
    _, plan = rplan(ssq, fake((8, 1024, 1024, 2)), axis=(0, 3))
    assert reduction_strategy(plan, H200_SMS).passes[0].block == _reduction_pieces.PIECES_BLOCK == 128
    assert reduction_strategy(plan, H200_SMS, knobs={"block": 256}).passes[0].block == 256
    assert reduction_strategy(plan, H200_SMS, block_size=64).passes[0].block == 64
    assert reduction_strategy(plan, H200_SMS, max_threads=lambda variant: 32).passes[0].block == 32


# -- results on both devices: small layouts, the fill rule patched away --------------------------------------

@pytest.fixture
def any_size(monkeypatch):
    monkeypatch.setattr(_reduction_pieces, "PIECES_MIN_TILES_PER_SM", 0)


RESULT_CASES = [
    ((8, 256, 64, 2), (0, 3)),  # kept dims merged, a lane's two outputs a 16-byte load
    ((4, 96, 2), (0, 2)),  # a last tile of 32 outputs, half its lanes at work
    ((16, 8, 128, 2), (1, 3)),  # kept dims on both sides of the outer reduced one
    ((3, 40, 6, 2), (0, 3)),  # kept dims that do not merge: 6 pieces, then a stride of 240 elements
]


@pytest.mark.parametrize("shape, axis", RESULT_CASES, ids=str)
def test_pieces_results(xp, any_size, shape, axis):
    check_norms(xp, shape, axis, seed=51)  # includes a view one element in: loaded element by element


@pytest.mark.parametrize("dtype", ["float16", "int8", "int16"])
def test_pieces_types_and_two_inputs(xp, any_size, dtype):
    check_dot(xp, dtype, (8, 64, 32, 2), (0, 3), seed=52)


def test_pieces_writes_a_strided_output_keepdims_and_the_row_index(xp, any_size):
    shape, axis = (8, 512, 2), (0, 2)
    check_strided_output(xp, shape, axis, seed=53)
    check_keepdims(xp, shape, axis, seed=54)
    h = np.random.default_rng(54).standard_normal(shape).astype(np.float32)
    # _J, the row index: reduced position (outer row r, piece element e) is r * 2 + e
    weighted = kspec.ReductionKernel("T x", "float64 y", "double(x) * (_J + 1)", "a + b", "y = a", "0", "pieces_j")
    index = (np.arange(8)[:, None, None] * 2 + np.arange(2)[None, None, :] + 1).astype(np.float64)
    want = np.sum(h.astype(np.float64) * index, axis=axis)
    np.testing.assert_allclose(xp.asnumpy(weighted(xp.asarray(h), axis=axis)), want, rtol=1e-6)


def test_pieces_without_an_identity(xp, any_size):
    h = np.random.default_rng(55).standard_normal((8, 64, 64, 4)).astype(np.float16)
    amax = kspec.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "pieces_amax")
    np.testing.assert_array_equal(xp.asnumpy(amax(xp.asarray(h), axis=(0, 3))), h.max(axis=(0, 3)))
