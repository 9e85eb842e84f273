"""The objects kernels name in place of CUDA's (``jit.syncthreads``, ``jit.threadIdx``, ``jit.warpsize``), and
:func:`lift`, which turns what a name lookup finds into what the translator holds.

A marker does nothing in ordinary Python (a :class:`Builtin` called outside a kernel raises, saying so); the
translator recognises it and emits the CUDA it stands for. The markers themselves are made in _builtins.py.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

from .._errors import KspecNotImplementedError
from ._errors import JitUnsupportedError
from ._types import UINT32, Scalar
from ._values import Const, ScalarValue, Value


class Builtin:
    """A function usable only inside kernels; ``emit(tr, args, kwargs, node)`` makes its C++."""

    def __init__(self, name: str, emit: Callable[..., Any], doc: str = "") -> None:
        self.name = name
        self.emit = emit
        self.__doc__ = doc
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KspecNotImplementedError(
            f"kspec.jit.{self.name}() can only be used inside a function decorated with @kspec.jit.rawkernel"
        )

    def __repr__(self) -> str:
        return f"<kspec.jit builtin {self.name}>"


class Dim3:
    """``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``: ``.x``, ``.y``, ``.z`` (uint32)."""

    def __init__(self, cuda_name: str) -> None:
        self.cuda_name = cuda_name

    def __repr__(self) -> str:
        return f"<kspec.jit {self.cuda_name}>"


class Special:
    """A name that is a value inside kernels (``warpsize``)."""

    def __init__(self, name: str, code: str, type_: Scalar) -> None:
        self.name, self.code, self.type = name, code, type_

    def __repr__(self) -> str:
        return f"<kspec.jit {self.name}>"


def lift(obj: Any) -> Any:
    """A Python object found by name lookup, as the translator holds it."""
    if isinstance(obj, Special):
        return Value(obj.code, obj.type)
    return Const(obj)


def dim3_attribute(tr: Any, obj: Dim3, attr: str, node: ast.AST) -> ScalarValue:
    """``threadIdx.x`` and its kin: the CUDA built-in variable's member."""
    if attr not in ("x", "y", "z"):
        raise tr.error(JitUnsupportedError, node, f"{obj.cuda_name} has .x, .y and .z, not .{attr}")
    return Value(f"{obj.cuda_name}.{attr}", UINT32)
