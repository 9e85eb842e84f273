"""Bare kspec kernels inside ``torch.compile``: Dynamo calls the kernel's registered op (no ``register`` first).

Dynamo would inline a kernel's ``__call__`` and trace kspec's call path (its argument reads, dict look-ups
and pointer reads), which it cannot. PyTorch has no public hook for "calling an object of this type", as it has
for Triton kernels (``TritonKernelVariable``, picked by type in ``VariableBuilder``). So this module adds kspec's
kernel types to the same table, ``VariableBuilder``'s dispatch by exact type, with a variable that keeps the
kernel's attributes (a subclass of Dynamo's own for plain objects) and turns a call into a call of
``kspec.torch.register(kernel, ...)``'s op: the op registration makes for eager calls, defined at trace time
(register runs in Dynamo's process, untraced), guarded by the kernel's identity. A new value of the same shape
therefore compiles nothing, and the graph is the one a registered op gives.

``kspec.jit`` kernels and RawKernels write into the arrays they are given with no planned outputs: a call
inside a compiled function is refused with :class:`KernelCompileError` (a kspec error that is also Dynamo's
graph break: ``fullgraph=True`` raises it, otherwise the launch runs eagerly between two graphs).

``kspec.jit``'s kernel type is added when that package loads, before or after Dynamo. Installed once, right after ``torch._dynamo`` is imported (``kspec/_torch_watch.py``), or at once where it is.
A PyTorch whose Dynamo lacks these internals leaves bare calls as they were; ``register`` serves either way.
"""

from __future__ import annotations

import sys
from typing import Any

from .._errors import KspecError, KspecNotImplementedError

_installed: list[bool] = []  # [True] once installed, [False] where this PyTorch has no such table
_register: list[Any] = []  # kspec.torch.register, given by the package (no import of it from here)
_add_kernel_types: list[Any] = []  # once installed: adds the kernel types loaded since (kspec.jit's)


def install(register: Any) -> bool:
    """Teach Dynamo kspec's kernel types, calls going to ``register``'s ops; whether it could (idempotent)."""
    if _installed:
        if _installed[0]:
            _add_kernel_types[0]()  # called again once kspec.jit is loaded (kspec/_torch_watch.py)
        return _installed[0]
    _register.append(register)
    try:
        from torch._dynamo.guards import GuardBuilder
        from torch._dynamo.variables.builder import VariableBuilder
        from torch._dynamo.variables.user_defined import UserDefinedObjectVariable

        tables = [VariableBuilder._type_dispatch_impl(flag) for flag in (False, True)]  # per config.trace_numpy
    except (ImportError, AttributeError, TypeError):
        _installed.append(False)
        return False
    from ..kernels import KernelLibrary, watch_raw_kernel_classes

    global _GETATTR
    _GETATTR = _getattr_name(UserDefinedObjectVariable)
    kernel_variable = _variable_class(UserDefinedObjectVariable)
    library_variable = _library_class(UserDefinedObjectVariable)

    def wrap(builder: Any, value: Any) -> Any:
        builder.install_guards(GuardBuilder.ID_MATCH)  # the op belongs to this kernel object
        return kernel_variable(value, source=builder.source)

    def wrap_library(builder: Any, value: Any) -> Any:
        builder.install_guards(GuardBuilder.TYPE_MATCH)  # its kernels are guarded one by one
        return library_variable(value, source=builder.source)

    def add_kernel_types() -> None:
        for table in tables:
            for kernel_type in _kernel_types():
                table.setdefault(kernel_type, wrap)
            table.setdefault(KernelLibrary, wrap_library)

    add_kernel_types()
    _add_kernel_types.append(add_kernel_types)

    def raw_kernel_class(cls: type) -> None:  # each launch state's class: the table is by exact type
        for table in tables:
            table.setdefault(cls, wrap)

    watch_raw_kernel_classes(raw_kernel_class)
    _installed.append(True)
    return True


def _kernel_types() -> list[type]:
    from ..fuse import FusedFunction
    from ..kernels import ElementwiseKernel, RawModule, ReductionKernel

    jit = sys.modules.get("kspec.jit")  # not imported here (bindings use kernels, fuse, runtime): known if loaded
    return [ElementwiseKernel, ReductionKernel, FusedFunction, RawModule, *([jit.JitKernel] if jit is not None else [])]


class KernelCompileError(KspecNotImplementedError):
    """A kspec kernel call that ``torch.compile`` cannot trace (also Dynamo's graph break, where PyTorch has it)."""


_compile_error: list[type] = []


def _error(message: str) -> Exception:
    """KernelCompileError, made also a Dynamo ``Unsupported``: a graph break where the graph may break, the
    error itself under ``fullgraph=True``, never wrapped as an internal Dynamo error."""
    if not _compile_error:
        from torch._dynamo.exc import Unsupported

        class TorchCompileError(KernelCompileError, Unsupported):  # type: ignore[misc]
            def __init__(self, msg: str) -> None:
                Unsupported.__init__(self, msg, "kspec kernel")

        TorchCompileError.__name__ = TorchCompileError.__qualname__ = "KernelCompileError"
        TorchCompileError.__module__ = "kspec.torch"
        _compile_error.append(TorchCompileError)
    return _compile_error[0](message)


