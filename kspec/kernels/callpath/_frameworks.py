"""Kernel calls traced by another framework (JAX's ``jax.jit`` / ``jax.vmap``), or made eagerly on its arrays:
which framework, and its adapter.

A kernel called on a *tracer* (an abstract value of a framework's transformation: no memory, no pointer)
cannot launch. The framework's adapter can run it there instead (kspec.jax for JAX: the call becomes an XLA
custom call, as if ``kspec.jax.call(kernel, ...)`` had been written), or say what to do where it cannot (raw
kernels). The adapters sit above this layer (DESIGN.md), so the kernels layer never imports them: this table
names each one as data, and ``importlib`` loads it the first time a call on that framework's tracers arrives.

Detection runs only where a call already goes slow (a planner's error in kspec/kernels/callpath/_call_path.py, a fused
function's new signature, a raw launch's new argument types, a call path's miss), never on the hot path, and it
imports nothing:
an argument's type must come from a package already imported (``sys.modules``), so a process that does not
use the framework pays nothing. A framework adds one :class:`Framework` to :data:`FRAMEWORKS`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ..._named_tuple import NamedTuple


_adapters: dict[str, Any] = {}  # adapter module name -> the module, imported on its first call


class Framework(NamedTuple):
    """One framework that traces kernel calls.

    ``tracers``: ``(module, class)`` of its tracer base classes, looked up in ``sys.modules`` only (the first
    one present is used). ``adapter``: the module that runs a traced call; it provides ``call(kernel, *args,
    **kwargs)`` (the kernel's result(s) for the framework's arrays) and ``refusal(what, name, args)`` (the
    kspec error for a kernel it cannot run traced: ``what`` is e.g. ``'RawKernel'``, ``name`` the kernel's).

    A NamedTuple, not a frozen dataclass: the dataclass exec()d its generated methods at every serving import.
    """

    name: str
    tracers: tuple[tuple[str, str], ...]
    adapter: str
    # ``(module, class)`` of its concrete arrays, and the packages their types come from: an eager call on them
    # alone goes through the adapter too (one cached dispatch of the framework, where launching on their memory
    # costs an interop round trip per call)
    arrays: tuple[tuple[str, str], ...] = ()
    array_roots: tuple[str, ...] = ()

    @property
    def root(self) -> str:
        """The top-level package the tracers' types come from."""
        return self.tracers[0][0].partition(".")[0]

    def tracer_class(self) -> type | None:
        for module_name, class_name in self.tracers:
            found = getattr(sys.modules.get(module_name), class_name, None)
            if isinstance(found, type):
                return found
        return None

    def is_array(self, obj: Any) -> bool:
        for module_name, class_name in self.arrays:
            found = getattr(sys.modules.get(module_name), class_name, None)
            if isinstance(found, type) and isinstance(obj, found):
                return True
        return False

    def call(self, kernel: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """``kernel(*args, **kwargs)`` run by the adapter."""
        adapter = _adapters.get(self.adapter)
        if adapter is None:
            adapter = _adapters[self.adapter] = importlib.import_module(self.adapter)
        return adapter.call(kernel, *args, **kwargs)

    def refusal(self, what: str, name: str, args: Iterable[Any]) -> Exception:
        """The adapter's error for a kernel it cannot run on these tracers."""
        return importlib.import_module(self.adapter).refusal(what, name, tuple(args))


FRAMEWORKS: tuple[Framework, ...] = (
    # jax.core.Tracer is the public name; jax._src.core.Tracer where a JAX release drops it. jax.Array is the
    # base of JAX's concrete arrays (jaxlib's ArrayImpl)
    Framework("jax", (("jax.core", "Tracer"), ("jax._src.core", "Tracer")), "kspec.jax", (("jax", "Array"),),
              ("jax", "jaxlib")),
)

_PLAIN = (bool, int, float, complex)

# The adapter of eager calls on PyTorch tensors that kspec.torch runs (run_by_torch): its ``call`` runs a kernel as
# the op ``kspec.torch.register`` defines, inside the op's autograd, or on CPU tensors' memory on kspec's CPU device
TORCH_AUTOGRAD = Framework("torch", (("torch._subclasses.fake_tensor", "FakeTensor"),), "kspec.torch",
                           (("torch", "Tensor"),), ("torch",))  # fmt: skip


def run_by_torch(args: Iterable[Any]) -> Framework | None:
    """PyTorch's framework (kspec.torch) where it runs this eager call: where an argument is a tensor that requires
    grad and grad mode is on (the call runs as its registered op, whose autograd records the backward, or says on
    backward that the kernel has none), and, on kspec's CPU device, where an argument is a CPU tensor (kspec.torch
    runs the kernel on the tensors' memory). Asked where a call already goes slow (a call path's miss: the
    dispatchers send such calls there), never imports PyTorch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    tensor = getattr(torch, "Tensor", None)
    if not isinstance(tensor, type):  # torch half-imported
        return None
    on_host = None
    for arg in args:
        if not isinstance(arg, tensor):
            continue
        if getattr(arg, "requires_grad", False) and torch.is_grad_enabled():
            return TORCH_AUTOGRAD
        if on_host is None and getattr(arg, "is_cpu", False):
            from ...runtime import device_kind

            on_host = device_kind() == "cpu"
    return TORCH_AUTOGRAD if on_host else None


def concrete_by(args: Iterable[Any]) -> Framework | None:
    """The framework whose concrete arrays are the call's arrays (with NumPy arrays and numbers beside them):
    its adapter runs the call. None for any other mix (a CuPy array among them: the launch path)."""
    found = None
    for arg in args:
        if isinstance(arg, _PLAIN) or type(arg).__module__.partition(".")[0] == "numpy":
            continue
        root = type(arg).__module__.partition(".")[0]
        framework = next((f for f in FRAMEWORKS if root in f.array_roots and f.root in sys.modules), None)
        if framework is None or (found is not None and framework is not found) or not framework.is_array(arg):
            return None
        found = framework
    return found


def traced_by(args: Iterable[Any]) -> Framework | None:
    """The framework whose tracer is among ``args`` (None when there is none, or nothing traced is imported)."""
    for arg in args:
        root = type(arg).__module__.partition(".")[0]
        for framework in FRAMEWORKS:
            if framework.root == root and root in sys.modules:
                tracer = framework.tracer_class()
                if tracer is not None and isinstance(arg, tracer):
                    return framework
    return None


def refuse_traced(what: str, name: str, args: Iterable[Any]) -> None:
    """Raise the framework's error when ``args`` hold a tracer: ``what`` (e.g. ``'RawKernel'``) named ``name``
    cannot run inside that framework's transformation."""
    args = tuple(args)
    framework = traced_by(args)
    if framework is not None:
        raise framework.refusal(what, name, args)
