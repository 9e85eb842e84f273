"""Where a kspec op's gradients come from: the gradient rule kspec/torch/_autograd.py calls.

- A spec kernel with a ``grad`` table (or ``"auto"``): its backward kernel's op, on the call's own arguments; a
  reduction's output and gradient are viewed with the reduced axes kept (extent 1), so that the backward kernel,
  elementwise over the inputs' shape, broadcasts them back. Where an input with a gradient is broadcast (a bias),
  the op is kspec.grad's SummedBackward instead: its gradients come in their inputs' shapes, summed in the
  backward's own pass where the layout allows (kspec/grad/_summed.py).
- A fused function: for the call's argument types, its kernels with their derived backwards
  (kspec.grad.differentiable_program); the values between kernels come from the forward (the saving op kept them:
  kspec/torch/_saving.py), or where a forward did not keep them are recomputed by the kernels' ops, then the
  backward kernels' ops run in reverse. A kernel that cannot be differentiated raises a
  kspec error when (and only when) a gradient is asked.

The ops are registered with :func:`kspec.torch.register` (passed in: this module is below it) the first time a
backward needs them, so a model that never trains defines none.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from .._named_tuple import NamedTuple
from ..grad import (
    DiffProgram,
    DiffStep,
    broadcast_gradients,
    by_input,
    differentiable_program,
    kept_shape,
    layouts_key,
    result_nodes,
    run_backward,
    run_forward,
    shared_for,
    sum_to_shape,
    summed_backward,
)
from .._errors import KspecError
from ..kernels import ArraySpec
from ._autograd import GradientRule
from ._saving import saved_nodes
from ._tensors import array_spec


def of_spec_kernel(kernel: Any, op: str, params: Sequence[str], scalars: Sequence[str], register: Any,
                   reduction: bool) -> GradientRule:  # fmt: skip
    """A spec kernel's rule. Its backward ops (and the shared variant's) are registered now, under names made from
    the forward op's: a compiled backward served from Inductor's caches in a later process calls them by name, and
    traces nothing that would register them."""
    names = kernel.spec.backward()[0]
    variants = (False, True) if kernel.spec.shared_gradients() else (False,)
    backward_ops = {
        shared: register(kernel.backward_kernel(shared), f"{op}__backward{'_shared' if shared else ''}", scalars=sorted(scalars))
        for shared in variants
    }
    summed_op = register(summed_backward(kernel), f"{op}__backward_summed", scalars=sorted(scalars))

    def gradients(args: Sequence[Any], keywords: Mapping[str, Any], outputs: Sequence[Any], grads: Sequence[Any],
                  needed: Sequence[bool], found: Any = None) -> list[Any]:  # fmt: skip
        inputs = args[: len(params)]
        if reduction:
            kept = kept_shape([tuple(getattr(a, "shape", ())) for a in inputs], keywords.get("axis"))
            outputs, grads = [o.reshape(kept) for o in outputs], [g.reshape(kept) for g in grads]
        wanted = [n for n, need in zip(params, needed) if need and n in names]
        if broadcast_gradients(wanted, params, inputs):  # comes summed to its shape, in the backward's pass where it can
            made = summed_op(*inputs, *outputs, *grads)
            by_name = dict(zip(names, made if isinstance(made, (tuple, list)) else (made,)))
        else:  # nothing to sum that is asked for: a broadcast input's gradient from the earlier one's, never summed
            shared = shared_for(kernel.spec, inputs)
            by_name = by_input(names, backward_ops[bool(shared)](*inputs, *outputs, *grads), shared)
        return [by_name.get(param) for param in params]

    return gradients


class FusedRule:
    """A fused function's rule. Its ops (each kernel's, for the recomputation, and each backward's) depend on the
    call's argument types, so :meth:`prepare` registers them whenever the forward op is traced (its fake runs
    then), under names made from the forward op's and the kernels' contents: a compiled backward from Inductor's
    caches finds them in a later process."""

    def __init__(self, fused: Any, op: str, register: Any) -> None:
        self.fused, self.op, self.register = fused, op, register
        self._programs: dict[tuple[Any, ...], Any] = {}
        self._by_layout: dict[tuple[Any, ...], Any] = {}  # the same programs by the tensors' layouts (kspec.grad)
        self._kept: dict[int, _Known] = {}  # id(program) -> what its backwards read (the program kept: its id stays)
        self._ops: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # (id(kernel), scalars) -> (kernel, its op)

    def program(self, args: Sequence[Any]) -> Any:
        """The program for such arguments (shapes, dtypes, strides, devices; numbers by value), made once: a
        training loop asks on every backward."""
        import torch

        layouts = layouts_key(args)  # cheaper than the ArraySpecs: asked on every forward that autograd records
        found = self._by_layout.get(layouts) if layouts is not None else None
        if found is not None:
            return found
        stand_ins = tuple(array_spec(a) if isinstance(a, torch.Tensor) else a for a in args)
        key = _program_key(stand_ins)
        found = self._programs.get(key) if key is not None else None
        if found is None:
            found = differentiable_program(self.fused, stand_ins, {}, f"kspec.torch: op kspec::{self.op}")
            if key is not None:
                if len(self._programs) >= _KEPT:
                    del self._programs[next(iter(self._programs))]
                self._programs[key] = found
        if layouts is not None and key is not None:
            if len(self._by_layout) >= _KEPT:
                del self._by_layout[next(iter(self._by_layout))]
            self._by_layout[layouts] = found
        return found

    def kept(self, program: Any) -> list[int]:
        """The values between ``program``'s kernels a saving forward keeps (kspec/torch/_saving.py's
        ``saved_nodes``), found once per program: every forward that autograd records asks."""
        if program is None:
            return []
        return self._known(program).kept

    def _known(self, program: Any) -> _Known:
        found = self._kept.get(id(program))
        if found is None or found.program is not program:
            if len(self._kept) >= _KEPT:
                del self._kept[next(iter(self._kept))]
            found = self._kept[id(program)] = _Known(program, saved_nodes(program), result_nodes(program), {})
        return found

    def prepare(self, stand_ins: Sequence[Any]) -> None:
        """Register the ops a backward of a call with such arguments runs (nothing where there is none)."""
        try:
            program = differentiable_program(self.fused, list(stand_ins), {}, f"kspec.torch: op kspec::{self.op}")
        except KspecError:
            return  # raised again, and said, when a gradient is asked
        ops = _Ops(self.register, self.op, self._ops)
        for step in program.steps:  # an argument's stand-in or number; a value between kernels is a tensor (None)
            inputs = [program.args[i] if kind == "arg" else None for kind, i in step.inputs]
            ops.forward_op(step, inputs)
            for variant in ("plain", "summed", *(("shared",) if step.kernel.spec.shared_gradients() else ())):
                ops.backward_op(step, variant, inputs)

    def __call__(self, args: Sequence[Any], keywords: Mapping[str, Any], outputs: Sequence[Any], grads: Sequence[Any],
                 needed: Sequence[bool] = (), found: Any = None) -> list[Any]:  # fmt: skip
        """The gradients; ``found``: the program an eager forward ran (:meth:`program` of the same arguments)."""
        known = self._known(found if found is not None else self.program(args))
        steps, results, returns_tuple, _ = known.program
        program = DiffProgram(steps, results, returns_tuple, tuple(args))  # _replace costs ~3x this
        saved = {node: out for node, out in zip(known.returned, outputs) if node is not None}
        # the values between kernels the saving op kept (kspec/torch/_saving.py); a forward kernel runs again only
        # for what is in neither
        saved.update(zip(known.kept, outputs[len(known.returned):]))
        wanted = tuple(needed) or None
        chosen = known.chosen.get(wanted)
        if chosen is None:
            chosen = known.chosen[wanted] = {}
        ops = _Ops(self.register, self.op, self._ops, wanted, chosen)
        values = run_forward(program, ops.forward, saved)
        return run_backward(program, values, grads, ops, ops.needed)


class _Known(NamedTuple):
    """What every backward of one program reads, found once per program."""

    program: DiffProgram
    kept: list[int]  # the nodes a saving forward keeps (kspec/torch/_saving.py's saved_nodes)
    returned: list[int | None]  # the node of each returned item (kspec.grad's result_nodes)
    # per ``needed``: id(step) -> its backward's choice (_Ops.backward); the choice reads the inputs' shapes, and a
    # program is made for (and found by) its arguments' shapes
    chosen: dict[tuple[bool, ...] | None, dict[int, tuple[Any, dict[str, str], tuple[int, ...] | None]]]


_KEYABLE = (ArraySpec, int, float, complex, bool)  # stand-ins a program is kept by (a traced scalar is not)
_KEPT = 64  # programs per fused op: the oldest dropped beyond this


def _program_key(stand_ins: Sequence[Any]) -> tuple[Any, ...] | None:
    """What a program is kept by: each stand-in with its type (1, 1.0 and True differ); None where a stand-in is
    traced (a symbolic size or scalar: hashing it would add a guard)."""
    for a in stand_ins:
        if not isinstance(a, _KEYABLE):
            return None
        if isinstance(a, ArraySpec) and not all(type(n) is int for n in (*a.shape, *a.strides)):
            return None
    return tuple((type(a), a) for a in stand_ins)


class _Ops:
    """The reverse pass on tensors, through kspec ops (what AOTAutograd can trace), named after the forward op."""

    def __init__(self, register: Any, prefix: str, known: dict[tuple[Any, ...], tuple[Any, Any]],
                 needed: tuple[bool, ...] | None = None, chosen: dict[int, Any] | None = None) -> None:  # fmt: skip
        self.register, self.prefix, self.known = register, prefix, known
        self.needed = needed  # per argument of the fused function: whether its gradient is asked (None: all)
        self.chosen = chosen  # id(step) -> what backward chose for it (_Known.chosen): None, choose every time

    def _op(self, kernel: Any, params: Sequence[str], inputs: Sequence[Any]) -> Any:
        """``kernel``'s op, named by the forward op and the kernel's spec (the same in every process); the inputs
        that are numbers are its scalars (tensors, stand-ins and None are not). ``known`` keeps the ops found
        (register's lookup builds the op's signature: ~25 us, on every backward)."""
        scalars = tuple(p for p, a in zip(params, inputs) if isinstance(a, numbers.Number))
        key = (id(kernel), scalars)
        found = self.known.get(key)
        if found is None or found[0] is not kernel:
            if len(self.known) >= 4 * _KEPT:
                del self.known[next(iter(self.known))]
            op = self.register(kernel, f"{self.prefix}__{kernel.spec_digest[:12]}", scalars=list(scalars))
            found = self.known[key] = (kernel, op)  # the kernel kept: its id stays its own
        return found[1]

    def forward_op(self, step: DiffStep, inputs: Sequence[Any]) -> Any:
        return self._op(step.kernel, step.params, inputs)

    def backward_op(self, step: DiffStep, variant: str, inputs: Sequence[Any]) -> Any:
        """The step's backward op: ``plain``, ``summed`` (its gradients in their inputs' shapes) or ``shared``
        (without the gradients equal to an earlier input's)."""
        if variant == "summed":
            return self._op(summed_backward(step.kernel), step.params, inputs)
        return self._op(step.kernel.backward_kernel(variant == "shared"), step.params, inputs)

    def forward(self, step: DiffStep, inputs: list[Any]) -> Any:
        return self.forward_op(step, inputs)(*inputs, **step.kwargs)

    def backward(self, step: DiffStep, inputs: list[Any], outputs: list[Any], grads: list[Any]) -> Sequence[Any]:
        choice = self.chosen.get(id(step)) if self.chosen is not None else None
        if choice is None:
            choice = self._choose(step, inputs)
            if self.chosen is not None:
                self.chosen[id(step)] = choice
        op, shared, kept = choice
        if kept is not None:
            outputs, grads = [o.reshape(kept) for o in outputs], [g.reshape(kept) for g in grads]
        found = by_input(step.names, op(*inputs, *outputs, *grads), shared)
        return [found[name] for name in step.names]

    def _choose(self, step: DiffStep, inputs: list[Any]) -> tuple[Any, dict[str, str], tuple[int, ...] | None]:
        """(the step's backward op for these inputs' shapes and :attr:`needed`, the gradients it takes from an
        earlier input's, a reduction's output shape with its reduced axes kept)."""
        kept = None
        if step.reduction:
            kept = kept_shape([tuple(getattr(a, "shape", ())) for a in inputs], step.kwargs.get("axis"))
        wanted = [p for p, (kind, k) in zip(step.params, step.inputs)
                  if p in step.names and (kind != "arg" or self.needed is None or self.needed[k])]  # fmt: skip
        shared = {}
        if broadcast_gradients(wanted, step.params, inputs):
            variant = "summed"  # summed to its shape in the backward's pass where it can
        else:  # nothing broadcast is asked for: a frozen bias's gradient from the input's (dropped after), no sum
            shared = shared_for(step.kernel.spec, inputs) if broadcast_gradients(step.names, step.params, inputs) else {}
            variant = "shared" if shared else "plain"
        return self.backward_op(step, variant, inputs), shared, kept

    def reduce_to(self, grad: Any, like: Any) -> Any:
        return sum_to_shape(grad, like)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def zeros_like(self, a: Any) -> Any:
        import torch

        return torch.zeros_like(a)
