"""kspec.torch: kspec kernels as PyTorch operators, for ``torch.compile(..., fullgraph=True)``.

``op = kspec.torch.register(kernel)`` defines ``torch.ops.kspec.<name>`` for an ElementwiseKernel, a
ReductionKernel (a spec file's, a generated module's, a constructor's) or a fused function, and returns the
callable to use in place of the kernel: ``op(x, y)`` in eager code and inside ``torch.compile``, which traces
it as one operator (no graph break) with outputs from the kernel's own planning (``kernel.output_specs``).
``kspec.torch.register_module(generated.elementwise)`` registers every elementwise and reduction kernel of a
generated module (or a :class:`kspec.KernelLibrary`). CUDA tensors launch the kernel on PyTorch's current
stream; CPU tensors run it on kspec's CPU device (``KSPEC_DEVICE=cpu``). Kernels whose spec declares gradients
(``grad``) and fused functions get autograd; other spec kernels have none: their outputs' backward raises an
error naming the kernel (docs/guide/gradients.md). A kernel called bare on tensors that require grad runs as
its op too (:func:`call`), eagerly as inside ``torch.compile``.

PyTorch is imported when something is registered, never by ``import kspec``.
"""

from __future__ import annotations

import marshal
import types
from collections.abc import Mapping, Sequence
from typing import Any

from .._digest import sha256_hex
from .._errors import KspecTypeError
from ..fuse import FusedFunction
from ..grad import SummedBackward, outputs_read as _outputs_read
from ..kernels import ElementwiseKernel, KernelLibrary, ReductionKernel
from . import _backward_of as _grads
from . import _ops
from ._autograd import add_autograd
from ._compile import install as _install
from ._eager import eager_op
from ._fused_out import fused_writer, lowerable
from ._recording import call as _recorded_call, refusal  # noqa: F401 - refusal: read by name (kernels/callpath/_frameworks.py)
from ._saving import SINGLE as _SINGLE, SUFFIX as _SAVING, define_saving
from ._schema import fused_signature, spec_kernel_signature

__all__ = ["call", "register", "register_module"]


def register(kernel: Any, name: str | None = None, *, scalars: Sequence[str] | None = None, returns: int = 1) -> Any:
    """Define ``torch.ops.kspec.<name>`` for ``kernel`` and return the callable that runs it.

    Args:
        kernel: an ElementwiseKernel, a ReductionKernel or a ``kspec.fuse`` function.
        name: the op's name (default: the kernel's; where another kernel has that, ``<name>__<12 hex digits of
            the kernel's content and schema>``, with a warning: pass ``name=`` to keep names stable).
        scalars: the inputs passed as Python numbers rather than tensors (default: the spec's declared
            ``scalars``; none for a fused function). Every other input is a tensor.
        returns: a fused function's number of returned arrays (a tuple when more than one); spec kernels
            know theirs.

    The callable takes the inputs positionally; a reduction's also takes ``axis=`` (None, an int or a tuple)
    and ``keepdims=``, an elementwise kernel with raw parameters ``size=``. Its ``overload`` attribute is the
    OpOverload ``torch.ops.kspec.<name>.default``, which ``torch.compile`` traces (the callable hands every traced
    call to it); eager calls on plain tensors run the kernel without the dispatcher's trips through Python, in
    the op's own autograd where it records (kspec/torch/_eager.py). Registering the same kernel with the same
    arguments again returns the same callable. Register outside the code you compile (at import, or when
    building the model): Dynamo does not trace defining an op.
    """
    return _register(kernel, name, scalars, returns)


