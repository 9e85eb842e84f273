"""The fold strategy (kspec/kernels/planning/_reduction_fold.py): a short contiguous reduced dim inside a kept one
runs as cols over it kept, then split_final over its pieces and chunks. Its pass 1 addresses the plan's elements,
the layouts it takes and declines, and its results on both devices (``xp``: NumPy on kspec's CPU device, CuPy on
a GPU)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kspec
from kspec.kernels.planning import _reduction_fold
from kspec.kernels.planning._reduction_strategy import reduction_strategy

from helpers.reduction_results import check_dot, check_keepdims, check_norms, check_strided_output
from test_kernel_plan import H200_SMS, fake, rplan
from test_reduction_slab import unravel


@pytest.fixture(scope="module")
def ssq():
    return kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq")


def _element_sets(kept, red, in_strides, fold=1):
    """Output -> the sorted input byte offsets it reduces (every input's, as tuples); ``fold``: the pass's
    outputs are (output, piece) pairs, piece innermost, as pass 1 of the fold writes its partials."""
    table: dict[int, list] = {}
    for o, j in itertools.product(range(int(np.prod(kept))), range(int(np.prod(red)))):
        ko, rj = unravel(o, kept), unravel(j, red)
        offsets = tuple(sum(c * s for c, s in zip(ko, ks)) + sum(c * s for c, s in zip(rj, rs))
                        for ks, rs in in_strides.values())
        table.setdefault(o // fold, []).append(offsets)
    return {o: sorted(v) for o, v in table.items()}


FOLD_CASES = [((64, 16, 2), (0, 2)), ((32, 8, 16, 2), (0, 1, 3)), ((64, 8, 32, 3), (0, 3)),
              ((8, 16, 8, 8, 2), (0, 2, 4)), ((64, 5, 3), (0, 2))]


@pytest.mark.parametrize("shape, axis", FOLD_CASES, ids=str)
@pytest.mark.parametrize("sms", [1, 132])
def test_pass_one_reads_each_outputs_elements_as_its_pieces(ssq, shape, axis, sms):
    _, plan = rplan(ssq, fake(shape), axis=axis)
    strategy = reduction_strategy(plan, sms)
    assert strategy.kind == "fold"
    first, second = strategy.passes
    r0 = plan.red[0]
    assert first.variant.entry == "cols" and second.variant.entry == "split_final" and second.dependent
    view = first.shape
    assert view.out_size == plan.out_size * r0 and view.red_size * r0 == plan.red_size
    assert not any(any(s) for s in view.out_strides.values())  # pass 1 writes partials only
    # output o's partials are (o * r0 + j) * nchunks + s: split_final's r0 * nchunks chunks of output o
    assert second.nchunks == r0 * first.nchunks and strategy.workspace_items == plan.out_size * second.nchunks
    assert _element_sets(view.kept, view.red, view.in_strides, fold=r0) == _element_sets(plan.kept, plan.red, plan.in_strides)


def test_the_short_dim_merges_with_the_kept_one_outside_it(ssq):
    _, plan = rplan(ssq, fake((1024, 1024, 16, 2)), axis=(0, 1, 3))
    first = reduction_strategy(plan, H200_SMS).passes[0]
    assert first.shape.kept == (32,) and first.shape.red == (1 << 20,)  # rows of 32 contiguous elements
    assert first.nchunks > 1  # 32 outputs over 2^20 rows: split over the device


def test_few_outer_rows_walk_as_two_reduced_dims(ssq):
    _, plan = rplan(ssq, fake((32, 4096, 2)), axis=(0, 2))
    first = reduction_strategy(plan, H200_SMS).passes[0]
    assert first.shape.red == (32, 1) and first.variant.ndim == 0  # the runtime-rank entry's vector lanes
    _, plan = rplan(ssq, fake((64, 4096, 2)), axis=(0, 2))
    first = reduction_strategy(plan, H200_SMS).passes[0]
    assert first.shape.red == (64,) and first.variant.ndim == 1


@pytest.mark.parametrize("shape, axis", [
    ((64, 16, 12), (0, 2)),  # pieces of 48 bytes: vectors for the rows entry
    ((16, 16, 2), (0, 2)),  # 16 outer positions: pass 1 would write a partial per 16 elements it reads
    ((64, 16, 2), (1, 2)),  # the reduced dims merge: one row per output
    ((64, 16, 2), (0, 1)),  # the contiguous dim is kept
])
def test_fold_declines(ssq, shape, axis):
    _, plan = rplan(ssq, fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "fold"


def test_fold_declines_what_pass_one_would_change(ssq):
    shape, axis = (64, 16, 2), (0, 2)
    row_index = kspec.ReductionKernel("T x", "T y", "x * _J", "a + b", "y = a", "0", "row_index")
    _, plan = rplan(row_index, fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "fold"  # map_expr reads the row index
    strides = np.empty(shape, np.float32).strides
    _, plan = rplan(ssq, fake(shape, strides=(strides[0], 4, 64)), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "fold"  # the short dim is not contiguous
    dot = kspec.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "dotw")
    _, plan = rplan(dot, fake(shape), fake((16, 1)), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind != "fold"  # an input broadcast along the short dim
    _, plan = rplan(dot, fake(shape), fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind == "fold"  # two inputs of one layout


def test_few_outputs_fold_ahead_of_the_slab_entry(ssq):
    _, plan = rplan(ssq, fake((4096, 2048, 8, 8)), axis=(0, 1, 3))  # 8 outputs: the slab's tiles are too few
    assert reduction_strategy(plan, H200_SMS).kind == "fold"
    _, plan = rplan(ssq, fake((4096, 512, 8)), axis=(0, 2))  # 512 outputs: the slab entry's
    assert reduction_strategy(plan, H200_SMS).kind.startswith("slab")
    assert reduction_strategy(plan, H200_SMS, slab=False).kind == "fold"


def test_a_tuning_records_fold_knob_turns_it_off(ssq):
    _, plan = rplan(ssq, fake((1024, 1024, 16, 2)), axis=(0, 1, 3))
    assert reduction_strategy(plan, H200_SMS, knobs={"fold": 1}).kind == "fold"
    assert reduction_strategy(plan, H200_SMS, knobs={"fold": 0}).kind == "split"


def test_fold_bytes_bound_the_pieces(ssq, monkeypatch):
    _, plan = rplan(ssq, fake((64, 16, 12)), axis=(0, 2))  # pieces of 48 bytes: rows
    assert reduction_strategy(plan, H200_SMS).kind != "fold"
    monkeypatch.setattr(_reduction_fold, "FOLD_MAX_BYTES", 64)
    assert reduction_strategy(plan, H200_SMS).kind == "fold"


# -- results on both devices ----------------------------------------------------------------------------------

RESULT_CASES = [
    ((1024, 64, 16, 2), (0, 1, 3)),  # 32 contiguous outputs of pass 1, split over the device
    ((512, 4096, 3), (0, 2)),  # pieces of 3: 12288 pass-1 outputs, unsplit
    ((64, 8, 32, 2), (0, 3)),  # kept dims on both sides of the outer reduced one
    ((16, 4, 8, 64, 2), (0, 2, 4)),  # two outer reduced dims
    ((256, 512, 6), (0, 2)),  # pieces of 6, 512 outputs: split_final merges each with a group of 8 lanes
    ((24, 65536, 6), (0, 2)),  # 2^16 outputs of 6 partials: split_final reads each in a thread of its own
]


@pytest.mark.parametrize("shape, axis", RESULT_CASES, ids=str)
def test_fold_results(xp, shape, axis):
    check_norms(xp, shape, axis, seed=41)


def test_a_fold_over_few_outer_rows_writes_partials(xp, monkeypatch):
    """Pass 1 over 16 outer positions (below FOLD_MIN_OUTER, so only a patched planner folds them): partials of
    rows as short as the cols entry's short-row paths take, which write outputs only without a workspace."""
    monkeypatch.setattr(_reduction_fold, "FOLD_MIN_OUTER", 16)
    shape, axis = (256, 16, 64, 2), (1, 3)
    ssq = kspec.ReductionKernel("T x", "float64 y", "double(x) * x", "a + b", "y = a", "0", "few_outer_ssq")
    _, plan = rplan(ssq, fake(shape), axis=axis)
    assert reduction_strategy(plan, H200_SMS).kind == "fold"
    h = np.random.default_rng(45).standard_normal(shape).astype(np.float32)
    want = np.sum(h.astype(np.float64) ** 2, axis=axis)
    np.testing.assert_allclose(xp.asnumpy(ssq(xp.asarray(h), axis=axis)), want, rtol=1e-9)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8"])
def test_fold_types_and_two_inputs(xp, dtype):
    check_dot(xp, dtype, (256, 32, 2), (0, 2), seed=42)


def test_fold_writes_a_strided_output_and_keepdims(xp):
    shape, axis = (1024, 16, 2), (0, 2)
    check_strided_output(xp, shape, axis, seed=43)
    check_keepdims(xp, shape, axis, seed=44)
