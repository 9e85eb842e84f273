"""Scalars converted to a kernel parameter's dtype, as a launch receives them (little-endian bytes).

Two sets of rules, chosen by the kernel (``cupy_rules``, set for the CuPy-style constructors; the planning room's
binding module, kspec/kernels/planning/_binding.py, says which is which): CuPy's, where a scalar is assigned to
its parameter's dtype as NumPy assigns an array item, and the typed path's stricter ones, where a float for an
integer parameter or a complex for a real one is a TypeError. Here, in the call path, because a prepared call
packs each call's scalars with them; binding uses them once per signature.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtypes
from ..._errors import KspecOverflowError, KspecTypeError, KspecValueError, about_kernel

_KIND_WORDS = {"b": "bool", "i": "integer", "u": "integer", "f": "float", "c": "complex"}


def scalar_bytes(kernel: str, param: str, value: Any, dtype: str, cupy_rules: bool = False) -> bytes:
    """``value`` converted to ``dtype`` as the kernel receives it (little-endian bytes), by CuPy's rules or by
    the typed path's stricter ones (the module docstring)."""
    if cupy_rules:
        return _assigned_bytes(kernel, param, value, dtype)
    target = dtypes.BY_NAME[dtype]
    if isinstance(value, np.generic):
        value_kind = np.dtype(type(value)).kind
        value = value.item()
    else:
        value_kind = "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f" if isinstance(value, float) else "c"
    if value_kind in "iu":
        value_kind = "i"
    lossy = (target.kind in "biu" and value_kind in "fc") or (target.kind == "f" and value_kind == "c")
    if lossy:
        raise KspecTypeError(
            about_kernel(
                kernel,
                f"{param} is {dtype} but got a {_KIND_WORDS[value_kind]} scalar {value!r}; "
                f"convert it explicitly (kspec does not drop a fraction or an imaginary part silently)",
            )
        )
    if target.kind in "iu" or (target.kind == "b" and value_kind == "i"):
        if target.kind == "b":
            return np.bool_(value).tobytes()
        info = np.iinfo(target.name)
        if not info.min <= int(value) <= info.max:
            raise KspecOverflowError(
                about_kernel(kernel, f"{param} = {value} is out of range for {dtype} ({info.min} .. {info.max})")
            )
        return np.asarray(int(value), dtype=target.name).tobytes()
    if target.kind == "b":
        return np.bool_(value).tobytes()
    if dtype == "bfloat16":
        return _bfloat16_bits(float(value)).tobytes()
    try:
        with np.errstate(over="ignore"):
            return np.asarray(value, dtype=target.name).tobytes()
    except OverflowError:
        raise KspecOverflowError(about_kernel(kernel, f"{param} = {value} does not fit {dtype}")) from None


def _assigned_bytes(kernel: str, param: str, value: Any, dtype: str) -> bytes:
    """CuPy's conversion: ``value`` stored into an item of ``dtype`` as NumPy stores one (NumPy's errors, each
    as kspec's subclass of its type, naming the parameter)."""
    np_dtype = dtypes.BY_NAME[dtype].numpy
    try:
        if np_dtype is None:  # bfloat16 without ml_dtypes: kspec rounds it itself, from a real value
            if isinstance(value, (complex, np.complexfloating)):
                raise TypeError("a complex value for a real parameter")
            return _bfloat16_bits(float(value)).tobytes()
        item = np.empty((), np_dtype)
        item[()] = value
        return item.tobytes()
    except OverflowError as exc:
        raise KspecOverflowError(about_kernel(kernel, f"{param} = {value!r} does not fit {dtype}: {exc}")) from None
    except TypeError as exc:
        raise KspecTypeError(about_kernel(kernel, f"{param} = {value!r} does not convert to {dtype}: {exc}")) from None
    except ValueError as exc:
        raise KspecValueError(about_kernel(kernel, f"{param} = {value!r} does not convert to {dtype}: {exc}")) from None


def _bfloat16_bits(value: float) -> np.ndarray:
    """Round a float to bfloat16 (to nearest, ties to even) and return its 16 bits."""
    with np.errstate(over="ignore"):
        bits = np.asarray(value, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if np.isnan(value):
        return np.asarray(0x7FC0, dtype=np.uint16)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.asarray(rounded & 0xFFFF, dtype=np.uint16)
