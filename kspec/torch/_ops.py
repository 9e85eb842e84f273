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
(1.1 against 3.9 us per call on the CPU machine: benchmarks/torch_register.py). So no autograd: calling an op on
tensors that require grad gives results that do not require grad (PyTorch warns on backward).
"""

from __future__ import annotations

import threading
from typing import Any

from .._errors import KspecTypeError, KspecValueError
from ._schema import OpSignature
from ._tensors import (
    array_spec,
    check_cpu_device,
    empty_like_spec,
    first_device,
    host_arrays,
    host_tensors,
    scalar_stand_in,
)

NAMESPACE = "kspec"

lock = threading.RLock()  # held by register for its whole check-and-define
_library: Any = None
_ops: dict[str, tuple[Any, OpSignature, Any]] = {}  # op name -> (kernel, signature, the callable returned)


def _lib() -> Any:
    global _library
    if _library is None:
        import torch

        _library = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept: ops go when their Library is collected
    return _library


def op_name(kernel: Any, name: str | None, default: str, signature: OpSignature) -> tuple[str, Any | None]:
    """(the op's name, the callable already registered for this kernel and signature, or None). A name given
    and taken by another kernel is an error; the ``default`` name taken gets a number."""
    explicit = name is not None
    base = name if name is not None else default
    if not isinstance(base, str) or not base.isidentifier():
        raise KspecValueError(f"kspec.torch.register: name: expected an identifier, got {base!r}")
    candidate, n = base, 1
    while candidate in _ops:
        found_kernel, found_signature, found = _ops[candidate]
        if found_kernel is kernel and found_signature == signature:
            return candidate, found
        if explicit:
            raise KspecValueError(f"kspec.torch.register: name: op {NAMESPACE}::{candidate} is registered for another kernel")
        n += 1
        candidate = f"{base}_{n}"
    return candidate, None


def define(kernel: Any, name: str, signature: OpSignature, planner: Any, call: Any) -> Any:
    """Define op ``name`` with its fake, CUDA and CPU implementations; returns its OpOverload.

    ``planner(*args, **kwargs)`` is the kernel's ``output_specs``; ``call`` what runs it on real tensors."""
    import torch

    lib = _lib()
    lib.define(f"{name}{signature.schema}")
    torch.library.register_fake(f"{NAMESPACE}::{name}", _fake(name, planner, signature), lib=lib)
    lib.impl(name, call, "CUDA")
    lib.impl(name, _on_cpu_device(name, call), "CPU")
    return getattr(torch.ops.kspec, name).default


def remember(name: str, kernel: Any, signature: OpSignature, op: Any) -> None:
    _ops[name] = (kernel, signature, op)


def _fake(name: str, planner: Any, signature: OpSignature) -> Any:
    def fake(*args: Any, **kwargs: Any) -> Any:
        import torch

        specs = [array_spec(a) if isinstance(a, torch.Tensor) else scalar_stand_in(a) for a in args]
        outputs = planner(*specs, **kwargs)
        if len(outputs) != signature.returns:
            raise KspecTypeError(
                f"kspec.torch: op {NAMESPACE}::{name} is registered to return {signature.returns} tensor(s), but these "
                f"arguments give {len(outputs)} (register(..., returns={len(outputs)}))"
            )
        device = first_device(args)
        tensors = tuple(empty_like_spec(o, device) for o in outputs)
        return tensors if signature.returns_tuple else tensors[0]

    return fake


def _on_cpu_device(name: str, call: Any) -> Any:
    def on_cpu(*args: Any, **kwargs: Any) -> Any:
        check_cpu_device(name)
        return host_tensors(call(*host_arrays(args), **kwargs))

    return on_cpu
