"""kspec.jit's builtins (the names of cupyx.jit) and :func:`call`, which makes the C++ of a call inside a kernel.

The builtins are markers (_markers.py): kernels refer to them (``jit.threadIdx.x``, ``jit.atomic_add(...)``)
and the translator emits the CUDA they stand for. Called from ordinary Python they raise, saying so.
"""

from __future__ import annotations

import ast
import builtins
import math
import types as pytypes
from typing import Any, Callable

import numpy as np

from ._atomics import atomic
from ._builtin_calls import math_call, shuffle
from ._device_functions import compile_time_call, device_call
from ._errors import JitTypeError, JitUnsupportedError, JitValueError
from ._groups import GroupMethod, cg_function, method_call, this_group
from ._markers import Builtin, Dim3, Special
from ._types import BOOL, FLOAT64, INT32, INT64, UINT32, JitType, Shared, Void, common_type, scalar_of
from ._values import Const, ScalarValue, TupleValue, Value, cast, const_to_value, is_number

PYTHON_BUILTINS = frozenset({"range", "min", "max", "abs", "int", "float", "bool", "len", "complex"})

threadIdx, blockIdx, blockDim, gridDim = Dim3("threadIdx"), Dim3("blockIdx"), Dim3("blockDim"), Dim3("gridDim")
warpsize = Special("warpsize", "warpSize", INT32)


# -- simple builtins -----------------------------------------------------------------------------------------


def _ndim_arg(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST, what: str) -> int:
    ndim = kwargs.pop("ndim", args[0] if len(args) == 1 else None)
    if ndim is None or kwargs or len(args) > 1:
        raise tr.error(JitTypeError, node, f"{what}(ndim) takes one argument, ndim")
    value = ndim.value if isinstance(ndim, Const) else None
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        got = "a value computed at run time" if not isinstance(ndim, Const) else f"{type(value).__name__} {value!r}"
        raise tr.error(JitTypeError, node, f"ndim must be an integer known at compile time ({what}(1), {what}(2) or {what}(3)), got {got}")
    if value not in (1, 2, 3):
        raise tr.error(JitValueError, node, f"Only ndim=1,2,3 are supported: {what}({value})")
    return int(value)


