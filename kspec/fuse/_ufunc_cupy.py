"""The ufuncs of CuPy that NumPy has no ufunc for, for kspec.fuse: their loops, CuPy's loop choice, their C++.

``cupyx.rsqrt``, ``cupy.sinc``, ``cupy.i0`` and ``cupy.fix`` are ufuncs in CuPy, and ``cupy.angle(z, deg)`` and
``cupy.around(a, decimals)`` call the ufuncs ``cupy_angle`` / ``cupy_angle_deg`` / ``cupy_round`` while fusing;
NumPy has functions of those names but no ufuncs, so :mod:`._ufuncs` cannot ask NumPy for their loops. The loops
below are CuPy v14.2.0's type lists (``E`` is bfloat16, which CuPy's ``bf16_loop`` adds after float16), chosen
the way CuPy's ``_Ops._guess_routine_from_in_types`` chooses: the first loop every operand casts to safely, a
Python scalar weak (any loop its kind promotes to) unless all operands are scalars or a scalar's kind is higher
than every array's. So result dtypes are CuPy's; values are those of NumPy's function of the same name
(``1 / numpy.sqrt(x)`` for rsqrt), computed by ``templates/include/kspec/ufunc_cupy.cuh``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType

import numpy as np

from ..dtypes import BY_NAME
from ._ufunc_casts import cast, literal

_CHARS = {"?": "bool", "b": "int8", "B": "uint8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
          "l": "int64", "L": "uint64", "q": "int64", "Q": "uint64", "e": "float16", "E": "bfloat16",
          "f": "float32", "d": "float64", "F": "complex64", "D": "complex128"}

Loop = tuple[tuple[str, ...], tuple[str, ...]]


def _loops(text: str) -> tuple[Loop, ...]:
    out: list[Loop] = []
    for sig in text.split():
        ins, _, outs = sig.partition("->")
        loop = (tuple(_CHARS[c] for c in ins), tuple(_CHARS[c] for c in outs))
        if loop not in out:  # 'l' and 'q' are both int64 here
            out.append(loop)
    return tuple(out)


_ROUNDING = "?->? b->b B->B h->h H->H i->i I->I l->l L->L q->q Q->Q e->e E->E f->f d->d"
_ANGLE = "?->d e->e E->E f->f d->d F->f D->d"

# name (CuPy's ufunc name without "cupy_") -> loops, in CuPy's order. Where each list is in CuPy v14.2.0:
LOOPS: MappingProxyType[str, tuple[Loop, ...]] = MappingProxyType({
    "rsqrt": _loops("e->e f->f d->d F->F D->D"),  # cupyx/_rsqrt.py
    "sinc": _loops("e->e E->E f->f d->d F->F D->D"),  # cupy/_math/special.py
    # cupy/_math/special.py (create_math_ufunc('cyl_bessel_i0', ...)) also lists F->F and D->D, but CuPy has
    # no complex cyl_bessel_i0 (those loops fail to compile) and numpy.i0 refuses complex: left out.
    "i0": _loops("e->e E->E f->f d->d"),
    "fix": _loops(_ROUNDING),  # cupy/_math/rounding.py, create_rounding_ufunc
    "angle": _loops(_ANGLE),  # cupy/_core/_routines_math.pyx, _angle (cupy.angle(z))
    "angle_deg": _loops(_ANGLE),  # cupy/_core/_routines_math.pyx, _angle_deg (cupy.angle(z, deg=True))
    # cupy/_core/core.pyx, _round_ufunc (what cupy.around / cupy.round call while fusing)
    "round": _loops("?q->e bq->b Bq->B hq->h Hq->H iq->i Iq->I lq->l Lq->L qq->q Qq->Q "
                    "eq->e fq->f dq->d Fq->F Dq->D"),
})

# name -> (nin, nout)
SUPPORTED: MappingProxyType[str, tuple[int, int]] = MappingProxyType(
    {name: (len(loops[0][0]), len(loops[0][1])) for name, loops in LOOPS.items()})

# Refusals with NumPy's own message where NumPy's function refuses a kind of operand.
_REFUSED = {("i0", "c"): "i0 not supported for complex values"}

_PY_DEFAULT = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}
_KIND_SCORE = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 2}
_FROM_BFLOAT16 = frozenset({"bfloat16", "float32", "float64", "complex64", "complex128"})
_TO_BFLOAT16 = frozenset({"bool", "int8", "uint8", "bfloat16"})


def refusal(name: str, operands: Sequence[str | type]) -> str | None:
    """NumPy's message when its function of this name refuses one of ``operands`` (else None)."""
    for op in operands:
        kind = BY_NAME[op].kind if isinstance(op, str) else np.dtype(_PY_DEFAULT[op]).kind
        message = _REFUSED.get((name, kind))
        if message is not None:
            return message
    return None


