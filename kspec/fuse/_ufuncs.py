"""NumPy's math ufuncs for kspec.fuse: dtype resolution (NumPy 2, NEP 50) and the C++ of each loop.

Also CuPy's ufuncs that NumPy has no ufunc for (``rsqrt``, ``sinc``, ``i0``, ``fix``, ``angle``, ``round``: see
:mod:`._ufunc_cupy`), with CuPy's loops.

``resolve(name, operands)`` gives the loop NumPy (CuPy, for those) would run, ``emit(name, loop_in, loop_out,
args)`` the C++ expressions computing its outputs with NumPy's semantics (through ``kspec/ufunc.cuh``), ``cast``
and ``literal`` the conversions and constants around them, ``headers`` the preamble a fused kernel needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from .._errors import KspecTypeError, KspecValueError
from ..dtypes import BY_NAME
from . import _ufunc_cupy
from ._ufunc_casts import cast, literal
from ._rules import bfloat16_stand_in
from ._ufunc_table import NOT_SUPPORTED, SUPPORTED, emit_loop

__all__ = ["ARITY", "CUPY_ONLY", "SUPPORTED", "UfuncTypeError", "cast", "emit", "headers", "literal", "resolve"]

# CuPy's ufuncs that NumPy has none of, and every ufunc kspec.fuse knows: name -> (nin, nout)
CUPY_ONLY = _ufunc_cupy.SUPPORTED
ARITY = MappingProxyType({**SUPPORTED, **CUPY_ONLY})

_WEAK = (bool, int, float, complex)  # Python scalars: weak operands under NEP 50


class UfuncTypeError(KspecTypeError):
    """NumPy has no loop of the ufunc for the operand dtypes (NumPy raises a ``UFuncTypeError`` then)."""


def canonical(name: str) -> str:
    """The NumPy ``__name__`` of a supported ufunc given by that name or an alias (``abs``, ``true_divide``),
    or the name of one of CuPy's ufuncs that NumPy lacks."""
    if name in ARITY:
        return name
    alias = _ALIASES.get(name)
    if alias is not None:
        return alias
    if name in NOT_SUPPORTED:
        raise KspecValueError(f"ufunc {name!r} is not supported by kspec.fuse: {NOT_SUPPORTED[name]}")
    raise KspecValueError(f"{name!r} is not a NumPy ufunc that kspec.fuse supports")


def _aliases() -> dict[str, str]:
    out = {}
    for attr, obj in vars(np).items():  # not dir()+getattr: that imports NumPy's lazy submodules (f2py, ma, ...: ~80 ms)
        if isinstance(obj, np.ufunc) and obj.__name__ in SUPPORTED and attr != obj.__name__:
            out[attr] = obj.__name__
    return out


_ALIASES = _aliases()


