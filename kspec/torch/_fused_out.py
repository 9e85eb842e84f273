"""A fused function's op as an Inductor direct call: its one kernel, given the output to write.

A fused op in a compiled graph is otherwise an opaque call through the dispatcher, and through its autograd
kernel's Python (the op has a backward), on every step: about as much host time as the kernel's launch again.
Where the function runs one elementwise kernel on its arguments as they are (the common case, and what
``FusedFunction.single_kernel`` answers from the arguments' dtypes and ranks), the graph can allocate the result
and call that kernel with it, as it calls a spec kernel's out variant (kspec/torch/_inductor.py). Any other
program keeps the op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..kernels import ElementwiseKernel
from ._tensors import stand_ins


def fused_writer(fused: Any) -> Callable[..., None]:
    """``write(*inputs, out)``: the function's one kernel on the inputs, writing ``out``. The last kernel's
    prepared call is tried first (it answers for the same argument layouts only); the kernel is looked up
    again by the arguments' types on a miss."""
    last: list[Any] = [None]
    not_prepared = ElementwiseKernel.NOT_PREPARED

    def write(*args: Any) -> None:
        kernel = last[0]
        if kernel is not None and kernel.call_prepared(args) is not not_prepared:
            return
        kernel = fused.single_kernel(*args[:-1])
        if kernel is None:  # a graph from Inductor's cache, made before the function changed: its result, copied
            args[-1][...] = fused(*args[:-1])
            return
        last[0] = kernel
        kernel(*args)

    return write


def lowerable(fused: Any) -> Callable[[Sequence[Any]], bool]:
    """Whether a traced call (its arguments' fake tensors and numbers) runs one kernel that can write its output."""
    def check(values: Sequence[Any]) -> bool:
        try:
            return fused.single_kernel(*stand_ins(values)) is not None
        except (TypeError, ValueError):
            return False  # the op's own call will say what is wrong

    return check