def resolve(name: str, operands: Sequence[str | type], dtype: str | None = None) -> Loop | None:
    """CuPy's loop of ufunc ``name`` for ``operands`` (kspec dtype names, or Python types for weak scalars)
    and ``dtype=`` (the first loop whose outputs all have that dtype); None when CuPy has none."""
    loops = LOOPS[name]
    if dtype is not None:
        return next((loop for loop in loops if all(o == dtype for o in loop[1])), None)
    types = [op if isinstance(op, str) else _PY_DEFAULT[op] for op in operands]
    weaks = [op if isinstance(op, type) and op is not bool else None for op in operands]
    if not _use_weak(types, weaks):
        weaks = [None] * len(types)
    for loop in loops:
        if all(_can_cast(t, want) or (weak is not None and _weak_fits(weak, want))
               for t, weak, want in zip(types, weaks, loop[0])):
            return loop
    return None


def _use_weak(types: Sequence[str], weaks: Sequence[type | None]) -> bool:
    """CuPy's _check_should_use_weak_scalar: only with arrays around, none of a lower kind than a scalar."""
    scalar = [_KIND_SCORE["f" if w in (float, complex) else "i"] for w in weaks if w is not None]
    array = [_KIND_SCORE[BY_NAME[t].kind] for t, w in zip(types, weaks) if w is None]
    return bool(scalar) and bool(array) and max(array) >= max(scalar)


def _can_cast(src: str, dst: str) -> bool:
    if src == dst:
        return True
    if src == "bfloat16":
        return dst in _FROM_BFLOAT16
    if dst == "bfloat16":
        return src in _TO_BFLOAT16
    return bool(np.can_cast(src, dst, "safe"))


def _weak_fits(weak: type, dst: str) -> bool:
    """A weak scalar fits a loop type its kind does not promote past (np.result_type(weak(0), dst) == dst)."""
    kind = BY_NAME[dst].kind
    return kind in ("fc" if weak is float else "c" if weak is complex else "iufc")


# -- the C++ of each loop ------------------------------------------------------------------------------

_HALF = frozenset({"float16", "bfloat16"})
_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
_DEG = 180 / math.pi  # NumPy's angle(z, deg=True): a * (180 / pi), a Python float, so rounded to a's type


def _call(function: str, args: Sequence[str]) -> str:
    return f"kspec::uf::{function}({', '.join(args)})"


def _in(dtype: str, compute: str, function: str, arg: str) -> str:
    """``function`` of ``arg`` computed in ``compute`` and rounded back to ``dtype`` once."""
    return cast(_call(function, [cast(arg, dtype, compute)]), compute, dtype)


def emit_loop(name: str, loop_in: Sequence[str], loop_out: Sequence[str], args: Sequence[str]) -> tuple[str]:
    """The expression of one CuPy loop (``resolve``'s) of ufunc ``name`` on the C++ identifiers ``args``."""
    t, out, x = loop_in[0], loop_out[0], args[0]
    kind = BY_NAME[t].kind
    if name == "rsqrt":
        if kind == "c":
            return (_call("divide", [literal(1, t), _call("sqrt", [x])]),)
        return (_in(t, "float32", "rsqrt", x) if t in _HALF else _call("rsqrt", [x]),)
    if name == "sinc":
        return (_call("sinc", [x, literal(math.pi, t), literal(1e-20 if kind == "c" else _EPS[t], t)]),)
    if name == "i0":
        return (_call("i0", [x]) if t == "float64" else _in(t, "float64", "i0", x),)
    if name == "fix":  # numpy.fix is numpy.trunc
        return (f"({x})" if kind in "biu" else _call("trunc", [x]),)
    if name in ("angle", "angle_deg"):
        if kind == "c":
            angle = _call("arctan2", [f"({x}).imag()", f"({x}).real()"])
        else:
            angle = _call("arctan2", [literal(0, out), cast(x, t, out)])
        return (_call("multiply", [angle, literal(_DEG, out)]) if name == "angle_deg" else angle,)
    if name == "round":
        d = args[1]
        if kind == "b":  # CuPy's ?q->e loop copies the value (numpy.round refuses bool unless decimals is 0)
            return (cast(x, t, out),)
        if kind == "c":
            parts = (_call("round_decimals", [f"({x}).{p}()", d]) for p in ("real", "imag"))
            return (f"{BY_NAME[t].c_type}({', '.join(parts)})",)
        return (_call("round_decimals", [x, d]),)
    raise AssertionError(f"no C++ for CuPy ufunc {name!r}")


__all__ = ["LOOPS", "SUPPORTED", "emit_loop", "refusal", "resolve"]
