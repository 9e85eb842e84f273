"""Unstructured void dtypes (NumPy's ``V3``: a blob of bytes) as kernel types, as CuPy 14 gives them to kernels:
``cupy::UnstructuredVoid<N>`` (CuPy's own ``get_cuda_alignment`` builds an ElementwiseKernel on one); structured
dtypes (with fields) are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from kspec import dtypes


def _blobs(xp, raw: bytes, size: int):
    return xp.asarray(np.frombuffer(raw, dtype=f"V{size}"))


def test_the_table_names_void_dtypes_as_numpy_does() -> None:
    row = dtypes.from_numpy(np.dtype("V3"))
    assert (row.name, row.c_type, row.kind, row.itemsize) == ("void24", "cupy::UnstructuredVoid<3>", "V", 3)
    assert dtypes.canonical_name("V5") == "void40" and dtypes.lookup("void40").itemsize == 5
    with pytest.raises(KeyError):
        dtypes.from_numpy(np.dtype([("a", "f4"), ("b", "i4")]))
    assert "void24" not in dtypes.NAMES  # the table lists the numeric dtypes; any void size is a row on use


def test_cupys_alignment_kernel(xp) -> None:
    k = kspec.ElementwiseKernel("T in", "int64 out", "using in_t = decltype(in); out = alignof(in_t);", "void_align")
    assert int(xp.asnumpy(k(xp.zeros((), dtype="V3")))) == 1


@pytest.mark.parametrize("size", [3, 4, 5, 16])
def test_bytewise_compare_and_copy(xp, size: int) -> None:
    rng = np.random.default_rng(size)
    a = rng.integers(0, 3, (40, 33 * size), dtype=np.uint8)
    b = a.copy()
    b[::3, ::size] ^= 1  # every third row differs in each element's first byte
    x, y = (xp.asarray(np.ascontiguousarray(m).view(f"V{size}")) for m in (a, b))
    eq = kspec.ElementwiseKernel("T a, T b", "bool same", "same = a == b", "void_eq")
    want = (a.reshape(40, 33, size) == b.reshape(40, 33, size)).all(axis=2)
    np.testing.assert_array_equal(xp.asnumpy(eq(x, y)), want)
    np.testing.assert_array_equal(xp.asnumpy(eq(x.T, y.T)), want.T)  # the strided and tiled paths too
    copy = kspec.ElementwiseKernel("T a", "T b", "b = a", "void_copy")
    out = xp.empty((33, 40), dtype=f"V{size}")
    copy(x.T, out)
    assert xp.asnumpy(out).tobytes() == np.ascontiguousarray(a.reshape(40, 33, size).transpose(1, 0, 2)).tobytes()


def test_structured_dtype_is_refused_by_name(on_cpu_device: None) -> None:
    k = kspec.ElementwiseKernel("T a", "T b", "b = a", "struct_copy")
    with pytest.raises(TypeError, match=r"input a has dtype .*unstructured void"):
        k(np.zeros(4, dtype=[("f", "f4"), ("i", "i4")]))
