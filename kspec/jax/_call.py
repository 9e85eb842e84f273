"""A kspec kernel as a function of JAX arrays: ``kspec.jax.wrap(kernel)`` and ``kspec.jax.call``.

``wrap(kernel)(*args, **kwargs)``: the arrays become the custom call's operands; everything else (Python and
NumPy scalars, the kernel's keywords such as ``axis=``) is static: part of the plan and of the cache key. Each
static signature gets one ``jax.jit`` of the traced call (kspec/jax/_emit.py), so an eager call is one cached
XLA dispatch, and inside a user's ``jax.jit`` the call is traced once with the user's function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._errors import KspecNotImplementedError, KspecTypeError
from ._callspec import CallSpec, Static, kernel_name, target_of
from ._emit import run
from ._vjp import with_vjp

_SCALARS = (bool, int, float, complex, np.generic)
_MAX_SIGNATURES = 256  # jitted calls kept per kernel (each holds its executables)


class JaxKernel:
    """A kspec kernel (ElementwiseKernel, ReductionKernel, a generated module's kernel, a ``kspec.fuse``
    function) as a function of JAX arrays, usable eagerly, under ``jax.jit`` and under ``jax.vmap``."""

    def __init__(self, kernel: Any) -> None:
        kernel = kernel_of(kernel)
        if not callable(getattr(kernel, "plan_launch", None)) or not callable(getattr(kernel, "output_specs", None)):
            raise KspecTypeError(
                f"kernel: expected a kspec ElementwiseKernel, ReductionKernel or kspec.fuse function (an object with "
                f"plan_launch and output_specs), got {type(kernel).__name__}; raw kernels declare no outputs and are "
                "not supported by kspec.jax"
            )
        self.kernel = kernel
        self.__name__ = kernel_name(kernel)
        self.__doc__ = getattr(kernel, "__doc__", None)
        self._positional_only = _binds_keywords(kernel)
        self._jitted: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def __repr__(self) -> str:
        return f"<kspec.jax kernel {self.__name__!r}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            import jax
        except ModuleNotFoundError:
            raise ModuleNotFoundError(
                f"kernel '{self.__name__}': kspec.jax needs JAX (pip install jax; jax[cuda13] for NVIDIA GPUs)",
                name="jax",
            ) from None

        if self._positional_only is not None:  # a fused function: keywords are its arguments
            args, kwargs = self._positional_only(args, kwargs), {}
        if "stream" in kwargs:
            raise KspecTypeError(f"stream=: kernel '{self.__name__}' runs on XLA's stream inside JAX; leave stream out")
        if kwargs.get("out") is not None:  # a reduction's out=: its outputs, after the inputs (as the kernel does)
            out = kwargs.pop("out")
            args = (*args, *(out if isinstance(out, tuple) else (out,)))
        layout: list[Static | None] = []
        arrays: list[Any] = []
        committed = None
        for position, arg in enumerate(args):
            if isinstance(arg, (jax.Array, np.ndarray)):
                layout.append(None)
                arrays.append(arg)
                if committed is None and isinstance(arg, jax.Array):
                    committed = _single_device(self.__name__, position, arg)
            elif isinstance(arg, _SCALARS):
                layout.append(Static(arg))
            else:
                raise KspecTypeError(
                    f"argument {position}: kernel '{self.__name__}' under kspec.jax takes JAX arrays, NumPy arrays and "
                    f"Python or NumPy scalars, got {type(arg).__module__}.{type(arg).__qualname__}"
                )
        # under a transformation the call is planned for JAX's default device, which a jax.default_device block
        # may change: it is part of the key then
        where = committed if committed is not None else ("default", jax.config.jax_default_device)
        key = (tuple(layout), _frozen(self.__name__, kwargs), where)
        fn = self._jitted.get(key)
        if fn is None:
            if len(self._jitted) >= _MAX_SIGNATURES:  # e.g. a static scalar that changes every call: start over
                self._jitted.clear()
            spec = CallSpec(self.kernel, tuple(layout), key[1], target_of(committed))
            traced = functools.partial(run, spec)
            fn = self._jitted[key] = jax.jit(self._differentiable(traced, tuple(layout), key[1]))
        return fn(*arrays)

    def _differentiable(self, traced: Callable[..., Any], layout: tuple[Static | None, ...],
                        keywords: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:  # fmt: skip
        """``traced`` with its derivative: a spec's ``grad``; for a fused function that is one
        elementwise kernel for these arguments, that kernel with ``grad = "auto"``; else kspec's error."""
        from ..fuse import FusedFunction

        backward = _backward_of(self.kernel)
        if backward is not None:
            kernels: dict[bool, JaxKernel] = {}

            def backward_call(shared: bool) -> JaxKernel:
                if shared not in kernels:
                    kernels[shared] = JaxKernel(self.kernel.backward_kernel(shared))
                return kernels[shared]

            return with_vjp(traced, backward_call, self.kernel.spec, layout, keywords)
        if isinstance(self.kernel, FusedFunction):
            return _fused_derivative(self.kernel, self.__name__, traced, layout)
        return _no_derivative(self.__name__, traced)


