"""What a fused function's programs look like from outside, without the tracer: how an argument is seen, a program
as data, the kernel name of a function. Light to import (no spec models): ``import kspec.fuse`` and the decorator
need only this, and the tracer loads on a function's first call (kspec/fuse/_program.py)."""

from __future__ import annotations

from typing import Any

from .._named_tuple import NamedTuple

# How one argument is seen by the trace: ("array", dtype, ndim), ("scalar", dtype, weak Python type or None),
# or ("none", "", None) for None.
ArgType = tuple[str, str, Any]


class StepForm(NamedTuple):
    """One kernel of a call, as data (:meth:`kspec.fuse.FusedFunction.program_form`)."""

    spec: Any  # an ElementwiseSpec or ReductionSpec
    inputs: tuple[tuple[str, int], ...]  # per input parameter: ("arg", argument index) or ("value", node id)
    produces: tuple[int, ...]  # node ids of its outputs, in order
    kwargs: dict[str, Any]  # a reduction's axis= / keepdims=


class ProgramForm(NamedTuple):
    """The kernels a call runs and how its result is assembled (kspec.grad differentiates it)."""

    steps: tuple[StepForm, ...]
    results: list[tuple[str, Any]]  # per returned item: ("node", id), ("arg", index), ("tuple", items), ...
    returns_tuple: bool
    args: tuple[Any, ...]  # the call's arguments, bound to positions


def check_name(name: str) -> str:
    """A kernel name for a function name that is not a C identifier (``<lambda>``)."""
    return name if name.isidentifier() and not name.startswith("_") else "fused_kernel"
