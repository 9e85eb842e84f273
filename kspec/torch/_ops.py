"""kspec kernels as PyTorch operators in the ``kspec`` namespace (``torch.ops.kspec.<name>``).

Each is defined with ``torch.library.Library.define`` and given three implementations:

- a fake one (``torch.library.register_fake``, also the Meta one): the kernel's ``output_specs`` on the
  tensors' ArraySpecs, so ``torch.compile`` knows the outputs' shapes, dtypes and devices from kspec's own
  planning (and reports a call's errors while it traces);
- CUDA: the kernel itself, called with the tensors (kspec launches on PyTorch's current stream and allocates
  its outputs with PyTorch);
- CPU: the kernel on kspec's CPU device, the tensors passed as NumPy arrays sharing their memory.

``Library.define`` + ``impl`` rather than ``torch.library.custom_op``: the dispatcher calls the kernel with no
Python layer in between, where ``custom_op`` adds its autograd and aliasing checks in Python on every call
(1.1 against 3.9 us per call on the CPU machine: benchmarks/host/torch_register.py). Autograd is added where the
kernel has gradients (kspec/torch/_autograd.py); called by name on tensors that require grad, an op without it
gives results that do not require grad (PyTorch warns on backward), while the callable register returns
records an error for the backward (kspec/torch/_eager.py).

A spec kernel's op also has an out variant, ``torch.ops.kspec.<name>.out`` (the inputs, then the outputs it
writes; returns nothing), and a rule that decomposes the functional op into ``torch.empty`` + the out variant
when functionalization traces it (``torch.compile``'s AOT stage), as ``torch.library.triton_op`` does for
Triton kernels: the compiled graph then allocates the outputs itself (reusing its dead buffers) and checks no
output's size and stride after the call, where an opaque functional op costs an allocation in Python and that
check per call. Where Inductor compiles a graph of fixed sizes, an op of one output is lowered to a direct call
of the kernel instead (``_inductor``: no dispatcher at all). Eager calls take the functional op, one dispatch.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from .._errors import KspecTypeError, KspecValueError
from ..kernels import ElementwiseKernel
from ._inductor import ATTRIBUTE, direct_call, lowered
from ._schema import OpSignature
from ._tensors import (
    check_cpu_device,
    empty_like_spec,
    first_device,
    host_arrays,
    host_tensors,
    stand_ins,
)

NAMESPACE = "kspec"

lock = threading.RLock()  # held by register for its whole check-and-define
_library: Any = None
_ops: dict[str, tuple[Any, OpSignature, Any]] = {}  # op name -> (kernel, signature, the callable returned)


def library() -> Any:
    """The torch.library.Library that holds kspec's ops (kspec/torch/_autograd.py registers there too)."""
    return _lib()


def _lib() -> Any:
    global _library
    if _library is None:
        import torch

        _library = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept: ops go when their Library is collected
    return _library


def op_name(kernel: Any, name: str | None, default: str, signature: OpSignature,
            content: Callable[[], str], quiet: bool = False) -> tuple[str, Any | None]:  # fmt: skip
    """(the op's name, the callable already registered for this kernel and signature, or None). A name given
    and taken by another kernel is an error. Where the ``default`` name is another kernel's, the op is named
    ``<default>__<content()>`` (what it runs and its schema: the same name in every process, where a number
    counted registrations) and a warning says so (unless ``quiet``): the plain name still goes to whichever
    registers first."""
    explicit = name is not None
    base = name if name is not None else default
    if not isinstance(base, str) or not base.isidentifier():
        raise KspecValueError(f"kspec.torch.register: name: expected an identifier, got {base!r}")
    entry = _ops.get(base)
    if entry is None:
        return base, None
    if entry[0] is kernel and entry[1] == signature:
        return base, entry[2]
    if explicit:
        raise KspecValueError(f"kspec.torch.register: name: op {NAMESPACE}::{base} is registered for another kernel")
    candidate = f"{base}__{content()}"
    entry = _ops.get(candidate)
    if entry is not None and entry[1] == signature:  # the same content under another kernel object: the same op
        return candidate, entry[2]
    if quiet:
        return candidate, None
    warnings.warn(
        f"kspec.torch.register: op {NAMESPACE}::{base} is another kernel's (or this kernel's with other scalars); "
        f"this one is {NAMESPACE}::{candidate}, named by its content. Which kernel holds the plain name depends "
        "on the order of registration, and a compiled graph from Inductor's on-disk caches calls ops by name: "
        "pass name= to each to make them stable", UserWarning, stacklevel=5,
    )
    return candidate, None