def _backward_of(kernel: Any) -> Any:
    """The backward kernel of a kernel whose spec declares gradients, else None."""
    spec = getattr(kernel, "spec", None) if callable(getattr(kernel, "backward_kernel", None)) else None
    if spec is None or getattr(spec, "grad", None) is None:
        return None
    return kernel.backward_kernel()


_NO_DERIVATIVE = (
    "a kspec kernel declares no derivative. Give its spec a grad table (or grad = \"auto\"), write the derivative as "
    "another kernel and join the two with jax.custom_vjp, or keep the call out of the differentiated path "
    "(jax.lax.stop_gradient on its inputs)"
)


def _no_derivative(name: str, traced_call: Callable[..., Any], why: str = _NO_DERIVATIVE) -> Callable[..., Any]:
    """``traced_call`` with a JVP rule that raises kspec's error: a kernel declares no derivative, and JAX's own
    message would name only its FFI target. Under jit and vmap nothing changes."""
    import jax

    @jax.custom_jvp
    def call(*arrays: Any) -> Any:
        return traced_call(*arrays)

    @call.defjvp
    def _jvp(primals: Any, tangents: Any) -> Any:
        raise KspecNotImplementedError(f"kspec.jax: kernel '{name}' cannot be differentiated (jax.grad, jax.jvp, jax.vjp): {why}")

    return call


def _fused_derivative(fused: Any, name: str, traced: Callable[..., Any],
                      layout: tuple[Static | None, ...]) -> Callable[..., Any]:  # fmt: skip
    """A fused function's call that JAX can differentiate: its kernels, each with ``grad = "auto"`` (the same
    code, its backward derived: kspec.grad.differentiable_program), run one by one through kspec.jax, so that JAX
    composes their VJPs (and sums the gradients of a value read twice). Chosen while tracing, from the arguments'
    types; where a kernel cannot be differentiated, the call as it was, raising only when differentiated."""
    from ..grad import assemble, differentiable_program, run_forward
    from ..kernels import ArraySpec

    def call(*arrays: Any) -> Any:
        given = iter(arrays)
        args = [item.value if item is not None else next(given) for item in layout]
        stand_ins = [a if item is not None else ArraySpec(tuple(a.shape), np.dtype(a.dtype).name) for a, item in zip(args, layout)]
        try:
            program = differentiable_program(fused, stand_ins, {}, "kspec.jax")
        except KspecNotImplementedError as exc:
            return _no_derivative(name, traced, str(exc).partition(f"'{fused.kernel_name}' ")[2] or str(exc))(*arrays)
        program = program._replace(args=tuple(args))
        return assemble(program, run_forward(program, lambda step, ins: JaxKernel(step.kernel)(*ins, **step.kwargs)))

    return call


def kernel_of(obj: Any) -> Any:
    """The kernel object behind ``obj``: itself, or for a function of a generated typed module (kspec generate,
    the build hook) the kernel it calls, which the module keeps in its library ``_KERNELS``."""
    if hasattr(obj, "plan_launch") or not inspect.isfunction(obj):
        return obj
    import sys

    from ..kernels import KernelLibrary

    library = getattr(sys.modules.get(obj.__module__), "_KERNELS", None)
    if isinstance(library, KernelLibrary) and obj.__name__ in library:
        return getattr(library, obj.__name__)
    return obj


def _binds_keywords(kernel: Any) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]] | None:
    """For a fused function (its keywords are arguments, not kernel options): a binder to positions."""
    from ..fuse import FusedFunction

    if not isinstance(kernel, FusedFunction):
        return None
    signature = inspect.signature(kernel)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if not kwargs:
            return args
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise KspecTypeError(f"kspec.fuse: function '{kernel_name(kernel)}': {exc}") from None
        bound.apply_defaults()
        return tuple(bound.args)

    return bind


def _single_device(name: str, position: int, array: Any) -> Any:
    """The device of a concrete JAX array (None for a tracer: its device is not known while tracing)."""
    import jax

    if isinstance(array, getattr(jax.core, "Tracer", ())):
        return None
    try:
        devices = array.devices()
    except Exception:  # noqa: BLE001 - an abstract value of some transformation: no device yet
        return None
    if len(devices) != 1:
        raise KspecNotImplementedError(
            f"argument {position}: kernel '{name}' under kspec.jax runs on one device; the array is sharded over "
            f"{len(devices)} devices (call it per shard, on the device it was planned for)"
        )
    return next(iter(devices))


def _frozen(name: str, kwargs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The kernel's keywords as a hashable, sorted tuple (lists become tuples): they are static."""
    items = []
    for key, value in sorted(kwargs.items()):
        if isinstance(value, list):
            value = tuple(value)
        try:
            hash(value)
        except TypeError:
            raise KspecTypeError(
                f"{key}=: kernel '{name}' under kspec.jax takes static keyword values (ints, tuples, bools), got "
                f"{type(value).__name__}"
            ) from None
        items.append((key, value))
    return tuple(items)


