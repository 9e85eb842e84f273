"""The record a trace leaves: a graph of typed values, one node per step the function took.

A node knows its dtype and ndim (what NumPy would give the same function), never a shape: shapes are
the call's business, so one traced graph serves every call with the same argument types.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# Node kinds.
ARG = "arg"  # a function argument: array (ndim >= 0) or scalar (ndim == -1)
CONST = "const"  # a constant of the function (a Python or NumPy number)
UFUNC = "ufunc"  # one output of a NumPy ufunc: attrs name, loop_in, loop_out, index
CAST = "cast"  # astype / an implicit conversion: attrs none (from the input's dtype to the node's)
WHERE = "where"  # where(cond, x, y) with x and y already of the node's dtype
IMAG = "imag"  # imaginary part of a complex value
REDUCE = "reduce"  # attrs op, axes, keepdims, acc (accumulator dtype)

SCALAR_NDIM = -1  # a scalar argument or constant: broadcasts like a 0-d array, passed by value


@dataclass(eq=False)
class Node:
    """One value of the traced function. Identity is the node itself (``eq=False``)."""

    kind: str
    dtype: str  # kspec dtype name
    ndim: int  # SCALAR_NDIM for scalars
    inputs: tuple["Node", ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    weak: type | None = None  # Python scalar type of a weak value (NEP 50), else None
    where: str = ""  # "file.py:12" of the step, for error messages

    @property
    def is_scalar(self) -> bool:
        return self.ndim == SCALAR_NDIM

    @property
    def is_array_arg(self) -> bool:
        return self.kind == ARG and not self.is_scalar

    def __repr__(self) -> str:
        label = self.attrs.get("name", self.attrs.get("op", ""))
        return f"<{self.kind} {label} {self.dtype} ndim={self.ndim}>"


def result_ndim(nodes: Iterable[Node]) -> int:
    """Broadcast ndim of several operands (SCALAR_NDIM when all are scalars)."""
    return max((n.ndim for n in nodes), default=SCALAR_NDIM)


def postorder(roots: Iterable[Node], stop: Any = None) -> Iterator[Node]:
    """Every node reachable from ``roots``, inputs before users, each once. ``stop(node)`` True: the node
    is yielded but its inputs are not followed (a materialized value)."""
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(r, False) for r in reversed(list(roots))]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded or (stop is not None and stop(node)) or not node.inputs:
            seen.add(id(node))
            yield node
            continue
        stack.append((node, True))
        for child in reversed(node.inputs):
            if id(child) not in seen:
                stack.append((child, False))
