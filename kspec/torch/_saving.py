"""A fused function's forward that keeps what its backward reads.

A fused function of several kernels passes values between them (an exponential, then its row sums, then the
quotient). Its backward reads those values; recomputing them means running the forward kernels again (their
inputs read and their results written once more), while keeping them costs nothing the forward did not already
do: they were written to memory between its kernels. So where autograd records, a fused op runs
``kspec::<op>__saving``: the same kernels, one by one, returning the function's results and, as a hidden
``Tensor[]``, the values between its kernels; its autograd (kspec/torch/_autograd.py, ``hidden``) saves them
for the backward, which then runs no forward kernel (kspec/torch/_backward_of.py, FusedRule). Values computed
*inside* one kernel are recomputed there (registers: no memory traffic). A program of one kernel has nothing
between kernels: it runs ``kspec::<op>__single``, the plain op's twin with the same autograd rule. Outside
autograd (no input requires a gradient, or ``torch.no_grad``) the plain op runs, below autograd, as before.

Routing is the plain op's ``Autograd`` kernel, so eager calls, ``torch.compile`` (AOTAutograd traces through it)
and the op's own ``torch.ops.kspec.<op>`` name all take it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import KspecError
from ..grad import assemble, run_forward
from ._tensors import check_cpu_device, empty_like_spec, first_device, host_arrays, stand_ins

NAMESPACE = "kspec"
SUFFIX = "__saving"
SINGLE = "__single"


def saved_nodes(program: Any) -> list[int]:
    """The values a program's backward reads that its results do not hold: every node a kernel produces that is
    not returned, in kernel order (the op and the rule agree on it: FusedRule.kept keeps it per program)."""
    returned = {payload for kind, payload in program.results if kind == "node"}
    return [node for step in program.steps for node in step.produces if node not in returned]


def define_saving(lib: Any, fused: Any, name: str, signature: Any, rule: Any, plain: Any, single: Any) -> tuple[Any, Any]:
    """Define ``kspec::<name>__saving`` (fake, CUDA and CPU implementations) and route the plain op ``name``'s
    autograd calls to it where the call's program keeps values, else to ``single`` (the plain op's twin with
    the rule's autograd: one kernel keeps nothing, and a hidden empty list costs PyTorch's output handling per
    call). Returns the saving op's OpOverload, and its forward on CUDA and on host tensors as eager calls take it
    (``(args, keywords) -> (results, kept values)``: one kernel keeps none)."""
    import torch

    saving = f"{name}{SUFFIX}"
    params = signature.schema.split(" -> ")[0]
    lib.define(f"{saving}{params} -> ({', '.join(['Tensor'] * signature.returns + ['Tensor[]'])})")

    def program_of(args: Sequence[Any]) -> Any:
        try:
            return rule.program(args)
        except KspecError:
            return None  # not differentiable: the backward says so, when (and only when) a gradient is asked

    def fake(*args: Any) -> Any:
        program = program_of(args)
        specs = stand_ins(args)
        rule.prepare(specs)  # the backward's ops, registered while the forward is traced (see FusedRule)
        device = first_device(args)
        results = [empty_like_spec(s, device) for s in fused.output_specs(*specs)]
        kept = []
        nodes = rule.kept(program)
        if nodes:
            abstract = program._replace(args=tuple(specs))
            values = run_forward(abstract, lambda step, inputs: step.kernel.output_specs(*inputs, **step.kwargs))
            kept = [empty_like_spec(values[node], device) for node in nodes]
        return (*results, kept)

    def run(args: Sequence[Any], to_host: bool) -> tuple[tuple[Any, ...], list[Any], Any]:
        """(the results, the values kept, the program: None where it has no backward)."""
        program = program_of(args)
        nodes = rule.kept(program)
        arrays = tuple(host_arrays(args) if to_host else args)  # the CPU device takes NumPy arrays
        if not nodes:
            result = fused(*arrays)
            values: dict[int, Any] = {}
        else:
            on_arrays = program._replace(args=arrays)
            values = run_forward(on_arrays, lambda step, inputs: step.kernel(*inputs, **step.kwargs))
            result = assemble(on_arrays, values)
        results = result if isinstance(result, tuple) else (result,)
        kept = [values[node] for node in nodes]
        if to_host:
            results, kept = tuple(torch.from_numpy(r) for r in results), [torch.from_numpy(v) for v in kept]
        return results, kept, program

    def on_cuda(*args: Any) -> Any:
        results, kept, _ = run(args, False)
        return (*results, kept)

    def on_cpu(*args: Any) -> Any:
        check_cpu_device(saving)
        results, kept, _ = run(args, True)
        return (*results, kept)

    torch.library.register_fake(f"{NAMESPACE}::{saving}", fake, lib=lib)
    lib.impl(saving, on_cuda, "CUDA")
    lib.impl(saving, on_cpu, "CPU")
    saving_op = getattr(torch.ops.kspec, saving).default
    returns_tuple = signature.returns_tuple

    def route(*args: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            if not rule.kept(program_of(args)):
                return single(*args)
            made = saving_op(*args)
            return tuple(made[:-1]) if returns_tuple else made[0]
        with torch._C._AutoDispatchBelowAutograd():
            return plain(*args)

    lib.impl(name, route, "Autograd")

    def recorded(to_host: bool) -> Any:  # kspec/torch/_eager.py: the same forward, without the dispatcher; its
        # program goes to the backward (the rule's, found again there otherwise)

        def forward(args: Sequence[Any], keywords: Any) -> tuple[tuple[Any, ...], Sequence[Any], Any]:
            if to_host:
                check_cpu_device(saving)
            return run(args, to_host)

        return forward

    return saving_op, (recorded(False), recorded(True))