def _register(kernel: Any, name: str | None, scalars: Sequence[str] | None, returns: int, quiet: bool = False) -> Any:
    """:func:`register`; ``quiet``: an op named by its content says nothing (a bare eager call's: its caller has no
    name= to pass, and eager calls never look an op up by name)."""
    if isinstance(kernel, ReductionKernel):
        kind, signature = "reduction", spec_kernel_signature(kernel, "reduction", scalars)
    elif isinstance(kernel, ElementwiseKernel):
        kind, signature = "elementwise", spec_kernel_signature(kernel, "elementwise", scalars)
    elif isinstance(kernel, FusedFunction):
        kind, signature = "fused", fused_signature(kernel, scalars, returns)
    elif isinstance(kernel, SummedBackward):  # kspec.grad's backward with summed gradients: its kernel's inputs
        kind = "summed"
        signature = spec_kernel_signature(kernel.backward_kernel, "elementwise", scalars)._replace(out_schema=None)
    else:
        raise KspecTypeError(
            "kspec.torch.register: kernel: expected an ElementwiseKernel, a ReductionKernel or a kspec.fuse "
            f"function, got {type(kernel).__name__}"
        )
    default = kernel.kernel_name if kind == "fused" else kernel.name  # a SummedBackward's: its backward's + _summed
    with _ops.lock:
        op_name, found = _ops.op_name(kernel, name, default, signature, lambda: _content_digest(kernel, kind, signature),
                                      quiet)
        if found is not None:
            return found
        call = _fused_call(kernel, op_name, signature) if kind == "fused" else kernel
        backward_of = _gradient_rule(kernel, kind, op_name, signature)  # kspec/torch/_autograd.py
        planner = kernel.output_specs
        if isinstance(backward_of, _grads.FusedRule):
            planner = _preparing(kernel.output_specs, backward_of)
        direct = (fused_writer(kernel), lowerable(kernel)) if kind == "fused" else None
        overload = _ops.define(kernel, op_name, signature, planner, call, direct)
        recorded = None  # how eager calls that autograd records run: as plain ones (a spec kernel's outputs)
        if isinstance(backward_of, _grads.FusedRule):  # its autograd calls keep the values between its kernels
            single = _ops.define(kernel, f"{op_name}{_SINGLE}", signature, planner, call, direct)
            add_autograd(_ops.library(), f"{op_name}{_SINGLE}", backward_of)
            _, recorded = define_saving(_ops.library(), kernel, op_name, signature, backward_of, overload, single)
            add_autograd(_ops.library(), f"{op_name}{_SAVING}", backward_of, hidden=True)
        outputs_read = None  # a spec kernel's outputs its backward never reads are not kept for it (None: all read)
        if backward_of is not None and not isinstance(backward_of, _grads.FusedRule):
            read = _outputs_read(kernel.spec)
            outputs_read = None if all(read) else read
            add_autograd(_ops.library(), op_name, backward_of, outputs_read=outputs_read)
        plain = (call, _ops.on_cpu_device(op_name, call))
        op = eager_op(op_name, overload, signature, plain, recorded, backward_of, outputs_read)
        if kind == "reduction":
            op = _reduction_op(op)
        _ops.remember(op_name, kernel, signature, op)
    return op


