"""``kspec.fuse``: the decorator, and the fused function's per-signature cache of programs.

A call reads one signature (per argument: array type, dtype and ndim, or the scalar's type), looks it up,
and runs the program of kernels traced for it; the first call with a signature traces and builds specs.
Only NumPy arrays or only scalars: the plain function runs (CuPy's rule), except on the CPU device, where
NumPy arrays are device arrays and run the traced kernels.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import FuseError, KspecTypeError
from . import _rules
from ._forms import ArgType, ProgramForm, check_name

if TYPE_CHECKING:
    from ._program import Program

_PY_SCALARS = (bool, int, float, complex)
_modules = sys.modules
_PASSED_AS_IS = (bool, int, float, complex, type(None))  # keyed by type alone
_DEVICE, _HOST, _TORCH, _NP_SCALAR, _AS_IS, _OTHER = range(6)
_kinds: dict[type, int] = dict.fromkeys(_PASSED_AS_IS, _AS_IS)


@functools.cache
def _run_by_torch() -> Callable[[tuple[Any, ...]], Any]:
    """The kernels layer's test for calls kspec.torch runs: tensors that require grad, CPU tensors on the CPU
    device (imported on first need)."""
    from ..kernels import run_by_torch

    return run_by_torch


def _kind(tp: type, obj: Any) -> int:
    kind = _kinds.get(tp)
    if kind is None:
        if issubclass(tp, np.generic):
            kind = _NP_SCALAR
        elif issubclass(tp, np.ndarray):
            kind = _HOST
        elif tp.__module__.partition(".")[0] == "torch" and hasattr(obj, "is_cuda"):
            kind = _TORCH
        else:
            from ..runtime import is_device_array

            kind = _DEVICE if is_device_array(obj) else _OTHER
        _kinds[tp] = kind
    return kind


def _on_cpu_device() -> bool:
    from ..runtime import device_kind

    return device_kind() == "cpu"


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cache key of a call: one dict lookup per argument and cheap attribute reads (this runs on every call)."""
    key: list[Any] = []
    for a in args:
        tp = type(a)
        kind = _kinds.get(tp)
        if kind is None:
            kind = _kind(tp, a)
        if kind == _DEVICE:
            key.append((tp, a.dtype, a.ndim))
        elif kind == _HOST:  # NumPy arrays: the plain function on a GPU machine, kernels on the CPU device
            key.append((tp, a.dtype, a.ndim, _on_cpu_device()))
        elif kind == _AS_IS:
            key.append(tp)
        elif kind == _NP_SCALAR:
            key.append(a.dtype)
        elif kind == _TORCH:
            key.append((tp, a.dtype, a.ndim, a.is_cuda))
        else:
            key.append((tp, id(tp)))
    return tuple(key)