def _grid(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    ndim = _ndim_arg(tr, args, kwargs, node, "grid")
    items = tuple(Value(f"(blockIdx.{a} * blockDim.{a} + threadIdx.{a})", UINT32) for a in "xyz"[:ndim])
    return items[0] if ndim == 1 else TupleValue(items)


def _gridsize(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    ndim = _ndim_arg(tr, args, kwargs, node, "gridsize")
    items = tuple(Value(f"(blockDim.{a} * gridDim.{a})", UINT32) for a in "xyz"[:ndim])
    return items[0] if ndim == 1 else TupleValue(items)


def _no_args(code: str, type_: JitType) -> Callable[..., Value[JitType]]:
    def emit(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[JitType]:
        if args or kwargs:
            raise tr.error(JitTypeError, node, "takes no arguments")
        return Value(code, type_)

    return emit


def _syncwarp(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[Void]:
    mask = kwargs.pop("mask", args[0] if args else Const(0xFFFFFFFF))
    if len(args) > 1 or kwargs:
        raise tr.error(JitTypeError, node, "syncwarp(mask=0xffffffff) takes one mask")
    return Value(f"__syncwarp({cast(tr.scalar(mask, node, UINT32), UINT32)})", Void())


def _shared_memory(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[Shared]:
    names = ["dtype", "size", "alignment"]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    if "dtype" not in bound or "size" not in bound or set(bound) - set(names):
        raise tr.error(JitTypeError, node, "shared_memory(dtype, size, alignment=None): size=None for dynamic shared memory")
    try:
        dtype = scalar_of(bound["dtype"].value) if isinstance(bound["dtype"], Const) else None
    except Exception:
        dtype = None
    if dtype is None:
        raise tr.error(JitTypeError, node, "shared_memory: dtype must be a NumPy dtype known at compile time (numpy.float32)")
    tr.module.note_type(dtype)
    size, alignment = bound["size"], bound.get("alignment", Const(None))
    if not isinstance(alignment, Const) or not (alignment.value is None or (isinstance(alignment.value, int) and alignment.value > 0 and alignment.value & (alignment.value - 1) == 0)):
        raise tr.error(JitTypeError, node, "shared_memory: alignment must be None or a constant power of two")
    align = f"__align__({alignment.value}) " if alignment.value else ""
    name = tr.fresh_name(getattr(tr, "name_hint", None) or "shared")
    if isinstance(size, Const) and size.value is None:
        tr.dynamic_alignment = max(getattr(tr, "dynamic_alignment", 16), alignment.value or 16)
        tr.prologue.append(f"{dtype.ctype}* const {name} = reinterpret_cast<{dtype.ctype}*>(_kspec_dynamic_shared);")
        return Value(name, Shared(dtype))
    if not (isinstance(size, Const) and isinstance(size.value, (int, np.integer)) and int(size.value) > 0):
        raise tr.error(JitTypeError, node, "shared_memory: size must be a positive int known at compile time (a literal or a global constant), or None for dynamic shared memory")
    tr.shared_declarations.append(f"__shared__ {align}{dtype.ctype} {name}[{int(size.value)}];")
    return Value(name, Shared(dtype))


def _range_outside_for(tr: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    raise tr.error(JitUnsupportedError, node, "range() is only supported as the iterable of a for loop")


syncthreads = Builtin("syncthreads", _no_args("__syncthreads()", Void()), "__syncthreads()")
syncwarp = Builtin("syncwarp", _syncwarp, "__syncwarp(mask)")
laneid = Builtin("laneid", _no_args("kspec_jit::laneid()", UINT32), "The lane of this thread in its warp (uint32).")
grid = Builtin("grid", _grid, "grid(ndim): the absolute thread index (a tuple for ndim 2, 3).")
gridsize = Builtin("gridsize", _gridsize, "gridsize(ndim): the number of threads in the grid.")
shared_memory = Builtin("shared_memory", _shared_memory, "shared_memory(dtype, size, alignment=None)")
range = Builtin("range", _range_outside_for, "range(start, stop, step, unroll=None|True|False|int)")  # noqa: A001


def _make_atomic(op: str) -> Builtin:
    return Builtin(f"atomic_{op}", lambda tr, args, kwargs, node: atomic(tr, op, args, kwargs, node), f"atomic{op.title()}")


atomic_add, atomic_sub, atomic_exch, atomic_min, atomic_max = (_make_atomic(o) for o in ("add", "sub", "exch", "min", "max"))
atomic_inc, atomic_dec, atomic_cas = (_make_atomic(o) for o in ("inc", "dec", "cas"))
atomic_and, atomic_or, atomic_xor = (_make_atomic(o) for o in ("and", "or", "xor"))


def _make_shuffle(kind: str) -> Builtin:
    return Builtin(f"shfl_{kind}sync", lambda tr, args, kwargs, node: shuffle(tr, kind, args, kwargs, node), f"__shfl_{kind}sync")


shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync = (_make_shuffle(k) for k in ("", "up_", "down_", "xor_"))


# -- the call dispatcher ---------------------------------------------------------------------------------


_CAST_BUILTINS = {builtins.int: INT64, builtins.float: FLOAT64, builtins.bool: BOOL}


def call(tr: Any, function: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
    if isinstance(function, GroupMethod):
        return method_call(tr, function, args, kwargs, node)
    if not isinstance(function, Const):
        raise tr.error(JitTypeError, node, f"a {tr.describe_value(function)} is not callable")
    obj = function.value
    if isinstance(obj, Builtin):
        return obj.emit(tr, args, dict(kwargs), node)
    if getattr(obj, "_kspec_jit_kernel", False):
        if not obj._device:
            raise tr.error(JitTypeError, node, f"{obj.__name__!r} is a kernel; kernels call device functions only: decorate it with @jit.rawkernel(device=True)")
        if kwargs:
            raise tr.error(JitUnsupportedError, node, "device functions take positional arguments only")
        return device_call(tr, obj, args, node)
    if isinstance(obj, pytypes.FunctionType):
        return compile_time_call(tr, obj, args, kwargs, node)
    if kwargs and obj not in (builtins.range,):
        raise tr.error(JitUnsupportedError, node, f"keyword arguments are not supported when calling {getattr(obj, '__name__', obj)!r}")
    if obj is builtins.range:
        return _range_outside_for(tr, args, kwargs, node)
    if obj is np.dtype:  # numpy.dtype(t) and cupy.dtype(t) (the same class): a compile-time dtype
        return _dtype(tr, args, node)
    if obj in _CAST_BUILTINS or (isinstance(obj, type) and issubclass(obj, np.generic)) or isinstance(obj, np.dtype):
        return _cast(tr, obj, args, node)
    if obj is builtins.complex:
        return _complex(tr, args, node)
    if obj in (builtins.min, builtins.max):
        return _min_max(tr, "min" if obj is builtins.min else "max", args, node)
    if obj is builtins.abs:
        return math_call(tr, "abs", args, node)
    if obj is builtins.len:
        if len(args) == 1 and isinstance(args[0], TupleValue):
            return Const(len(args[0].items))
        if len(args) == 1 and isinstance(args[0], Value) and hasattr(args[0].type, "ndim") and args[0].type.ndim >= 1:
            return Value(f"{args[0].code}.shape[0]", INT64)
        raise tr.error(JitTypeError, node, "len() takes an array of at least one dimension or a tuple")
    name = _math_name(obj)
    if name is not None:
        if name in ("maximum", "fmax", "minimum", "fmin"):
            return _min_max(tr, "max" if "max" in name else "min", args, node)
        return math_call(tr, name, args, node)
    raise tr.error(JitUnsupportedError, node, f"{getattr(obj, '__name__', repr(obj))!r} cannot be called inside a jit kernel (supported: kspec.jit builtins, device functions, math.*, numpy ufuncs on scalars, casts, min/max/abs)")


def _math_name(obj: Any) -> str | None:
    if isinstance(obj, np.ufunc):
        return obj.__name__
    function = getattr(math, getattr(obj, "__name__", ""), None)
    if function is not None and function is obj:  # None is getattr's default, not a math function
        return str(function.__name__)
    # CuPy's ufuncs by what they have (cupy.exp is named 'cupy_exp'), whatever their class and module say (a test
    # of CuPy's module and class name missed CuPy 14.2's cupy.exp in cupyx.scipy.signal's gammatone kernel)
    for name in (getattr(obj, "name", None), getattr(obj, "__name__", None)):
        if isinstance(name, str) and name.startswith("cupy_") and hasattr(obj, "nin") and hasattr(obj, "nout"):
            return name.removeprefix("cupy_")
    return None


def _cast(tr: Any, obj: Any, args: list[Any], node: ast.AST) -> Any:
    target = _CAST_BUILTINS[obj] if obj in _CAST_BUILTINS else scalar_of(obj)
    if len(args) != 1:
        raise tr.error(JitTypeError, node, f"a cast to {target} takes one argument")
    value = args[0]
    if isinstance(value, Const) and is_number(value.value):
        return Const(np.dtype(target.name).type(value.value))
    if isinstance(value, Const) and isinstance(value.value, str) and target.kind in "fc":
        # float('nan'), numpy.float32('inf'): folded by Python (a Python float stays a weak literal)
        try:
            return Const(obj(value.value) if obj is builtins.float else np.dtype(target.name).type(value.value))
        except ValueError:
            raise tr.error(JitValueError, node, f"could not convert string to {target}: {value.value!r}") from None
    value = tr.scalar(value, node, None)
    tr.module.note_type(target)
    if target == BOOL and value.type != BOOL:
        zero = const_to_value(Const(0), value.type)
        return Value(f"({tr.operand(value, common_type(value.type, value.type))} != {zero.code})", BOOL) if value.type.name != "float16" else Value(cast(value, BOOL), BOOL)
    return Value(cast(value, target), target)


def _dtype(tr: Any, args: list[Any], node: ast.AST) -> Const:
    if len(args) != 1 or not isinstance(args[0], Const):
        raise tr.error(JitTypeError, node, "numpy.dtype(t) takes one dtype-like known at compile time (a name such as 'float32', a NumPy type, a dtype)")
    try:
        return Const(np.dtype(args[0].value))
    except TypeError as exc:
        raise tr.error(JitTypeError, node, f"numpy.dtype({args[0].value!r}): {exc}") from None


def _complex(tr: Any, args: list[Any], node: ast.AST) -> ScalarValue:
    if not 1 <= len(args) <= 2:
        raise tr.error(JitTypeError, node, "complex(real, imag=0)")
    parts = [cast(tr.scalar(a, node, FLOAT64), FLOAT64) for a in args] + ["0.0"] * (2 - len(args))
    tr.module.complex = True
    return Value(f"complex<double>({parts[0]}, {parts[1]})", scalar_of("complex128"))


def _min_max(tr: Any, which: str, args: list[Any], node: ast.AST) -> Any:
    if len(args) < 2:
        raise tr.error(JitTypeError, node, f"{which}() takes two or more scalars")
    if all(isinstance(a, Const) and is_number(a.value) for a in args):
        return Const((builtins.min if which == "min" else builtins.max)(a.value for a in args))
    typed = [tr.scalar(a, node, None) if not isinstance(a, Const) else None for a in args]
    anchor = next(v for v in typed if v is not None)
    values: list[ScalarValue] = [v if v is not None else tr.scalar(a, node, anchor.type) for v, a in zip(typed, args)]
    t = values[0].type
    for v in values[1:]:
        t = common_type(t, v.type)
    if t.kind == "c":
        raise tr.error(JitTypeError, node, f"{which}() of complex numbers is undefined")
    compute = t if t.name != "float16" else scalar_of("float32")
    code = cast(values[0], compute)
    for v in values[1:]:
        code = f"{which}({code}, {cast(v, compute)})"
    return Value(code if compute == t else cast(Value(code, compute), t), t)


class _CooperativeGroups:
    """``jit.cg``: ``this_thread_block()``, ``this_grid()``, ``sync``, ``memcpy_async``, ``wait``, ``wait_prior``."""

    def __init__(self) -> None:
        self.this_thread_block = Builtin("cg.this_thread_block", lambda tr, a, k, n: this_group(tr, "thread_block", a, k, n))
        self.this_grid = Builtin("cg.this_grid", lambda tr, a, k, n: this_group(tr, "grid_group", a, k, n))
        for name in ("sync", "memcpy_async", "wait", "wait_prior"):
            setattr(self, name, Builtin(f"cg.{name}", lambda tr, a, k, n, name=name: cg_function(tr, name, a, k, n)))

    def __repr__(self) -> str:
        return "<kspec.jit.cg>"


cg = _CooperativeGroups()