def call(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``kernel(*args, **kwargs)`` as the op :func:`register` defines for it, with the call's numbers as its
    scalars: what a bare eager call on tensors that require grad (grad mode on) runs, so that autograd records
    it (a kernel without gradients gives outputs whose backward raises an error naming it). Outputs given to
    write into and ``stream=`` are refused there, as PyTorch refuses ``out=`` arguments that autograd would
    have to record. On kspec's CPU device, a call on CPU tensors with nothing to record runs on their memory
    (NumPy views) and returns tensors, a given output as the tensor given."""
    return _recorded_call(_quiet_register, kernel, *args, **kwargs)


def _quiet_register(kernel: Any, name: str | None = None, *, scalars: Sequence[str] | None = None,
                    returns: int = 1) -> Any:  # fmt: skip
    return _register(kernel, name, scalars, returns, quiet=True)


def _content_digest(kernel: Any, kind: str, signature: Any) -> str:
    """12 hex digits of what an op runs and its schema: a spec kernel's spec, a fused function's code (its
    module, name and compiled code: not what a closure holds)."""
    if kind == "fused":
        func = getattr(kernel, "__wrapped__", kernel)
        code = getattr(func, "__code__", None)
        what = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', '')}".encode()
        what += marshal.dumps(code) if code is not None else b""
    else:
        what = kernel.spec_digest.encode()
    return sha256_hex(what + f"{signature.schema} {sorted(signature.scalars)}".encode())[:12]


def _gradient_rule(kernel: Any, kind: str, op_name: str, signature: Any) -> Any:
    """Where the op's gradients come from: a spec's ``grad``, or a fused function's derived backward; None for a
    spec kernel without gradients (the op then has no autograd of its own: PyTorch's fallback)."""
    if kind == "fused":
        return _grads.FusedRule(kernel, op_name, register)
    if kind == "summed" or getattr(kernel.spec, "grad", None) is None:
        return None
    return _grads.of_spec_kernel(kernel, op_name, signature.inputs, sorted(signature.scalars), register, kind == "reduction")


def _preparing(planner: Any, rule: Any) -> Any:
    """A fused op's planner (its fake, while a compiled function is traced) that also registers the ops its
    backward will call for such arguments (:class:`kspec.torch._backward_of.FusedRule`)."""

    def plan(*args: Any, **kwargs: Any) -> Any:
        planned = planner(*args, **kwargs)
        rule.prepare(args)
        return planned

    return plan


def register_module(module: Any, *, prefix: str = "", scalars: Mapping[str, Sequence[str]] | None = None) -> Any:
    """Register every elementwise and reduction kernel of a generated module (``kspec generate``) or of a
    :class:`kspec.KernelLibrary` (``kspec.load``): a namespace of the callables by kernel name. Raw kernels are
    left out (their outputs are not planned). Op names are ``prefix`` + the kernel's name; ``scalars`` maps
    a kernel's name to its scalar inputs (default: each spec's declared ``scalars``)."""
    library = module if isinstance(module, KernelLibrary) else None
    if isinstance(module, types.ModuleType):  # a generated module keeps its kernels in a KernelLibrary
        library = next((v for v in vars(module).values() if isinstance(v, KernelLibrary)), None)
    if library is None:
        raise KspecTypeError(
            "kspec.torch.register_module: module: expected a module written by `kspec generate` or a "
            f"kspec.KernelLibrary, got {module!r}"
        )
    chosen = dict(scalars or {})
    ops = {}
    for kernel_name in library:
        kernel = library[kernel_name]
        if isinstance(kernel, (ElementwiseKernel, ReductionKernel)):
            ops[kernel_name] = register(kernel, f"{prefix}{kernel_name}" if prefix else None, scalars=chosen.get(kernel_name))
    return types.SimpleNamespace(**ops)


def _install_compile_hook() -> bool:
    """Bare kernel calls in torch.compile become :func:`register`'s ops (kspec/_torch_watch.py calls this)."""
    return _install(register)


def _reduction_op(op: Any) -> Any:
    def reduction(*args: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        if isinstance(axis, int):
            axis = (axis,)
        return op(*args, axis=axis, keepdims=keepdims)

    reduction.__name__ = reduction.__qualname__ = op.__name__
    reduction.overload = op.overload  # type: ignore[attr-defined]  # torch.ops.kspec.<name>.default
    return reduction


def _fused_call(fused: Any, name: str, signature: Any) -> Any:
    """A fused function's call, checked against the number of tensors its op returns."""
    expected = signature.returns

    def call(*args: Any) -> Any:
        result = fused(*args)
        count = len(result) if isinstance(result, tuple) else 1
        if count != expected or isinstance(result, tuple) != signature.returns_tuple:
            raise KspecTypeError(
                f"kspec.torch: op kspec::{name} is registered to return {expected} tensor(s); the function returned "
                f"{count} (register(..., returns={count}))"
            )
        return result

    return call
