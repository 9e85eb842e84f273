"""Elementwise results for every permutation of a 4-d operand (issue [L]): an input stored in another axis order
(a transposed view of a C array), an output given in another order, and both, for every item size (1, 2, 4, 8
and 16 bytes), on shapes whose two inner dims are wide enough for the tiled entry but not multiples of its tile,
and on odd small shapes (the strided entry). On both devices: the CPU device takes the same plans. The last test
checks that such a layout plans the tiled entry, so that the GPU results above are that entry's.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kspec
from helpers.device_arrays import random_values
from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._plan import plan_elementwise

SQD = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "perm_sqd")
PERMUTATIONS = [p for p in itertools.permutations(range(4)) if p != (0, 1, 2, 3)]
WIDE = (3, 2, 37, 45)  # inner dims >= TILE_MIN_EXTENT, neither a multiple of the 32-wide tile
ODD = (3, 5, 2, 7)


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return random_values(rng, shape, dtype, span=6)


def _stored_in(order: tuple[int, ...], logical: np.ndarray, xp) -> object:
    """``logical``'s values in a device array whose memory runs in ``order`` (a transposed view of a C array)."""
    inverse = tuple(int(a) for a in np.argsort(order))
    return xp.asarray(np.ascontiguousarray(logical.transpose(order))).transpose(inverse)


def _entry(*args) -> str:  # ArraySpecs: planning needs no device
    bound = bind(SQD.spec, args[:2], args[2:] or None, abstract=True)
    return plan_elementwise(SQD.spec, bound, SQD._specializer).variant.entry


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64", "complex128"])
@pytest.mark.parametrize("shape", [WIDE, ODD], ids=["wide", "odd"])
def test_every_permutation_of_an_input_and_of_an_output(xp, shape, dtype):
    rng = np.random.default_rng(sum(shape))
    tol = 2e-3 if dtype == "float16" else 1e-12
    for order in PERMUTATIONS:
        x, y = _data(rng, shape, dtype), _data(rng, shape, dtype)
        want = (x - y) * (x - y)
        dx, dy = _stored_in(order, x, xp), xp.asarray(y)
        np.testing.assert_allclose(xp.asnumpy(SQD(dx, dy)), want, rtol=tol, atol=tol, err_msg=str(order))
        out = _stored_in(order, np.zeros(shape, dtype), xp)  # the output in the other order
        SQD(xp.asarray(x), dy, out)
        np.testing.assert_allclose(xp.asnumpy(out), want, rtol=tol, atol=tol, err_msg=f"out {order}")
        both = _stored_in(order[::-1], np.zeros(shape, dtype), xp)  # input and output in two other orders
        SQD(dx, dy, both)
        np.testing.assert_allclose(xp.asnumpy(both), want, rtol=tol, atol=tol, err_msg=f"both {order}")


def test_a_transposed_inner_pair_plans_the_tiled_entry():
    """Planning needs no GPU: ArraySpecs with the strides of the WIDE shape's transposed input."""
    x = kspec.ArraySpec((3, 2, 45, 37), "float32", strides=(2 * 37 * 45 * 4, 37 * 45 * 4, 4, 45 * 4))
    y = kspec.ArraySpec((3, 2, 45, 37), "float32")
    assert _entry(x, y) == "tiled"
    assert _entry(y, y) == "contig"