def resolve(
    name: str, operands: Sequence[str | type], *, dtype: str | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The loop NumPy 2 picks for ufunc ``name`` on ``operands``: (input dtypes, output dtypes).

    Each operand is a kspec dtype name or one of ``bool``/``int``/``float``/``complex`` for a weak Python
    scalar. ``dtype`` is NumPy's ``dtype=`` argument (the outputs' dtype). bfloat16, which NumPy lacks,
    follows float16's rules with bfloat16 in its place; mixed with float16 it gives float32.
    """
    name = canonical(name)
    nin = ARITY[name][0]
    ops = tuple(operands)
    if len(ops) != nin:
        raise KspecTypeError(f"ufunc {name!r} takes {nin} operand(s), got {len(ops)}")
    for k, op in enumerate(ops):
        if not (op in _WEAK or (isinstance(op, str) and op in BY_NAME)):
            raise KspecTypeError(
                f"ufunc {name!r}: operand {k} is {op!r}; expected a kspec dtype name or bool/int/float/complex"
            )
    if dtype is not None and dtype not in BY_NAME:
        raise KspecTypeError(f"ufunc {name!r}: dtype={dtype!r} is not a kspec dtype name")
    return _resolve(name, ops, dtype)


@lru_cache(maxsize=4096)
def _resolve(name: str, ops: tuple[str | type, ...], dtype: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if name in CUPY_ONLY:
        return _resolve_cupy(name, ops, dtype)
    stand_in, back = bfloat16_stand_in([*(op for op in ops if isinstance(op, str)), *([dtype] if dtype else [])])
    ufunc = getattr(np, name)
    # A Python bool is NumPy's bool (the lowest kind, so weak or strong gives the same loop); int, float
    # and complex stay Python types, which resolve_dtypes treats as weak.
    dtypes = tuple(np.dtype(stand_in.get(op, op)) if isinstance(op, str) else
                   (np.dtype(bool) if op is bool else op) for op in ops)
    outs = (None,) * ufunc.nout
    kwargs = {}
    if dtype is not None:
        kwargs["signature"] = (None,) * ufunc.nin + (np.dtype(stand_in.get(dtype, dtype)),) * ufunc.nout
    try:
        resolved = ufunc.resolve_dtypes(dtypes + outs, **kwargs)
    except TypeError as exc:  # NumPy's UFuncTypeError and its bool-subtract/negative messages
        shown = ", ".join(op if isinstance(op, str) else f"Python {op.__name__}" for op in ops)
        extra = f" with dtype={dtype}" if dtype is not None else ""
        raise UfuncTypeError(
            f"ufunc {name!r} not supported for the input types ({shown}){extra}: NumPy says: {exc}"
        ) from None
    names = []
    for dt in resolved:
        n = dt.name
        if back is not None and n == "float16":
            n = back
        if n not in BY_NAME:  # e.g. longdouble; cannot happen for kspec's dtypes, checked anyway
            raise UfuncTypeError(f"ufunc {name!r}: NumPy resolves to {n}, which kspec has no C type for")
        names.append(n)
    return tuple(names[:ufunc.nin]), tuple(names[ufunc.nin:])


def _resolve_cupy(name: str, ops: tuple[str | type, ...], dtype: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    refused = _ufunc_cupy.refusal(name, ops)
    loop = _ufunc_cupy.resolve(name, ops, dtype) if refused is None else None
    if loop is None:
        shown = ", ".join(op if isinstance(op, str) else f"Python {op.__name__}" for op in ops)
        extra = f" with dtype={dtype}" if dtype is not None else ""
        reason = refused or "CuPy has no loop for them (its loops: " + ", ".join(
            f"{','.join(i)}->{','.join(o)}" for i, o in _ufunc_cupy.LOOPS[name]) + ")"
        raise UfuncTypeError(f"ufunc {name!r} not supported for the input types ({shown}){extra}: {reason}")
    return loop


def emit(name: str, loop_in: Sequence[str], loop_out: Sequence[str], args: Sequence[str]) -> tuple[str, ...]:
    """C++ expressions, one per output of ufunc ``name``'s loop ``loop_in -> loop_out``, on ``args``.

    ``args`` are C++ expressions of the ``loop_in`` C types; an argument may appear more than once in the
    result, so pass identifiers. Each expression has exactly the C type of its ``loop_out`` dtype.
    """
    name = canonical(name)
    loop_in, loop_out, args = tuple(loop_in), tuple(loop_out), tuple(args)
    nin, nout = ARITY[name]
    if len(args) != nin or len(loop_in) != nin or len(loop_out) != nout:
        raise KspecTypeError(
            f"ufunc {name!r} has {nin} input(s) and {nout} output(s); got {len(loop_in)} loop input(s), "
            f"{len(loop_out)} loop output(s) and {len(args)} argument(s)"
        )
    if resolve(name, loop_in) != (loop_in, loop_out):
        raise UfuncTypeError(
            f"ufunc {name!r} has no loop ({', '.join(loop_in)}) -> ({', '.join(loop_out)}); "
            f"resolve() gives the loop to use"
        )
    if name in CUPY_ONLY:
        return _ufunc_cupy.emit_loop(name, loop_in, loop_out, args)
    return emit_loop(name, loop_in, args)


# The renderer defines KSPEC_NEED_FP16/BF16/COMPLEX (which kspec/ufunc.cuh's parts depend on) when a
# kernel's operands or its text name those types. A fused kernel may compute in a type none of its
# operands has (float16 between int8 inputs and a float32 output), so the preamble names them.
_TYPE_WORDS = {"fp16": "__half", "bf16": "__nv_bfloat16", "complex": "complex<float>"}


def headers(dtypes_used: Iterable[str]) -> str:
    """Preamble text for a kernel whose fused expressions use values of ``dtypes_used``."""
    needs = set()
    for d in dtypes_used:
        row = BY_NAME.get(d)
        if row is None:
            raise KspecTypeError(f"headers: {d!r} is not a kspec dtype name")
        if row.header is not None:
            needs.add(row.header)
    lines = ["#include <kspec/ufunc.cuh>"]
    if needs:
        words = ", ".join(_TYPE_WORDS[n] for n in ("fp16", "bf16", "complex") if n in needs)
        lines.append(f"// computes in {words} (names the types so the renderer includes their headers)")
    return "\n".join(lines)
