"""The vectorised cols entry in 32 bits (kspec/kernels/planning/_cols_tiles.py, ``narrowed``): an unsplit launch whose
offsets fit takes the int32 instantiation; its sums against NumPy's, up to an input 1 MiB short of 2**31 bytes, and the
64-bit one past it."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._reduction_plan import plan_reduction
from kspec.kernels.planning._reduction_strategy import reduction_strategy
from kspec.render import VariantKey

pytestmark = pytest.mark.gpu

COLS32 = VariantKey("cols", "int32", 0, 4)


@pytest.fixture
def cp():
    return pytest.importorskip("cupy")


def _first_pass(kernel, x, axis):
    bound = bind(kernel.spec, (x,), None)
    return reduction_strategy(plan_reduction(kernel.spec, bound, kernel._specializer, axis=axis), 132).passes[0]


@pytest.mark.parametrize(("shape", "axis"), [((256, 256, 512), 0), ((64, 128, 16, 1024), 1), ((3, 1000, 5, 1028), (0, 2)),
                                             ((96, 130, 520), 1)])
def test_sums_means_and_strided_outputs_in_32_bits(cp, shape, axis):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape).astype(np.float32)
    x = cp.asarray(a)
    l2 = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "cols32_l2")
    mean = kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a / (_in_ind.size() / _out_ind.size())", "0",
                                 "cols32_mean")
    assert _first_pass(l2, x, axis).variant == COLS32
    ref = np.sqrt((a.astype(np.float64) ** 2).sum(axis=axis))
    np.testing.assert_allclose(l2(x, axis=axis).get(), ref, rtol=1e-5)
    np.testing.assert_allclose(mean(x, axis=axis).get(), a.astype(np.float64).mean(axis=axis), rtol=1e-4, atol=1e-6)
    # an output every other element of a wider array: its strides are the output's, not the loop's
    wide = cp.full(ref.shape[:-1] + (2 * ref.shape[-1],), np.nan, dtype=np.float32)
    l2(x, axis=axis, out=wide[..., ::2])
    np.testing.assert_allclose(wide[..., ::2].get(), ref, rtol=1e-5)
    assert bool(cp.isnan(wide[..., 1::2]).all())


@pytest.mark.parametrize(("rows", "narrow"), [(2047, True), (2048, False)], ids=["2**31-2**20-bytes", "2**31-bytes"])
def test_inputs_at_the_edge_of_2_to_the_31_bytes(cp, rows, narrow):
    """(rows, 64, 4096) float32 over axis 1, x[i, j, k] = i % 7 + 1: every output is 8 * (i % 7 + 1); the int32 entry
    reads up to 1 MiB short of 2**31 bytes, the 64-bit one from 2**31 bytes on."""
    l2 = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "cols32_edge")
    column = (cp.arange(rows, dtype=np.int32) % 7 + 1).astype(np.float32)
    x = cp.ascontiguousarray(cp.broadcast_to(column[:, None, None], (rows, 64, 4096)))
    assert (_first_pass(l2, x, 1).variant == COLS32) == narrow
    got = l2(x, axis=1)
    want = 8 * column[:, None]
    assert bool((got == want).all()), "a wrong sum at the outputs " + str(cp.argwhere(got != want)[:4].get().tolist())
