"""Reverse mode over a fused function's kernels.

A fused call runs one or a few kernels (:meth:`kspec.fuse.FusedFunction.program_form`): elementwise ones and
reductions, values passed between them by node id. Each kernel's spec gets ``grad = "auto"`` (its backward derived
from its code: kspec/spec/_autodiff.py, or for a sum the broadcast of the incoming gradient), so the function's
backward is the steps' backward kernels in reverse order, each input's gradient summed to its shape, the gradients
of a value read twice added. The array library supplies the few operations this needs (:class:`ArrayOps`):
kspec.vjp runs the kernels themselves, kspec.torch their operators, and kspec.jax composes the differentiable
kernels and lets JAX do the reverse pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._named_tuple import NamedTuple
from .._errors import KspecNotImplementedError, SpecError
from ..kernels import ElementwiseKernel, ReductionKernel
from ..spec import ElementwiseSpec, ReductionSpec

_KEPT = 256  # differentiable kernels kept for fused functions' specs (oldest out)
_auto_kernels: dict[str, Any] = {}  # a fused spec's data (JSON) -> its kernel with grad = "auto"
_by_id: dict[int, tuple[Any, Any]] = {}  # id(spec) -> (the spec, kept alive so the id stays its; its kernel)


def auto_kernel(spec: Any) -> Any:
    """The kernel of a fused function's spec (elementwise or reduction) with ``grad = "auto"``: the same code, its
    backward_kernel() derived. One per spec (kept, oldest out). A :class:`kspec.SpecError` names what ``auto``
    cannot differentiate."""
    import json

    by_id = _by_id.get(id(spec))
    if by_id is not None and by_id[0] is spec:  # a fused function's traced specs are kept: the same objects
        return by_id[1]
    data = spec.to_data()
    key = json.dumps(data, sort_keys=True, default=str)
    kernel = _auto_kernels.get(key)
    if kernel is None:
        if len(_auto_kernels) >= _KEPT:
            del _auto_kernels[next(iter(_auto_kernels))]
        data.pop("kind", None)
        if spec.KIND == "reduction":
            kernel = ReductionKernel.from_spec(ReductionSpec(**data, grad="auto"))
        else:
            kernel = ElementwiseKernel.from_spec(ElementwiseSpec(**data, grad="auto"))
        _auto_kernels[key] = kernel
    if len(_by_id) >= _KEPT:
        del _by_id[next(iter(_by_id))]
    _by_id[id(spec)] = (spec, kernel)
    return kernel


class DiffStep(NamedTuple):
    """One kernel of a fused call, with what its backward needs."""

    kernel: Any  # the step's kernel with grad = "auto"
    inputs: tuple[tuple[str, int], ...]  # per input parameter: ("arg", index) or ("value", node id)
    produces: tuple[int, ...]
    kwargs: dict[str, Any]  # a reduction's axis= / keepdims=
    params: tuple[str, ...]  # its input parameters' names
    names: tuple[str, ...]  # the inputs its backward kernel returns gradients of, in order

    @property
    def reduction(self) -> bool:
        return isinstance(self.kernel, ReductionKernel)


class DiffProgram(NamedTuple):
    steps: tuple[DiffStep, ...]
    results: list[tuple[str, Any]]
    returns_tuple: bool
    args: tuple[Any, ...]


def differentiable_program(fn: Any, args: Sequence[Any], kwargs: dict[str, Any], where: str) -> DiffProgram:
    """``fn``'s kernels for a call with ``args`` (arrays or :class:`kspec.ArraySpec` stand-ins), each with its
    derived backward; a :class:`kspec.KspecNotImplementedError` (naming ``where``, the function and the kernel)
    where one cannot be differentiated."""
    form = fn.program_form(*args, **kwargs)
    if form is None:
        raise KspecNotImplementedError(
            f"{where}: fused function '{fn.kernel_name}' updates an argument in place or reads a view of one for "
            "these arguments; such calls are not differentiable"
        )
    steps = []
    for k, step in enumerate(form.steps):
        try:
            kernel = auto_kernel(step.spec)
        except SpecError as exc:
            raise KspecNotImplementedError(
                f"{where}: fused function '{fn.kernel_name}': its kernel {k + 1} of {len(form.steps)} "
                f"({step.spec.KIND} '{step.spec.name}') cannot be differentiated: {exc.args[0] if exc.args else exc}"
            ) from None
        names = tuple(kernel.spec.backward()[0])
        steps.append(DiffStep(kernel, step.inputs, step.produces, step.kwargs, tuple(p.name for p in step.spec.in_params), names))
    return DiffProgram(tuple(steps), form.results, form.returns_tuple, tuple(form.args))


def step_inputs(program: DiffProgram, step: DiffStep, values: dict[int, Any]) -> list[Any]:
    return [program.args[i] if kind == "arg" else values[i] for kind, i in step.inputs]


def run_forward(program: DiffProgram, call: Callable[[DiffStep, list[Any]], Any],
                values: dict[int, Any] | None = None) -> dict[int, Any]:  # fmt: skip
    """Every node's value: ``call(step, inputs)`` runs a step; steps whose outputs are all in ``values``
    (outputs a framework saved) are not run again."""
    values = dict(values or {})
    for step in program.steps:
        if all(node in values for node in step.produces):
            continue
        out = call(step, step_inputs(program, step, values))
        for node, array in zip(step.produces, out if isinstance(out, tuple) else (out,)):
            values[node] = array
    return values


def result_nodes(program: DiffProgram) -> list[int | None]:
    """The node id of each returned array (None for an argument, a constant or a nested tuple)."""
    return [payload if kind == "node" else None for kind, payload in program.results]


def assemble(program: DiffProgram, values: dict[int, Any]) -> Any:
    items = [_item(program, values, kind, payload) for kind, payload in program.results]
    return tuple(items) if program.returns_tuple else items[0]


def _item(program: DiffProgram, values: dict[int, Any], kind: str, payload: Any) -> Any:
    # a module function, not a closure: a closure calling itself is a reference cycle, which would keep ``values``
    # (the step's arrays) alive until the garbage collector runs
    if kind == "tuple":
        return tuple(_item(program, values, k, p) for k, p in payload)
    if kind == "arg":
        return program.args[payload]
    if kind == "node":
        return values[payload]
    return payload  # a constant, or None


class ArrayOps(Protocol):
    """What the reverse pass needs of an array library."""

    def backward(self, step: DiffStep, inputs: list[Any], outputs: list[Any], grads: list[Any]) -> Sequence[Any]:
        """The step's backward kernel: one gradient per ``step.names``, in the inputs' broadcast shape (a reduction's
        outputs and gradients still in its output shape: :func:`kspec.grad.kept_shape` views them)."""
        ...

    def reduce_to(self, grad: Any, like: Any) -> Any: ...

    def add(self, a: Any, b: Any) -> Any: ...

    def zeros_like(self, a: Any) -> Any: ...


def run_backward(program: DiffProgram, values: dict[int, Any], grads: Sequence[Any], ops: ArrayOps,
                 needed: Sequence[bool] | None = None) -> list[Any]:  # fmt: skip
    """The gradient of each argument (None where none flows) from one gradient per returned item (None: zero);
    ``needed`` (per argument): where given, the arguments whose gradients are wanted (the others get None and
    cost no sum to their shape)."""
    node_adj: dict[int, Any] = {}
    arg_adj: dict[int, Any] = {}
    for (kind, payload), grad in zip(program.results, grads):
        _seed(kind, payload, grad, node_adj, arg_adj, ops)
    for step in reversed(program.steps):
        if not step.names or not any(node in node_adj for node in step.produces):
            continue
        outputs = [values[node] for node in step.produces]
        out_grads = [node_adj[n] if n in node_adj else ops.zeros_like(v) for n, v in zip(step.produces, outputs)]
        inputs = step_inputs(program, step, values)
        by_name = dict(zip(step.names, ops.backward(step, inputs, outputs, out_grads)))
        for param, (kind, index), value in zip(step.params, step.inputs, inputs):
            if param in by_name and not (kind == "arg" and needed is not None and not needed[index]):
                _accumulate(arg_adj if kind == "arg" else node_adj, index, ops.reduce_to(by_name[param], value), ops)
    return [arg_adj.get(k) for k in range(len(program.args))]


def _accumulate(table: dict[int, Any], key: int, grad: Any, ops: ArrayOps) -> None:
    table[key] = grad if key not in table else ops.add(table[key], grad)


def _seed(kind: str, payload: Any, grad: Any, node_adj: dict[int, Any], arg_adj: dict[int, Any], ops: ArrayOps) -> None:
    """Put a returned item's gradient on its node or argument. Module functions, not closures: a closure calling
    itself is a reference cycle, which would keep the gradients alive until the garbage collector runs."""
    if grad is None:
        return
    if kind == "tuple":
        for (k, p), g in zip(payload, grad):
            _seed(k, p, g, node_adj, arg_adj, ops)
    elif kind in ("node", "arg"):
        _accumulate(node_adj if kind == "node" else arg_adj, payload, grad, ops)
