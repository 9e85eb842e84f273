"""Atomics in jit kernels: the dtypes each CUDA atomic takes and the C++ that calls it.

The table follows CUDA 13's device headers (device_atomic_functions.h, sm_20/32/60_atomic_functions.h,
cuda_fp16.h, crt/sm_70_rt.h, crt/sm_90_rt.h). Every dtype an op accepts is one of:

* ``direct``: CUDA declares ``atomicOp(T*, T)`` for the C type (``atomicCAS(unsigned short*, ...)`` on sm_70+,
  the oldest target NVRTC 13 has, so it needs no guard);
* ``bits``: a signed integer through CUDA's unsigned overload of the same size (``long long`` through
  ``unsigned long long``, ``short`` through ``unsigned short``): two's complement makes add, exchange and
  compare-and-swap the same bit operation;
* ``negate``: ``atomic_sub`` beyond int32/uint32 is ``atomicAdd`` of the negated value (kspec's addition:
  CUDA has atomicSub for int and unsigned int only);
* ``sm_90``: CUDA has it from sm_90 on only (``atomicAdd(float2*)`` for complex64, atomic per component as
  CUDA documents it; the 128-bit ``atomicExch``/``atomicCAS`` for complex128). The kernel then calls a helper
  whose code fails to compile for an older target with a message naming the op and the type.

Everything else (bool, 8-bit types, bfloat16, atomic_min of a float...) is a JitTypeError naming the op,
the dtype and what the op takes.
"""

from __future__ import annotations

import ast
from typing import Any

from ._builtin_calls import element
from ._errors import JitTypeError
from ._types import Scalar
from ._values import ScalarValue, Value, cast

_INTEGERS = {"int32": "direct", "uint32": "direct", "int64": "direct", "uint64": "direct"}

ATOMICS: dict[str, dict[str, str]] = {
    "add": {"int32": "direct", "uint32": "direct", "int64": "bits", "uint64": "direct", "float16": "direct",
            "float32": "direct", "float64": "direct", "complex64": "sm_90"},
    "sub": {"int32": "direct", "uint32": "direct", "int64": "negate", "uint64": "negate", "float16": "negate",
            "float32": "negate", "float64": "negate"},
    "exch": {"int32": "direct", "uint32": "direct", "int64": "bits", "uint64": "direct", "float32": "direct",
             "complex128": "sm_90"},
    "min": dict(_INTEGERS),
    "max": dict(_INTEGERS),
    "inc": {"uint32": "direct"},
    "dec": {"uint32": "direct"},
    "cas": {"int16": "bits", "uint16": "direct", "int32": "direct", "uint32": "direct", "int64": "bits",
            "uint64": "direct", "complex128": "sm_90"},
    "and": dict(_INTEGERS),
    "or": dict(_INTEGERS),
    "xor": dict(_INTEGERS),
}

_CUDA_NAMES = {"exch": "atomicExch", "cas": "atomicCAS"}
_UNSIGNED_TWIN = {"int16": "unsigned short", "int64": "unsigned long long"}

# sm_90-only atomics as helpers: the preprocessor picks the branch for the target, and below sm_90 the
# static_assert stops the compile with a message (NVRTC's own would be "no instance of overloaded function").
# kspec's CPU device (KSPEC_HOST) has them all: complex64 addition per component, as CUDA documents it; the
# 128-bit exchange and compare-and-swap under a lock (kspec_host/exec_atomics.h).
_SM90_HELPERS = {
    ("add", "complex64"): (
        "complex<float> kspec_jit_atomic_add_complex64(complex<float>* address, complex<float> value)",
        "const float2 old = atomicAdd(reinterpret_cast<float2*>(address), make_float2(value.real(), value.imag()));\n"
        "    return complex<float>(old.x, old.y);",
        "value",
    ),
    ("exch", "complex128"): (
        "complex<double> kspec_jit_atomic_exch_complex128(complex<double>* address, complex<double> value)",
        "return atomicExch(address, value);",
        "CUDA's 128-bit atomicExch",
    ),
    ("cas", "complex128"): (
        "complex<double> kspec_jit_atomic_cas_complex128(complex<double>* address, complex<double> compare, complex<double> value)",
        "return atomicCAS(address, compare, value);",
        "CUDA's 128-bit atomicCAS",
    ),
}


def cuda_name(op: str) -> str:
    return _CUDA_NAMES.get(op, "atomic" + op.title())


_HOST_BODIES = {
    ("add", "complex64"): "float* const parts = reinterpret_cast<float*>(address);\n"
                          "    const float real = atomicAdd(parts, value.real());\n"
                          "    return complex<float>(real, atomicAdd(parts + 1, value.imag()));",
}


def _helper(tr: Any, op: str, t: Scalar) -> str:
    signature, body, what = _SM90_HELPERS[(op, t.name)]
    name = f"kspec_jit_atomic_{op}_{t.name}"
    code = (
        f"__device__ inline {signature} {{\n"
        "#if defined(KSPEC_HOST)\n"
        f"    {_HOST_BODIES.get((op, t.name), body)}\n"
        "#endif\n"
        "#if __CUDA_ARCH__ >= 900\n"
        f"    {body}\n"
        "#elif !defined(KSPEC_HOST)\n"
        f'    static_assert(__CUDA_ARCH__ >= 900, "kspec.jit: atomic_{op} of {t.name} needs sm_90 or newer ({what})");\n'
        "    return value;\n"
        "#endif\n"
        "}"
    )
    if code not in tr.module.helpers:
        tr.module.helpers.append(code)
    return name


def atomic(tr: Any, op: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> ScalarValue:
    """``jit.atomic_<op>(array, index, value)`` (``atomic_cas(array, index, compare, value)``): the old value."""
    count = 4 if op == "cas" else 3
    if kwargs or len(args) != count:
        spelled = "atomic_cas(array, index, compare, value)" if op == "cas" else f"atomic_{op}(array, index, value)"
        raise tr.error(JitTypeError, node, f"{spelled}: takes {count} positional arguments")
    target = element(tr, args[0], args[1], node, f"the array of atomic_{op}")
    t = target.type
    how = ATOMICS[op].get(t.name)
    if how is None:
        raise tr.error(
            JitTypeError, node,
            f"`{cuda_name(op)}` does not support {t} input: jit.atomic_{op} takes {', '.join(ATOMICS[op])} "
            f"(the types CUDA 13's {cuda_name(op)} has)",
        )
    operands = [cast(tr.scalar(a, node, t), t) for a in args[2:]]
    address = f"&{target.code}"
    if how == "sm_90":
        code = f"{_helper(tr, op, t)}({address}, {', '.join(operands)})"
    elif how == "bits":
        twin = _UNSIGNED_TWIN[t.name]
        bits = ", ".join(f"static_cast<{twin}>({o})" for o in operands)
        code = f"static_cast<{t.ctype}>({cuda_name(op)}(reinterpret_cast<{twin}*>({address}), {bits}))"
    elif how == "negate":
        value = operands[0]
        if t.name == "int64":  # through unsigned: negating LLONG_MIN would be undefined
            ull = "unsigned long long"
            code = f"static_cast<long long>(atomicAdd(reinterpret_cast<{ull}*>({address}), 0ULL - static_cast<{ull}>({value})))"
        elif t.name == "uint64":
            code = f"atomicAdd({address}, 0ULL - {value})"
        else:
            code = f"atomicAdd({address}, -({value}))"
    else:
        code = f"{cuda_name(op)}({address}, {', '.join(operands)})"
    return Value(code, t)