def define(kernel: Any, name: str, signature: OpSignature, planner: Any, call: Any,
           direct: tuple[Callable[..., None], Callable[..., bool]] | None = None) -> Any:  # fmt: skip
    """Define op ``name`` with its fake, CUDA and CPU implementations, and its out variant where the signature
    has one; returns its OpOverload.

    ``planner(*args, **kwargs)`` is the kernel's ``output_specs``; ``call`` what runs it on real tensors (and,
    given the outputs after the inputs, writes them). ``direct``: for an op without an out variant (a fused
    function's), ``(write, can_lower)``: what writes a call's one output (the inputs, then it) and whether a
    traced call can take it; Inductor then calls ``write`` directly where ``can_lower`` says so."""
    import torch

    lib = _lib()
    lib.define(f"{name}{signature.schema}")
    packet = getattr(torch.ops.kspec, name)
    outputs = _outputs(name, planner, signature)
    torch.library.register_fake(f"{NAMESPACE}::{name}", _fake(outputs, signature), lib=lib)
    lib.impl(name, _unrecorded(call), "CUDA")
    lib.impl(name, on_cpu_device(name, call), "CPU")
    if not hasattr(torch.library, "register_torch_dispatch"):
        return packet.default
    if signature.out_schema is not None:
        lib.define(f"{name}.out{signature.out_schema}")
        torch.library.register_fake(f"{NAMESPACE}::{name}.out", _writes_nothing, lib=lib)
        writer, host_writer = _writer(call), on_cpu_device(name, call, returns=False)
        lib.impl(f"{name}.out", writer, "CUDA")
        lib.impl(f"{name}.out", host_writer, "CPU")
        out_variant, can_lower = packet.out, None
    elif direct is not None and signature.returns == 1:
        (writer, can_lower), out_variant = direct, None
        host_writer = on_cpu_device(name, writer, returns=False)
    else:
        return packet.default
    setattr(packet, ATTRIBUTE, direct_call(signature, writer, host_writer))
    from torch._subclasses.functional_tensor import FunctionalTensorMode

    rule = _decomposition(name, outputs, signature, out_variant, can_lower)
    torch.library.register_torch_dispatch(f"{NAMESPACE}::{name}", FunctionalTensorMode, rule, lib=lib)
    return packet.default


def remember(name: str, kernel: Any, signature: OpSignature, op: Any) -> None:
    _ops[name] = (kernel, signature, op)


def _unrecorded(call: Any) -> Any:
    """``call`` as the dispatcher's CUDA kernel: run with grad mode off where it is on (PyTorch's fallback for
    an op without autograd calls it so), or the kernel's call would see tensors that require grad and hand
    itself back to the op (kspec/torch/_recording.py)."""
    import torch

    grad_enabled, no_grad = torch.is_grad_enabled, torch.no_grad

    def run(*args: Any, **kwargs: Any) -> Any:
        if grad_enabled():
            with no_grad():
                return call(*args, **kwargs)
        return call(*args, **kwargs)

    return run


def _outputs(name: str, planner: Any, signature: OpSignature) -> Any:
    """``outputs(args, kwargs)``: new tensors for a call's outputs, as the kernel's planning gives them (fake
    tensors while tracing)."""

    def outputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        planned = planner(*stand_ins(args), **kwargs)
        if len(planned) != signature.returns:
            raise KspecTypeError(
                f"kspec.torch: op {NAMESPACE}::{name} is registered to return {signature.returns} tensor(s), but these "
                f"arguments give {len(planned)} (register(..., returns={len(planned)}))"
            )
        device = first_device(args)
        return tuple(empty_like_spec(o, device) for o in planned)

    return outputs


def _fake(outputs: Any, signature: OpSignature) -> Any:
    def fake(*args: Any, **kwargs: Any) -> Any:
        tensors = outputs(args, kwargs)
        return tensors if signature.returns_tuple else tensors[0]

    return fake


def _writes_nothing(*args: Any, **kwargs: Any) -> None:
    """The out variant's fake: it writes its outputs in place and returns nothing."""


def _writer(call: Any) -> Any:
    """The out variant's implementation: the kernel given its outputs after its inputs (kspec kernels take
    them as CuPy's do); the op returns nothing. An elementwise kernel's prepared call is taken first, without
    the kernel's own frame (a compiled graph calls this once per op)."""
    if not isinstance(call, ElementwiseKernel):

        def write(*args: Any, **kwargs: Any) -> None:
            call(*args, **kwargs)

        return write
    kernel, not_prepared = call, call.NOT_PREPARED

    def write_prepared(*args: Any, **kwargs: Any) -> None:
        if kwargs or kernel.call_prepared(args) is not_prepared:
            kernel(*args, **kwargs)

    return write_prepared


def _decomposition(name: str, outputs: Any, signature: OpSignature, out_variant: Any,
                   can_lower: Any = None) -> Any:  # fmt: skip
    """The functional op under functionalization: new outputs, then the out variant writing them; or, where
    Inductor lowers the op to a direct call (``_inductor``) or there is no out variant (None), the functional
    op kept as it is. Functionalization traces every compile (fake kernels' results are cached), so Inductor's
    lowering is registered here, where Inductor is loaded; ``can_lower``: as ``_inductor.lowered`` takes it."""

    def decompose(mode: Any, op: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch
        from torch._subclasses import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor

        if any(t is not torch.Tensor and not issubclass(t, (FakeTensor, FunctionalTensor)) for t in types):
            return NotImplemented  # a tensor subclass of someone else's: its own rules first
        if (_static(args, kwargs) and lowered(name, signature, op, can_lower)) or out_variant is None:
            return type(mode).__torch_dispatch__(mode, op, types, args, kwargs)  # the mode's own handling
        with mode:
            tensors = outputs(args, kwargs)
            out_variant(*args, *tensors, **kwargs)
        return tensors if signature.returns_tuple else tensors[0]

    return decompose


def _static(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a traced call has fixed sizes and constant scalars (what an Inductor direct call takes)."""
    import torch

    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            if not all(isinstance(n, int) for n in (*a.shape, *a.stride())):
                return False
        elif isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return False
    return True


def on_cpu_device(name: str, call: Any, returns: bool = True) -> Any:
    def on_cpu(*args: Any, **kwargs: Any) -> Any:
        check_cpu_device(name)
        result = call(*host_arrays(args), **kwargs)
        return host_tensors(result) if returns else None

    return on_cpu