class FusedFunction:
    """A function fused into kernels. Call it like the function; ``spec(*args)`` / ``specs(*args)`` and
    ``cuda_source(*args)`` show what a call with such arguments runs (NumPy arrays serve as stand-ins)."""

    def __init__(self, func: Callable[..., Any], kernel_name: str | None = None) -> None:
        if not callable(func):
            raise KspecTypeError(f"kspec.fuse: expected a function, got {type(func).__name__}")
        if kernel_name is not None and (not isinstance(kernel_name, str) or not kernel_name.isidentifier()):
            raise KspecTypeError(f"kspec.fuse: kernel_name must be a C identifier, got {kernel_name!r}")
        functools.update_wrapper(self, func)
        self._func = func
        self._kernel_name = kernel_name
        self._name = getattr(func, "__name__", "fused")
        self._parameters = _parameters(func)
        self._nparams = len(self._parameters) if self._parameters is not None else 0
        self._by_key: dict[tuple[Any, ...], Any] = {}
        self._by_types: dict[tuple[ArgType, ...], Program] = {}
        self._lock = threading.Lock()
        self._fast_call: Callable[[tuple[Any, ...]], Any] | None = None  # see __call__
        self._fast_miss: Any = None

    @property
    def kernel_name(self) -> str:
        return self._kernel_name or check_name(self._name)

    def __repr__(self) -> str:
        return f"<kspec.fuse {self._name}>"

    def __reduce__(self) -> Any:
        import sys

        qualname = getattr(self, "__qualname__", "")  # set by functools.update_wrapper
        target: Any = sys.modules.get(self.__module__)
        for part in qualname.split("."):
            target = getattr(target, part, None)
        if target is self:  # decorated at module level: pickled by name, as the function would be
            return qualname
        return (FusedFunction, (self._func, self._kernel_name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and self._fast_call is not None:
            # The last call ran one elementwise kernel on the arguments as they are: that kernel's own
            # prepared calls are keyed finer than _signature (shapes and strides too), so a hit there is
            # this function's result for these arguments.
            result = self._fast_call(args)
            if result is not self._fast_miss:
                return result
        if kwargs or len(args) < self._nparams:
            args = self._bind(args, kwargs)
        if "torch" in _modules:  # tensors that require grad (autograd records the call), CPU tensors on the CPU device
            recorder = _run_by_torch()(args)
            if recorder is not None:
                return recorder.call(self, args, {})
        key = _signature(args)
        run = self._by_key.get(key)
        if run is None:
            run = self._prepare(key, args)
        result = run(args)
        kernel = getattr(run, "single_kernel", None)  # read after the run: the dispatcher of these argument types
        self._fast_call, self._fast_miss = (kernel.call_prepared, kernel.NOT_PREPARED) if kernel is not None else (None, None)
        return result

    def clear_cache(self) -> None:
        """Forget the traced programs (CuPy's ``Fusion.clear_cache``): the next call traces the function again.
        Compiled binaries stay in kspec's binary cache, so a retrace of unchanged code compiles nothing."""
        with self._lock:
            self._by_key.clear()
            self._by_types.clear()
            self._fast_call = self._fast_miss = None

    def _prepare(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        from ..kernels import traced_by  # a new signature only: the kernels layer's hand-off table

        framework = traced_by(args)
        if framework is not None:  # JAX's tracers (jax.jit, jax.vmap): its adapter runs this function there
            program: Any = lambda call_args: framework.call(self, call_args, {})  # noqa: E731
            return self._keep(key, program)
        devices = hosts = 0
        for a in args:
            kind = _kind(type(a), a)
            if kind == _TORCH:
                kind = _DEVICE if a.is_cuda else _HOST
            devices += kind == _DEVICE
            hosts += kind == _HOST
        if hosts and _on_cpu_device():  # NumPy arrays are the CPU device's arrays: trace and run kernels
            devices, hosts = devices + hosts, 0
        if devices and hosts:
            raise KspecTypeError(
                f"kspec.fuse: function '{self._name}' was called with both host arrays (NumPy) and device arrays; "
                "pass all arrays on the device (kspec.asarray, cupy.asarray, torch.as_tensor(..., device='cuda'))"
            )
        if not devices:  # CuPy's rule: NumPy arrays or scalars alone run the plain function
            program = lambda call_args: self._func(*call_args)  # noqa: E731
        else:
            program = self._program(tuple(_arg_type(self._name, k, a) for k, a in enumerate(args))).runner()
        return self._keep(key, program)

    def _keep(self, key: tuple[Any, ...], program: Any) -> Any:
        with self._lock:
            if len(self._by_key) >= 256:  # a program cycling through many signatures: start over
                self._by_key.clear()
            self._by_key[key] = program
        return program

    def _program(self, types: tuple[ArgType, ...]) -> Program:
        program = self._by_types.get(types)
        if program is None:
            names = self._parameters or [f"arg{k}" for k in range(len(types))]
            if len(names) < len(types):
                names = list(names) + [f"arg{k}" for k in range(len(names), len(types))]
            from ._program import trace  # the tracer and the spec models load on a function's first call

            program = trace(self._func, self._name, self.kernel_name, names, types)
            self._by_types[types] = program
        return program

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        try:
            bound = inspect.signature(self._func).bind(*args, **kwargs)
        except TypeError as exc:
            raise KspecTypeError(f"kspec.fuse: function '{self._name}': {exc}") from None
        if bound.kwargs:
            raise KspecTypeError(f"kspec.fuse: function '{self._name}': keyword-only arguments are not supported")
        args = tuple(bound.args)
        for param in list(bound.signature.parameters.values())[len(args):]:  # defaults of positional parameters
            if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) or param.default is param.empty:
                break
            args += (param.default,)
        return args

    def _types(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[ArgType, ...]:
        if kwargs or (self._parameters is not None and len(args) < len(self._parameters)):
            args = self._bind(args, kwargs)
        return tuple(_arg_type(self._name, k, a) for k, a in enumerate(args))

    def specs(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The specs of every kernel a call with such arguments runs, in order (one for most functions)."""
        return self._program(self._types(args, kwargs)).specs

    def spec(self, *args: Any, **kwargs: Any) -> Any:
        """The elementwise or reduction spec a call with such arguments uses; a function that needs several
        kernels (two reductions, work after a full reduction) raises: use :meth:`specs`."""
        specs = self.specs(*args, **kwargs)
        if len(specs) != 1:
            raise FuseError(
                f"kspec.fuse: function '{self._name}' runs {len(specs)} kernels for these arguments; use .specs(...)"
            )
        return specs[0]

    def single_kernel(self, *args: Any) -> Any | None:
        """The one elementwise kernel a call with such arguments (arrays or :class:`kspec.ArraySpec` stand-ins,
        positional) runs, taking them in order, its output the call's result: ``kernel(*args, out)`` then writes
        the result into ``out`` (kspec.torch's compiled graphs allocate it). None for any other program."""
        return self._program(self._types(args, {})).single_kernel(len(args))

    def program_form(self, *args: Any, **kwargs: Any) -> ProgramForm | None:
        """The kernels a call with such arguments runs, as data (:class:`ProgramForm`: each step's spec, where its
        inputs come from, the node ids it produces, a reduction's axis; how the result is assembled; the
        arguments bound to positions); None where a step updates an argument in place or reads a view of one.
        Arrays may be :class:`kspec.ArraySpec` stand-ins. kspec.grad differentiates it."""
        args = self._bind(args, kwargs) if kwargs or len(args) < self._nparams else args
        return self._program(self._types(args, {})).form(args)

    def output_specs(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The arrays a call returns, as :class:`kspec.ArraySpec`s in return order: ``args`` as for a call with
        each array an ArraySpec. Traces as a call would (same errors); compiles, loads and allocates
        nothing, and needs no GPU. For functions that return new arrays (kspec/fuse/_launch_plan.py)."""
        from ._launch_plan import plan_program

        return plan_program(self._name, *self._abstract_program(args, kwargs), load=False).outputs

    def plan_launch(self, *args: Any, **kwargs: Any) -> Any:
        """The :class:`kspec.LaunchPlan` of a call (arguments as for :meth:`output_specs`): every kernel of
        the function in order, values passed between them in its workspace; binaries loaded, nothing
        launched."""
        from ._launch_plan import plan_program

        return plan_program(self._name, *self._abstract_program(args, kwargs), load=True)

    def _abstract_program(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Program, tuple[Any, ...]]:
        from ._launch_plan import check_abstract

        if kwargs or len(args) < self._nparams:
            args = self._bind(args, kwargs)
        check_abstract(self._name, args)
        program = self._program(tuple(_arg_type(self._name, k, a) for k, a in enumerate(args)))
        program.check_ints(args)
        return program, args

    def cuda_source(self, *args: Any, **kwargs: Any) -> str:
        """The CUDA C++ of every kernel a call with such arguments runs (no GPU needed)."""
        from ..render import render, specialize

        program = self._program(self._types(args, kwargs))
        return "\n".join(render(specialize(step.spec, {}, scalars=step.scalars)).source for step in program.steps)


def _parameters(func: Callable[..., Any]) -> list[str] | None:
    """Positional parameter names, or None when the function takes ``*args``."""
    if isinstance(func, np.ufunc):  # numpy.add and friends: their inputs (``out`` is not an argument here)
        return [f"x{k + 1}" for k in range(func.nin)]
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _arg_type(func_name: str, index: int, value: Any) -> ArgType:
    """How the trace sees one argument. Stand-ins (for spec/cuda_source): NumPy arrays act as device arrays."""
    tp = type(value)
    if value is None:  # an optional argument left out: the function sees None
        return ("none", "", None)
    if tp in _PY_SCALARS:
        return ("scalar", _rules.default_dtype(tp), tp)
    if isinstance(value, np.generic):
        return ("scalar", _dtype_of(func_name, index, value.dtype), None)
    from ..kernels import ArraySpec
    from ..runtime import array_dtype_ndim

    if isinstance(value, ArraySpec):  # output_specs / plan_launch
        return ("array", value.dtype, len(value.shape))
    found = array_dtype_ndim(value)
    if found is not None:
        return ("array", _dtype_of(func_name, index, found[0]), found[1])
    raise KspecTypeError(
        f"kspec.fuse: function '{func_name}': argument {index} is a {tp.__name__}; fused functions take device "
        "arrays (CuPy, PyTorch, kspec), NumPy arrays as stand-ins for spec()/cuda_source(), and numbers"
    )


def _dtype_of(func_name: str, index: int, dtype: Any) -> str:
    name = _rules.dtype_name(dtype)
    if name is None:
        raise KspecTypeError(f"kspec.fuse: function '{func_name}': argument {index} has dtype {dtype}, which kspec does not support")
    return name


def fuse(*args: Any, kernel_name: str | None = None) -> Any:
    """CuPy's ``cupy.fuse``: ``@fuse``, ``@fuse()``, ``@fuse(kernel_name='name')`` or ``fuse(func)``."""
    if args:
        if len(args) != 1:
            raise KspecTypeError("kspec.fuse takes one function (and kernel_name= as a keyword)")
        return FusedFunction(args[0], kernel_name)
    return lambda func: FusedFunction(func, kernel_name)