def _variable_class(base: type) -> type:
    class KspecKernelVariable(base):  # type: ignore[misc]
        """A kspec kernel object as Dynamo sees it: attributes as any object's, calls as its op's."""

        def call_function(self, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
            return _call(tx, self.value, args, kwargs)

        def call_method(self, tx: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
            if name == "__call__":
                return _call(tx, self.value, args, kwargs)
            if name == "__getitem__" and _is_raw(self.value):  # kspec.jit's k[grid, block](*args)
                raise _error(_raw_message(self.value))
            _refuse_module_method(self.value, name)
            return super().call_method(tx, name, args, kwargs)

    def getattr_refusing(self: Any, tx: Any, name: str) -> Any:
        _refuse_module_method(self.value, name)
        return getattr(super(KspecKernelVariable, self), _GETATTR)(tx, name)

    setattr(KspecKernelVariable, _GETATTR, getattr_refusing)
    return KspecKernelVariable


# the attribute look-up a variable class overrides: var_getattr up to PyTorch 2.13, tp_getattro_impl after
_GETATTR = "var_getattr"


def _getattr_name(base: type) -> str:
    return "tp_getattro_impl" if hasattr(base, "tp_getattro_impl") else "var_getattr"


def _library_class(base: type) -> type:
    class KspecLibraryVariable(base):  # type: ignore[misc]
        """A KernelLibrary (a generated module's ``_KERNELS``): a kernel is looked up for real, not traced (the
        first look-up builds it), and guarded where the library keeps it."""

        def call_method(self, tx: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
            if name == "__getitem__" and self.source is not None and len(args) == 1 and not kwargs and args[0].is_python_constant():
                key = args[0].as_python_constant()
                if isinstance(key, str) and key in self.value._kernels:
                    return _library_kernel(tx, self, key)
            return super().call_method(tx, name, args, kwargs)

    def getattr_kernel(self: Any, tx: Any, name: str) -> Any:
        if self.source is not None and name in self.value._kernels:
            return _library_kernel(tx, self, name)
        return getattr(super(KspecLibraryVariable, self), _GETATTR)(tx, name)

    setattr(KspecLibraryVariable, _GETATTR, getattr_kernel)
    return KspecLibraryVariable


def _library_kernel(tx: Any, library: Any, name: str) -> Any:
    from torch._dynamo.source import AttrSource, DictGetItemSource
    from torch._dynamo.variables import VariableTracker

    kernel = library.value._kernel(name)  # made now if it was deferred: then kept in _kernels
    return VariableTracker.build(tx, kernel, DictGetItemSource(AttrSource(library.source, "_kernels"), name))


def _is_raw(kernel: Any) -> bool:
    """A kspec.jit kernel or a RawKernel: no planned outputs, so no op."""
    from ..kernels import RawKernel

    return getattr(kernel, "_kspec_jit_kernel", False) is True or isinstance(kernel, RawKernel)


def _refuse_module_method(value: Any, name: str) -> None:
    from ..kernels import RawModule

    if isinstance(value, RawModule) and name in ("get_function", "get_global", "compile"):
        raise _error(
            f"kspec.torch: RawModule.{name} cannot run inside torch.compile, and the module's kernels cannot run "
            "there either (raw kernels write into the arrays they are given). Call them outside the compiled "
            "function, or write them as ElementwiseKernel, ReductionKernel or kspec.fuse functions (those trace as "
            "operators)"
        )


def _raw_message(kernel: Any) -> str:
    name = getattr(kernel, "name", None) or getattr(getattr(kernel, "func", None), "__name__", "?")
    return (
        f"kspec.torch: raw kernel '{name}' cannot run inside torch.compile: it writes into the arrays it is given "
        "and kspec does not plan its outputs. Call it outside the compiled function, or write it as an "
        "ElementwiseKernel, a ReductionKernel or a kspec.fuse function (those trace as operators)"
    )


def _call(tx: Any, kernel: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The op's call for a call of ``kernel`` with Dynamo's variables ``args`` / ``kwargs``."""
    from torch._dynamo.variables import VariableTracker

    from . import _bare

    if _is_raw(kernel):
        raise _error(_raw_message(kernel))
    values = [_value(a) for a in args]
    named = {k: _value(v) for k, v in kwargs.items()}
    try:
        registered, call_kwargs = _bare.resolve(_register[0], kernel, values, named)
    except KspecError as exc:
        raise _error(str(exc)) from None
    op = registered.overload
    build = VariableTracker.build
    op_kwargs = {name: build(tx, value) for name, value in call_kwargs.items()}
    return build(tx, op).call_function(tx, list(args), op_kwargs)


def _value(variable: Any) -> Any:
    """What planning needs of an argument: a tensor's example value (a FakeTensor), a constant's value, a traced
    number as a number of its type (a SymInt / SymFloat: its value is the graph's input), else the variable."""
    torch = sys.modules["torch"]
    if variable.is_python_constant():
        return variable.as_python_constant()
    kind = variable.python_type()
    if issubclass(kind, torch.Tensor):
        return variable.as_proxy().node.meta["example_value"]
    if kind in (int, float, bool):
        return kind()  # planned by type, as register's fake does
    return variable
