"""CuPy's parameter records: what ``kernel.in_params`` / ``kernel.out_params`` hold.

Code written for CuPy reads a kernel's parameters as records with ``name``, ``dtype``, ``ctype``, ``raw``
and ``is_const`` (CuPy's ``ParameterInfo``), e.g. cupyx.scipy.ndimage's ``generic_filter`` builds another
kernel from a user ReductionKernel's parameter types. :class:`ParameterInfo` gives those fields with CuPy's
meaning, plus the spec's own (``type``, ``non_const``, ``is_placeholder``) for kspec's layers above.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import dtypes


class ParameterInfo:
    """One parameter of a kernel object, as CuPy describes it.

    - ``ctype``: the C type the kernel's code sees: the placeholder letter (``'T'``), else the dtype's C
      spelling in kspec's kernels (``'float'``, ``'long long'``, ``'__half'``, ``'complex<float>'``; CuPy
      spells the last two ``'float16'`` and ``'thrust::complex<float>'``).
    - ``dtype``: the NumPy dtype, None for a placeholder (and for bfloat16 without ``ml_dtypes``).
    - ``raw``, ``is_const``: inputs are const unless ``_non_const``; outputs never are.
    """

    __slots__ = ("name", "type", "raw", "non_const", "is_const", "ctype", "dtype")
    name: str
    type: str
    raw: bool
    non_const: bool
    is_const: bool
    ctype: str
    dtype: Any

    def __init__(self, name: str, type: str, raw: bool, non_const: bool, is_const: bool) -> None:
        self.name, self.type, self.raw, self.non_const, self.is_const = name, type, raw, non_const, is_const
        if dtypes.is_placeholder(type):
            self.ctype, self.dtype = type, None
        else:
            row = dtypes.BY_NAME[type]
            self.ctype, self.dtype = row.c_type, row.numpy

    @property
    def is_placeholder(self) -> bool:
        return dtypes.is_placeholder(self.type)

    def _fields(self) -> tuple[Any, ...]:
        return (self.name, self.dtype, self.ctype, self.raw, self.is_const)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParameterInfo) and other._fields() == self._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"<ParameterInfo(name={self.name!r} dtype={self.dtype!r} ctype={self.ctype!r} raw={self.raw!r} "
                f"is_const={self.is_const!r})>")


def parameter_infos(params: Iterable[Any], *, outputs: bool) -> tuple[ParameterInfo, ...]:
    """The records of a spec's parameters (``kspec.spec.Param`` or ``PlainParam``): inputs or outputs."""
    return tuple(ParameterInfo(p.name, p.type, p.raw, p.non_const, not outputs and not p.non_const) for p in params)
