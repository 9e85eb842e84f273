"""Inductor calls a kspec op of one output directly, with no trip through PyTorch's dispatcher.

A compiled graph calls an opaque op through ``torch.ops``: the dispatcher converts the arguments and calls back
into Python (about 1.8 us a call on the H200 host), where Inductor calls a Triton kernel's launcher from its
own generated code. For an op with one output, this module registers an Inductor lowering that turns the
functional op into an ``ExternKernelOut`` node, as Inductor's own ``extern_kernels.mm`` is: the graph allocates
the output (reusing its dead buffers) and its generated code calls ``torch.ops.kspec.<name>.kspec_call(x, y,
out=buf)``, the kernel's out call with no dispatcher in between (a fused function's: its one kernel's, where a
traced call runs one: kspec/torch/_fused_out.py). The callable lives on the op's packet, so a graph that
Inductor loads from its cache in a new process finds it once the op is registered again.

The lowering is registered when functionalization first traces the op in a process that has loaded Inductor
(never by kspec itself: Inductor takes a second to import). Ops with several outputs, graphs with dynamic
sizes or symbolic scalars, and the C++ wrapper take the dispatcher path (the op's out variant or its
functional call), which gives the same results.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ._schema import OpSignature, arg_name

ATTRIBUTE = "kspec_call"  # torch.ops.kspec.<name>.kspec_call: the out call the generated code makes
_lowered: set[str] = set()  # op names whose lowering is registered


def direct_call(signature: OpSignature, writer: Callable[..., None], host_writer: Callable[..., None]) -> Callable[..., None]:
    """The callable generated code calls: ``(tensors..., out=, scalars and keywords by name)``. Tensors come
    positionally in the schema's order and scalars by name (an extern call puts its constants after its
    inputs); ``writer`` runs the kernel with the output after the inputs, ``host_writer`` on kspec's CPU
    device."""
    if not signature.scalars:

        def call_tensors(*tensors: Any, out: Any, **keywords: Any) -> None:
            (writer if out.is_cuda else host_writer)(*tensors, out, **keywords)

        return call_tensors

    # each input's keyword in the generated call when it is a scalar, None for a tensor: worked out once here
    keywords = [arg_name(name) if name in signature.scalars else None for name in signature.inputs]

    def call_with_scalars(*tensors: Any, out: Any, **named: Any) -> None:
        given = iter(tensors)
        args = [next(given) if keyword is None else named.pop(keyword) for keyword in keywords]
        (writer if out.is_cuda else host_writer)(*args, out, **named)

    return call_with_scalars


def lowered(name: str, signature: OpSignature, overload: Any,
            can_lower: Callable[[Sequence[Any]], bool] | None = None) -> bool:  # fmt: skip
    """Whether Inductor lowers op ``name`` to a direct call: registers the lowering the first time, where
    Inductor is loaded and the op has one output. ``can_lower``: whether a traced call (its arguments' example
    values) can take the direct call (None: every call with fixed sizes can)."""
    if name in _lowered:
        return True
    if signature.returns != 1 or "torch._inductor.lowering" not in sys.modules:
        return False
    try:
        from torch._inductor.lowering import register_lowering
    except ImportError:  # a PyTorch whose Inductor moved this: the dispatcher path serves
        return False
    register_lowering(overload, type_promotion_kind=None)(_lowering(name, signature, overload, can_lower))
    _lowered.add(name)
    return True


def _lowering(name: str, signature: OpSignature, overload: Any,
              can_lower: Callable[[Sequence[Any]], bool] | None) -> Callable[..., Any]:  # fmt: skip
    from torch._inductor import ir
    from torch._inductor.lowering import fallback_handler
    from torch._inductor.virtualized import V

    fallback = fallback_handler(overload, add_to_fallback_set=False)
    kernel_name = f"torch.ops.kspec.{name}.{ATTRIBUTE}"

    def lower(*args: Any, **kwargs: Any) -> Any:
        if V.graph.cpp_wrapper:
            return fallback(*args, **kwargs)
        value = V.graph.current_node.meta.get("val")
        tensors = [a for a in args if isinstance(a, ir.IRNode)]
        named = {arg_name(n): a for (n, a) in zip(signature.inputs, args) if n in signature.scalars}
        named.update(kwargs)
        if value is None or not _constant((value.shape, value.stride(), named)):
            return fallback(*args, **kwargs)
        if can_lower is not None and not can_lower(_example_values(V.graph.current_node)):
            return fallback(*args, **kwargs)
        layout = ir.FixedLayout(value.device, value.dtype, list(value.shape), list(value.stride()))
        node = ir.ExternKernelOut(
            layout=layout, inputs=[ir.ExternKernel.realize_input(t) for t in tensors], kwargs=named,
            python_kernel_name=kernel_name,
        )  # fmt: skip
        return ir.TensorBox.create(node)

    return lower


def _example_values(node: Any) -> list[Any]:
    """A graph node's positional arguments as they were traced: example values of tensors, constants as they are."""
    return [a.meta.get("val") if hasattr(a, "meta") else a for a in node.args]


def _constant(value: Any) -> bool:
    """Whether ``value`` (nested tuples, lists and dicts) holds only Python constants: no SymInt, no sympy
    expression, nothing the generated code would have to compute."""
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return True
    if isinstance(value, (tuple, list)):
        return all(_constant(v) for v in value)
    if isinstance(value, dict):
        return all(_constant(v) for v in value.values())
    return False
