"""The PyTorch operator schema of a kspec kernel or fused function.

Every input is a ``Tensor`` except the inputs named as scalars (a spec's declared ``scalars``, or
``register(..., scalars=...)``): those take Python numbers, typed by their declared type (``float``, ``int``,
``bool``; ``Scalar`` for a placeholder, a complex type or a fused function's argument, which keeps the
number's Python type, as kspec's typing rules want). A reduction's ``axis`` and ``keepdims`` are keyword
arguments of the schema (``int[]? axis=None, bool keepdims=False``): ``torch.compile`` passes constants
through as they are, with no recompile. An elementwise kernel with ``raw`` parameters takes ``size``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from .._named_tuple import NamedTuple
from .. import dtypes
from .._errors import KspecNotImplementedError, KspecTypeError, KspecValueError

# argument names the schema language or this module gives a meaning of its own
_RESERVED = {"self", "out", "axis", "keepdims", "size", "Tensor", "Scalar", "int", "float", "bool", "complex"}


class OpSignature(NamedTuple):
    """What an operator takes and returns."""

    schema: str  # "(Tensor x, float a, *, ...) -> Tensor"
    inputs: tuple[str, ...]  # the kernel's input names, in order
    scalars: frozenset[str]
    returns: int  # number of tensors returned
    returns_tuple: bool  # a tuple (even of one) rather than one tensor
    out_schema: str | None = None  # the out variant's: the inputs, then the outputs it writes; None: none


def _scalar_type(declared: str | None) -> str:
    if declared is None or dtypes.is_placeholder(declared):
        return "Scalar"
    kind = dtypes.BY_NAME[declared].kind
    return {"b": "bool", "i": "SymInt", "u": "SymInt", "f": "float"}.get(kind, "Scalar")


def arg_name(name: str) -> str:
    """The schema's name for input ``name`` (one the schema language reserves gets a trailing underscore)."""
    return f"{name}_" if name in _RESERVED else name


def _scalar_names(what: str, inputs: Sequence[str], scalars: Sequence[str] | None, default: Sequence[str]) -> frozenset[str]:
    if scalars is None:
        return frozenset(default)
    if isinstance(scalars, str) or not all(isinstance(s, str) for s in scalars):
        raise KspecTypeError(f"kspec.torch.register: scalars: expected a sequence of input names, got {scalars!r}")
    unknown = [s for s in scalars if s not in inputs]
    if unknown:
        raise KspecValueError(f"kspec.torch.register: scalars: {what} has no input {unknown[0]!r} (inputs: {', '.join(inputs)})")
    return frozenset(scalars)


def _schema(args: list[str], keywords: list[str], returns: int, returns_tuple: bool) -> str:
    params = ", ".join(args + (["*", *keywords] if keywords else []))
    result = "Tensor" if returns == 1 and not returns_tuple else f"({', '.join(['Tensor'] * returns)})"
    return f"({params}) -> {result}"


def _out_schema(args: list[str], keywords: list[str], inputs: Sequence[str], returns: int) -> str:
    """The out variant: the outputs follow the inputs as tensors it writes (``Tensor(a0!) out0``), and it returns
    nothing, so that a compiled graph allocates them (and reuses its dead buffers for them)."""
    taken = {arg_name(n) for n in inputs}
    names = []
    for k in range(returns):
        name = f"out{k}"
        while name in taken:
            name += "_"
        names.append(f"Tensor(a{k}!) {name}")
    return _schema(args + names, keywords, 0, True)  # "-> ()"


def spec_kernel_signature(kernel: Any, kind: str, scalars: Sequence[str] | None) -> OpSignature:
    """An ElementwiseKernel's or ReductionKernel's schema (``kind``: "elementwise" / "reduction")."""
    params = kernel.in_params
    names = [p.name for p in params]
    chosen = _scalar_names(f"kernel '{kernel.name}'", names, scalars, kernel.scalars)
    for p in params:
        if p.name in chosen and p.raw:
            raise KspecValueError(f"kspec.torch.register: scalars: {p.name!r} of kernel '{kernel.name}' is raw (an array)")
    if kind == "elementwise" and kernel.no_return:
        raise KspecNotImplementedError(
            f"kspec.torch.register: kernel '{kernel.name}' has no_return=True: it writes into given outputs, and "
            "kspec.torch registers functional operators (they return new tensors) only"
        )
    args = [f"{_scalar_type(p.type) if p.name in chosen else 'Tensor'} {arg_name(p.name)}" for p in params]
    keywords = []
    if kind == "reduction":
        keywords = ["int[]? axis=None", "bool keepdims=False"]
    elif any(p.raw for p in kernel.params):
        keywords = ["int? size=None"]
    returns_tuple = kernel.nout > 1 or (kind == "elementwise" and kernel.return_tuple)
    return OpSignature(_schema(args, keywords, kernel.nout, returns_tuple), tuple(names), chosen, kernel.nout, returns_tuple,
                       _out_schema(args, keywords, names, kernel.nout))


def fused_signature(fused: Any, scalars: Sequence[str] | None, returns: int) -> OpSignature:
    """A fused function's schema: its positional parameters (no ``*args``, no keyword-only ones); ``returns``
    tensors, a tuple when more than one."""
    try:
        parameters = list(inspect.signature(fused.__wrapped__).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not parameters or any(p.kind not in positional for p in parameters):
        raise KspecNotImplementedError(
            f"kspec.torch.register: fused function {fused.__name__!r}: register needs a function with named "
            "positional parameters only (no *args, **kwargs or keyword-only ones)"
        )
    if isinstance(returns, bool) or not isinstance(returns, int) or returns < 1:
        raise KspecTypeError(f"kspec.torch.register: returns: expected the number of arrays the function returns (>= 1), got {returns!r}")
    names = [p.name for p in parameters]
    chosen = _scalar_names(f"fused function {fused.__name__!r}", names, scalars, ())
    args = [f"{'Scalar' if n in chosen else 'Tensor'} {arg_name(n)}" for n in names]
    return OpSignature(_schema(args, [], returns, returns > 1), tuple(names), chosen, returns, returns > 1)
