"""NumPy 2's dtype rules outside ufunc loops: ``where``, casting checks, reductions, dtype arguments.

Each answer is NumPy's own (``numpy.result_type``, ``numpy.can_cast``) where NumPy has the dtype;
bfloat16, which NumPy lacks without ml_dtypes, follows float16's rules in its place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import dtypes

# The value that stands for a weak Python scalar of each type in numpy.result_type (NEP 50: only its type counts).
_WEAK_STAND_IN: dict[type, Any] = {bool: False, int: 0, float: 0.0, complex: 0j}
_PY_TYPE_OF_KIND = {"b": bool, "i": int, "u": int, "f": float, "c": complex}


def numpy_dtype(name: str) -> np.dtype:
    """NumPy's dtype for a kspec dtype name (float16 standing in for bfloat16)."""
    return np.dtype("float16" if name == "bfloat16" else name)


def dtype_name(value: Any) -> str | None:
    """The kspec dtype name of a dtype-like (``numpy.float32``, ``'f4'``, ``float``, a dtype), or None."""
    if isinstance(value, str):
        name = dtypes.canonical_name(value)
        if name is not None:
            return name
    try:
        return dtypes.from_numpy(value).name
    except (KeyError, TypeError):
        return None


def kind(dtype: str) -> str:
    """NumPy's kind letter of a kspec dtype name: b, i, u, f or c."""
    return dtypes.BY_NAME[dtype].kind


def python_type(dtype: str) -> type:
    """The Python scalar type of a dtype's kind (what a weak result of that kind is)."""
    return _PY_TYPE_OF_KIND[dtypes.BY_NAME[dtype].kind]


def default_dtype(py_type: type) -> str:
    """The dtype a Python scalar of this type is stored as in a kernel parameter or literal."""
    return {bool: "bool", int: "int64", float: "float64", complex: "complex128"}[py_type]


def bfloat16_stand_in(names: Iterable[str]) -> tuple[dict[str, str], str | None]:
    """How NumPy can answer for dtypes that include bfloat16, which it lacks: (the dtype to ask about in its
    place, the dtype a float16 answer stands for). bfloat16 follows float16's rules; bfloat16 with float16
    gives float32 (neither holds the other), so both are asked about as float32."""
    present = set(names)
    if "bfloat16" not in present:
        return {}, None
    if "float16" in present:
        return {"bfloat16": "float32", "float16": "float32"}, None
    return {"bfloat16": "float16"}, "bfloat16"


def result_type(operands: list[tuple[str, type | None]]) -> str:
    """numpy.result_type of (dtype, weak type or None) operands, with NEP 50 weak Python scalars."""
    stand_in, back = bfloat16_stand_in(d for d, weak in operands if weak is None)
    args: list[Any] = [_WEAK_STAND_IN[weak] if weak is not None else np.dtype(stand_in.get(d, d)) for d, weak in operands]
    name = np.result_type(*args).name
    return back if back is not None and name == "float16" else name


def can_cast_same_kind(source: str, target: str) -> bool:
    """NumPy's ``same_kind`` rule, which in-place operators and ``out=`` apply."""
    if source == target:
        return True
    return bool(np.can_cast(numpy_dtype(source), numpy_dtype(target), "same_kind"))


REDUCTIONS = ("sum", "prod", "max", "min", "all", "any", "nansum", "nanprod", "nanmax", "nanmin")


def reduction_dtype(op: str, dtype: str, requested: str | None) -> str:
    """The dtype NumPy's ``op`` returns for an input of ``dtype`` (``requested``: the ``dtype=`` argument)."""
    if op in ("all", "any"):
        return "bool"
    if op in ("max", "min", "nanmax", "nanmin"):
        return dtype
    if requested is not None:
        return requested
    kind = dtypes.BY_NAME[dtype].kind
    if kind in "bi" and dtypes.BY_NAME[dtype].itemsize < 8:
        return "int64"
    if kind == "u" and dtypes.BY_NAME[dtype].itemsize < 8:
        return "uint64"
    return dtype


def accumulator_dtype(result: str) -> str:
    """Half-precision sums, products and extrema accumulate in float32 and round once at the end."""
    return "float32" if result in ("float16", "bfloat16") else result
