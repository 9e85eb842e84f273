"""Splits whose second pass is a programmatic dependent launch (split_final starts while the rows or cols pass
still runs, and waits before it reads the partials): the results of every call in a chain of calls on fresh
inputs, made eagerly and replayed from a CUDA graph, are NumPy's. A split_final that read before the partials
were complete would return the partials of the call before (the workspace is reused from the pool)."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._reduction_plan import plan_reduction
from kspec.kernels.planning._reduction_strategy import reduction_strategy

pytestmark = pytest.mark.gpu

# (shape, axis, dtype, strategy kind): NCHW statistics over (0, 2, 3) with four or eight channels (rows split;
# split_final a block per output), a few contiguous outputs over many rows (cols split; a group of lanes per
# output, then a block), three reduced dims that do not merge (inner: rows, then split_final over the outer
# reduced positions)
LAYOUTS = [
    ((8, 4, 64, 1024), (0, 2, 3), "float32", "split"),
    ((4, 8, 128, 512), (0, 2, 3), "float16", "split"),
    ((64, 256, 256), (0, 1), "float32", "cols split"),
    ((33, 1001, 64), (0, 1), "float16", "cols split"),
    ((3, 8, 5, 6, 4, 400), (1, 3, 5), "float32", "inner"),
]


@pytest.fixture(scope="module")
def l2norm():
    # float32 sums: a float16 sum of 2^18 squares overflows (65504), whatever the launches
    return kspec.ReductionKernel("T x", "float32 y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm_dependent",
                                 reduce_type="float32")


def _strategy(kernel, x, axis):
    from kspec.kernels.callpath._prepared import sm_count

    plan = plan_reduction(kernel.spec, bind(kernel.spec, (x,), None), kernel._specializer, axis=axis)
    return reduction_strategy(plan, sm_count(x.device.id))


@pytest.mark.parametrize(("shape", "axis", "dtype", "kind"), LAYOUTS)
def test_a_chain_of_split_calls_eager_and_replayed(shape, axis, dtype, kind, l2norm):
    cp = pytest.importorskip("cupy")
    base = np.random.default_rng(5).uniform(0.5, 1.0, shape).astype(dtype)
    x = cp.asarray(base)
    strategy = _strategy(l2norm, x, axis)
    if strategy.kind != kind:  # the planner's choice depends on the device's SMs
        pytest.skip(f"this device plans {shape} over {axis} as {strategy.kind!r}, not {kind!r}")
    first, second = strategy.passes
    assert second.variant.entry == "split_final" and second.dependent and not first.dependent
    ref = np.sqrt((base.astype(np.float64) ** 2).sum(axis=axis))
    rtol = 1e-5 if dtype == "float32" else 2e-3

    got = []
    for scale in range(1, 9):  # each call's input differs from the one before; nothing synchronises between
        got.append(l2norm(x * dtype_scale(cp, dtype, scale), axis=axis))
    for scale, y in enumerate(got, start=1):
        np.testing.assert_allclose(y.get().astype(np.float64), scale * ref, rtol=rtol, err_msg=f"eager call {scale}")

    y = cp.empty(ref.shape, dtype=np.float32)
    y.fill(np.nan)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        l2norm(x, axis=axis, out=y)  # planned and loaded before the capture
        stream.begin_capture()
        l2norm(x, axis=axis, out=y)
        graph = stream.end_capture()
        for scale in (3, 1, 7, 2):
            x[...] = cp.asarray(base) * dtype_scale(cp, dtype, scale)
            y.fill(np.nan)
            graph.launch()
            np.testing.assert_allclose(y.get().astype(np.float64), scale * ref, rtol=rtol, err_msg=f"replay x{scale}")


def dtype_scale(cp, dtype, scale):
    """``scale`` as a 0-d array of ``dtype``, so that ``x * scale`` keeps x's type."""
    return cp.asarray(scale, dtype=dtype)
