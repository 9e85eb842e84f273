"""Cooperative groups (``jit.cg``): the groups' methods and the ``cg.*`` functions, as CUDA 13's
``cooperative_groups.h`` and ``cooperative_groups/memcpy_async.h`` declare them.

``this_grid()`` makes the kernel launch cooperatively (``grid.sync()`` needs every block resident).
Methods returning ``dim3`` give a value with ``.x``, ``.y``, ``.z`` (uint32); ranks and counts are
``unsigned int`` for a thread block and ``unsigned long long`` for the grid, as in the header.
"""

from __future__ import annotations

import ast
from typing import Any

from ._builtin_calls import element
from ._errors import JitTypeError, JitUnsupportedError
from ._types import BOOL, UINT32, UINT64, Dim3Type, Group, JitType, Void
from ._values import Const, Value

DIM3 = Dim3Type()

# CUDA 13: thread_block and grid_group member functions (all take no arguments).
GROUP_METHODS: dict[str, dict[str, JitType]] = {
    "thread_block": {
        "sync": Void(), "thread_rank": UINT32, "size": UINT32, "num_threads": UINT32,
        "group_index": DIM3, "thread_index": DIM3, "group_dim": DIM3, "dim_threads": DIM3,
    },
    "grid_group": {
        "sync": Void(), "is_valid": BOOL, "thread_rank": UINT64, "size": UINT64, "num_threads": UINT64,
        "group_dim": DIM3, "dim_threads": DIM3, "thread_index": DIM3, "dim_blocks": DIM3, "num_blocks": UINT64,
        "block_index": DIM3, "block_rank": UINT64,
    },
}


class GroupMethod:
    """A bound method of a cooperative group (``g.sync``), called next."""

    def __init__(self, group: Value[Group], name: str) -> None:
        self.group, self.name = group, name


def this_group(tr: Any, kind: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[Group]:
    """``cg.this_thread_block()`` / ``cg.this_grid()``."""
    if args or kwargs:
        raise tr.error(JitTypeError, node, "takes no arguments")
    tr.module.cooperative_groups = True
    if kind == "grid_group":
        tr.module.grid_sync = True  # the kernel must then be launched cooperatively
    short = "this_grid" if kind == "grid_group" else "this_thread_block"
    return Value(f"cooperative_groups::{short}()", Group(kind))


def method_call(tr: Any, method: GroupMethod, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[JitType]:
    kind = method.group.type.kind
    methods = GROUP_METHODS[kind]
    if method.name not in methods:
        raise tr.error(JitUnsupportedError, node, f"a {kind} has the methods {', '.join(sorted(methods))}, not {method.name}()")
    if args or kwargs:
        raise tr.error(JitTypeError, node, f"{method.name}() takes no arguments")
    return Value(f"{method.group.code}.{method.name}()", methods[method.name])


def _group_arg(tr: Any, name: str, args: list[Any], node: ast.AST) -> Value[Group]:
    group = args[0] if args else None
    if not (isinstance(group, Value) and isinstance(group.type, Group)):
        raise tr.error(JitTypeError, node, f"cg.{name} takes a group (cg.this_thread_block() or cg.this_grid()) first")
    return group


def cg_function(tr: Any, name: str, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[Void]:
    """``cg.sync(g)``, ``cg.wait(g)``, ``cg.wait_prior(g, n)``, ``cg.memcpy_async(...)``."""
    group = _group_arg(tr, name, args, node)
    if name in ("sync", "wait"):
        if len(args) != 1 or kwargs:
            raise tr.error(JitTypeError, node, f"cg.{name}(group) takes the group only")
        if name == "wait":
            tr.module.memcpy_async = True
        return Value(f"cooperative_groups::{name}({group.code})", Void())
    if name == "wait_prior":
        step = args[1] if len(args) == 2 else None
        if kwargs or not (isinstance(step, Const) and isinstance(step.value, int) and not isinstance(step.value, bool) and step.value >= 0):
            raise tr.error(JitTypeError, node, "cg.wait_prior(group, step): step is an int >= 0 known at compile time")
        tr.module.memcpy_async = True
        return Value(f"cooperative_groups::wait_prior<{step.value}>({group.code})", Void())
    return _memcpy_async(tr, group, args, kwargs, node)


def _memcpy_async(tr: Any, group: Value[Group], args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Value[Void]:
    """``memcpy_async(group, dst, dst_idx, src, src_idx, size, *, aligned_size=None)``: ``size`` bytes from
    ``&src[src_idx]`` to ``&dst[dst_idx]``; ``aligned_size=N`` promises both addresses and the size are
    multiples of N bytes (``cuda::aligned_size_t<N>``), which lets the copy move up to 16 bytes at a time."""
    usage = "cg.memcpy_async(group, dst, dst_idx, src, src_idx, size, *, aligned_size=None)"
    if len(args) != 6 or set(kwargs) - {"aligned_size"}:
        raise tr.error(JitTypeError, node, f"{usage}: takes six positional arguments")
    dst = _element_address(tr, "dst", args[1], args[2], node)
    src = _element_address(tr, "src", args[3], args[4], node)
    if dst.type != src.type:
        raise tr.error(JitTypeError, node, f"cg.memcpy_async: dst holds {dst.type} but src holds {src.type}; copy between arrays of one dtype")
    size = tr.scalar(args[5], node, UINT64)
    if not size.type.is_int:
        raise tr.error(JitTypeError, node, f"cg.memcpy_async: size (in bytes) must be an integer, got {size.type}")
    count = f"static_cast<size_t>({size.code})"
    aligned = kwargs.get("aligned_size", Const(None))
    if not isinstance(aligned, Const):
        raise tr.error(JitTypeError, node, "cg.memcpy_async: aligned_size must be known at compile time (an int power of two, or None)")
    if aligned.value is not None:
        n = aligned.value
        if not (isinstance(n, int) and not isinstance(n, bool) and n > 0 and n & (n - 1) == 0):
            raise tr.error(JitTypeError, node, f"cg.memcpy_async: aligned_size must be a power of two (4, 8, 16...), got {n!r}")
        tr.module.aligned_size = True
        count = f"cuda::aligned_size_t<{n}>({count})"
    tr.module.memcpy_async = True
    return Value(f"cooperative_groups::memcpy_async({group.code}, {dst.code}, {src.code}, {count})", Void())


def _element_address(tr: Any, what: str, array: Any, index: Any, node: ast.AST) -> Value[JitType]:
    """``&array[index]`` for an array or shared memory; its type is the element type."""
    target = element(tr, array, index, node, f"cg.memcpy_async's {what}")
    return Value(f"&{target.code}", target.type)
