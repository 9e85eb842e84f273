"""The strided elementwise entry's inner vectors (issues [L] and [AD]: a bias over rows, broadcasts along any axis):
where every operand's innermost loop stride is its item size or 0, the inner extent a multiple of the module's
vector width and the dense operands aligned, a thread moves a vector of the inner dim at a time; otherwise the
element loop runs. Results against NumPy for every item size (1, 2, 4, 8, 16 bytes), broadcasts along each axis,
odd inner extents, views off the vector alignment, negative strides, outputs given strided or read by the body.
The CPU device takes the same plans (its host entry has no vectors) and must give the same results.
"""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from helpers.device_arrays import random_values

from kspec.kernels.planning._binding import bind
from kspec.kernels.planning._plan import plan_elementwise

AXPY = kspec.ElementwiseKernel("T x, T y", "T z", "z = x * y + x", "inner_vec_axpy")
ACCUMULATE = kspec.ElementwiseKernel("T x, T y", "T z", "z = z + x * y", "inner_vec_accumulate")
MIXED = kspec.ElementwiseKernel("T x, U y", "T z", "z = x * T(y) + x", "inner_vec_mixed")

DTYPES = ["int8", "float16", "float32", "float64", "complex64", "complex128"]


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return random_values(rng, shape, dtype, span=5)


def _entry(kernel, *args) -> str:
    bound = bind(kernel.spec, args[: kernel.nin], args[kernel.nin :] or None)
    plan = plan_elementwise(kernel.spec, bound, kernel._specializer)
    return plan.variant.entry


def _check(got, want, dtype: str) -> None:
    tol = {"float16": 2e-3, "complex64": 1e-5, "float32": 1e-6}.get(dtype, 1e-12)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 6, 8), (2, 3, 4, 16), (5, 3, 32), (3, 5, 7)], ids=str)
def test_an_operand_broadcast_along_each_axis(xp, dtype, shape):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    x = _data(rng, shape, dtype)
    for axis in range(len(shape)):
        y_shape = tuple(1 if d == axis else n for d, n in enumerate(shape))
        y = _data(rng, y_shape, dtype)
        dx, dy = xp.asarray(x), xp.asarray(y)
        assert _entry(AXPY, dx, dy) == "strided"  # not the contiguous entry: this is the path under test
        _check(xp.asnumpy(AXPY(dx, dy)), x * y + x, dtype)
        _check(xp.asnumpy(AXPY(dy, dx)), y * x + y, dtype)  # the broadcast operand first


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_bias_over_rows_and_a_scale_per_row(xp, dtype):
    rng = np.random.default_rng(7)
    x, bias, scale = _data(rng, (64, 96), dtype), _data(rng, (96,), dtype), _data(rng, (64, 1), dtype)
    _check(xp.asnumpy(AXPY(xp.asarray(x), xp.asarray(bias))), x * bias + x, dtype)
    _check(xp.asnumpy(AXPY(xp.asarray(x), xp.asarray(scale))), x * scale + x, dtype)


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_views_off_the_vector_alignment_and_negative_strides(xp, dtype):
    rng = np.random.default_rng(11)
    base = _data(rng, (6, 41), dtype)
    bias = _data(rng, (40,), dtype)
    dbase, dbias = xp.asarray(base), xp.asarray(bias)
    for view in (np.s_[:, 1:], np.s_[:, :-1], np.s_[::-1, 1:], np.s_[:, :0:-1]):
        x = base[view]
        _check(xp.asnumpy(AXPY(dbase[view], dbias)), x * bias + x, dtype)
    wide = _data(rng, (6, 44), dtype)  # rows of 44 elements: outer strides of 88 or 44 bytes, vectors of 16
    x = wide[:, :40]
    _check(xp.asnumpy(AXPY(xp.asarray(wide)[:, :40], dbias)), x * bias + x, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_outputs_given_strided_or_read_by_the_body(xp, dtype):
    rng = np.random.default_rng(13)
    x, bias = _data(rng, (8, 16), dtype), _data(rng, (16,), dtype)
    dx, dbias = xp.asarray(x), xp.asarray(bias)
    wide = xp.zeros((8, 32), dtype=dtype)
    AXPY(dx, dbias, wide[:, ::2])  # an output with an inner stride of two elements: no vectors
    want = np.zeros((8, 32), dtype=dtype)
    want[:, ::2] = x * bias + x
    _check(xp.asnumpy(wide), want, dtype)
    start = _data(rng, (8, 16), dtype)
    out = xp.asarray(start)
    ACCUMULATE(dx, dbias, out)  # the body reads its output: loaded with the inputs
    _check(xp.asnumpy(out), start + x * bias, dtype)


def test_mixed_item_sizes_move_vectors_of_the_widest(xp):
    rng = np.random.default_rng(17)
    x, y = _data(rng, (12, 8), "float32"), _data(rng, (8,), "float64")
    got = xp.asnumpy(MIXED(xp.asarray(x), xp.asarray(y)))
    _check(got, (x * y.astype(np.float32) + x).astype(np.float32), "float32")


@pytest.mark.parametrize("narrow", ["int8", "uint8", "int16", "float16"])
def test_narrow_operands_beside_wider_ones_move_as_whole_words(xp, narrow):
    """A float32 loop moves vectors of 4 elements: a 1- or 2-byte operand's vector is then one or two 32-bit
    words, loaded whole where it is dense and made of one element repeated where it is broadcast along the
    inner dim (kspec/array.cuh, InnerLoad)."""
    rng = np.random.default_rng(19)
    x = _data(rng, (6, 5, 8), "float32")
    dx = xp.asarray(x)
    for y_shape in ((6, 5, 1), (1, 5, 8), (6, 1, 8), (1, 1, 8)):
        y = np.abs(_data(rng, y_shape, narrow)) if narrow == "uint8" else _data(rng, y_shape, narrow)
        dy = xp.asarray(y.astype(narrow))
        assert _entry(MIXED, dx, dy) == "strided"
        got = xp.asnumpy(MIXED(dx, dy))
        _check(got, (x * y.astype(np.float32) + x).astype(np.float32), "float32")
