"""``rawkernel``: the decorator, and JitKernel, the callable it makes.

A JitKernel keeps one entry per signature (argument types). The first call with a new signature reads the
function's source, translates it to CUDA C++ and makes a :class:`kspec.kernels.RawKernel` of it (which
compiles through kspec's compiler and disk cache, or loads a prebuilt binary); later calls cost one dict
lookup, the expansion of each array into pointer + shape + strides, and a RawKernel launch.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .._errors import KspecTypeError, KspecValueError
from ._module import c_name, module_source
from ._translate import translate_function
from ._types import Array, JitType, parse_signature, signature_tag, type_of_argument

_SCALAR_KEYS: set[type] = {bool, int, float, complex}


def _arg_key(a: Any) -> Any:
    """What a call's argument contributes to the signature key: its type, plus dtype and ndim for arrays."""
    t = type(a)
    if t in _SCALAR_KEYS:
        return t
    if issubclass(t, np.generic):
        _SCALAR_KEYS.add(t)
        return t
    try:
        return (t, a.dtype, a.ndim)
    except AttributeError:  # CAI / DLPack objects without array attributes: typed through the protocols
        return (t, *map(str, type_of_argument(a, 0, "").__dict__.values()))


def _array_reader(obj: Any) -> str:
    """How the launch reads an array's shape and strides: 'attributes' (CuPy, kspec), 'torch', 'protocol'."""
    root = type(obj).__module__.partition(".")[0]
    if root == "torch":
        return "torch"
    if root in ("cupy", "kspec", "numpy") and hasattr(obj, "strides") and hasattr(obj, "shape"):
        return "attributes"
    return "protocol"


def _expander(types: tuple[JitType, ...], args: Sequence[Any]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A generated function: call arguments -> RawKernel arguments (an array becomes its object, then
    shape[0..n), then strides[0..n) in bytes). Generated once per signature so a call runs no loop."""
    lines, parts = [], []
    for k, (t, obj) in enumerate(zip(types, args)):
        if not isinstance(t, Array):
            parts.append(f"a{k}")
            continue
        reader = _array_reader(obj)
        parts.append(f"a{k}")
        if reader == "attributes":
            parts += [f"*a{k}.shape", f"*a{k}.strides"]
        elif reader == "torch":
            lines.append(f"    s{k} = a{k}.stride()")
            parts.append(f"*a{k}.shape")
            parts += [f"s{k}[{d}] * {t.dtype.itemsize}" for d in range(t.ndim)]
        else:
            lines.append(f"    i{k} = array_info(a{k})")
            parts += [f"*i{k}.shape", f"*i{k}.strides"]
    names = ", ".join(f"a{k}" for k in range(len(types)))
    unpack = f"    {names}, = args\n" if types else ""
    code = f"def expand(args):\n{unpack}" + "\n".join(lines) + ("\n" if lines else "") + f"    return ({', '.join(parts)}{',' if len(parts) == 1 else ''})\n"
    from ..runtime import array_info

    namespace: dict[str, Any] = {"array_info": array_info}
    exec(compile(code, "<kspec.jit expand>", "exec"), namespace)  # noqa: S102  (generated from types only)
    expand: Callable[[Sequence[Any]], tuple[Any, ...]] = namespace["expand"]
    return expand


class _Translation:
    """One signature's CUDA source and what its launch needs."""

    def __init__(self, source: str, name: str, cooperative: bool) -> None:
        self.source, self.name, self.cooperative = source, name, cooperative


class _Entry:
    __slots__ = ("kernel", "expand")

    def __init__(self, kernel: Any, expand: Callable[[Sequence[Any]], tuple[Any, ...]]) -> None:
        self.kernel, self.expand = kernel, expand


class JitKernel:
    """A Python function compiled to a CUDA kernel per argument signature (``cupyx.jit``'s _JitRawKernel).

    Launch: ``k(grid, block, args, shared_mem=0, stream=None)`` or ``k[grid, block](*args)`` /
    ``k[grid, block, stream, shared_mem](*args)``. ``cuda_source(*args)`` shows the generated C++,
    ``spec(*args)`` the raw spec that ``kspec build`` precompiles.
    """

    _kspec_jit_kernel = True

    def __init__(self, func: Callable[..., Any], *, device: bool, signatures: Iterable[Any], options: Sequence[str], binaries: str | os.PathLike[str] | None) -> None:
        if not callable(func) or not hasattr(func, "__code__"):
            raise KspecTypeError(f"rawkernel: expected a Python function, got {type(func).__name__}")
        functools.update_wrapper(self, func)
        self.func = func
        self._device = bool(device)
        self._options = tuple(options)
        self._binaries = os.fspath(binaries) if binaries is not None else None
        self._cache: dict[tuple[Any, ...], _Entry] = {}
        self._kernels: dict[tuple[JitType, ...], Any] = {}
        self._translations: dict[tuple[JitType, ...], _Translation] = {}
        self._signatures = tuple(parse_signature(s, func.__name__) for s in signatures)

    def __repr__(self) -> str:
        what = "device function" if self._device else "kernel"
        return f"<kspec.jit {what} {self.func.__name__!r}>"

    # -- launching ---------------------------------------------------------------------------------------

    def __call__(self, grid: Any, block: Any, args: Sequence[Any], shared_mem: int = 0, stream: Any = None) -> None:
        try:
            entry = self._cache[tuple([_arg_key(a) for a in args])]
        except (KeyError, TypeError):
            entry = self._entry(args)
        entry.kernel(grid, block, entry.expand(args), shared_mem=shared_mem, stream=stream)

    def __getitem__(self, config: Any) -> "_ConfiguredKernel":
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise KspecTypeError(f"kernel {self.func.__name__!r}: launch with k[grid, block](*args) or k[grid, block, stream, shared_mem](*args), got k[{config!r}]")
        grid, block, stream, shared_mem = (*config, None, 0)[:4] if len(config) == 2 else (*config, 0)[:4]
        return _ConfiguredKernel(self, grid, block, stream, shared_mem)

    def _entry(self, args: Sequence[Any]) -> _Entry:
        name = self.func.__name__
        if self._device:
            raise KspecTypeError(f"{name!r} is a device function (rawkernel(device=True)): call it from a kernel, not from the host")
        if not isinstance(args, (tuple, list)):
            raise KspecTypeError(f"kernel {name!r}: args must be a tuple of arguments, got {type(args).__name__}")
        from ..kernels import refuse_traced
        from ..runtime import device_kind

        refuse_traced("kspec.jit kernel", name, args)  # JAX's tracers: kspec.jax says what to do instead
        for position, a in enumerate(args):
            if isinstance(a, np.ndarray) and device_kind() != "cpu":  # NumPy arrays are the CPU device's arrays
                raise KspecTypeError(
                    f"kernel {name!r}: args[{position}] is a numpy.ndarray in host memory; copy it to the device first "
                    "(kspec.asarray(x), cupy.asarray(x) or torch.as_tensor(x, device='cuda'))"
                )
        types = tuple(type_of_argument(a, k, name) for k, a in enumerate(args))
        kernel = self._kernel(types)
        entry = _Entry(kernel, _expander(types, args))
        self._cache[tuple([_arg_key(a) for a in args])] = entry
        return entry

    def _kernel(self, types: tuple[JitType, ...]) -> Any:
        kernel = self._kernels.get(types)
        if kernel is None:
            translation = self._translate(types)
            if self._binaries is not None:
                from ..kernels import load_specs
                from ..spec import spec_to_data

                spec = self._spec_of(types, translation)
                kernel = load_specs([spec_to_data(spec)], binaries=self._binaries)[spec.name]
            else:
                from ..kernels import RawKernel

                kernel = RawKernel(translation.source, translation.name, options=self._options,
                                   enable_cooperative_groups=translation.cooperative)
            self._kernels[types] = kernel
        return kernel

    # -- translation -------------------------------------------------------------------------------------

    def _translate(self, types: tuple[JitType, ...]) -> _Translation:
        found = self._translations.get(types)
        if found is None:
            code, module, _ = translate_function(self.func, types, device=self._device)
            line = self.func.__code__.co_firstlineno
            header = (f"// kspec.jit: {self.func.__name__} from {self.func.__code__.co_filename}:{line}\n"
                      f"// signature: ({', '.join(map(str, types))})")
            found = _Translation(module_source(code, module, header), c_name(self.func.__name__), module.grid_sync)
            self._translations[types] = found
        return found

    def _types_of(self, args: Sequence[Any]) -> tuple[JitType, ...]:
        return tuple(type_of_argument(a, k, self.func.__name__) for k, a in enumerate(args))

    def cuda_source(self, *args: Any) -> str:
        """The CUDA C++ generated for these arguments (NumPy arrays and scalars stand in: no GPU needed)."""
        return self._translate(self._types_of(args)).source

    def kernel_name(self) -> str:
        """The ``extern "C"`` name of the generated ``__global__`` function."""
        return c_name(self.func.__name__)

    def is_cooperative(self, *args: Any) -> bool:
        """Whether these arguments' kernel uses ``cg.this_grid()`` (and so launches cooperatively)."""
        return self._translate(self._types_of(args)).cooperative

    def _spec_of(self, types: tuple[JitType, ...], translation: _Translation) -> Any:
        from ..spec import RawSpec

        return RawSpec(
            name=f"{self.func.__name__}_{signature_tag(types)}",
            source=translation.source,
            kernels=(translation.name,),
            cooperative=translation.cooperative,
            options=self._options,
        )

    def spec(self, *args: Any) -> Any:
        """The :class:`kspec.spec.RawSpec` of the kernel for these arguments (stand-ins accepted)."""
        types = self._types_of(args)
        return self._spec_of(types, self._translate(types))

    def specs(self) -> list[Any]:
        """The raw specs of every signature given to ``rawkernel(signatures=[...])``, for ``kspec build``."""
        return [self._spec_of(types, self._translate(types)) for types in self._signatures]

    @property
    def cached_codes(self) -> dict[tuple[JitType, ...], str]:
        """The CUDA source generated so far, one entry per signature (a tuple of argument types), oldest
        first: what cupyx.jit's ``cached_codes`` holds. Empty until the first call (or ``cuda_source``)."""
        return {types: translation.source for types, translation in self._translations.items()}

    @property
    def cached_code(self) -> str:
        """The CUDA source of the signature translated last (the only one, when the kernel has been called
        with one signature)."""
        if not self._translations:
            raise KspecValueError(
                f"kernel {self.func.__name__!r}: no code yet; it is generated at the first call "
                "(or use cuda_source(*args) with stand-in arguments)"
            )
        return next(reversed(self._translations.values())).source

    @property
    def signatures(self) -> tuple[tuple[JitType, ...], ...]:
        return self._signatures

    def use_binaries(self, path: str | os.PathLike[str]) -> None:
        """Launch from a ``kspec build`` output directory (no NVRTC for the signatures it holds)."""
        self._binaries = os.fspath(path)
        self._cache.clear()
        self._kernels.clear()


class _ConfiguredKernel:
    """``k[grid, block, stream, shared_mem]``: call it with the kernel's arguments."""

    __slots__ = ("_kernel", "_grid", "_block", "_stream", "_shared_mem")

    def __init__(self, kernel: JitKernel, grid: Any, block: Any, stream: Any, shared_mem: int) -> None:
        self._kernel, self._grid, self._block, self._stream, self._shared_mem = kernel, grid, block, stream, shared_mem

    def __call__(self, *args: Any) -> None:
        self._kernel(self._grid, self._block, args, shared_mem=self._shared_mem, stream=self._stream)


def rawkernel(*, mode: str = "cuda", device: bool = False, signatures: Iterable[Any] = (),
              options: Sequence[str] = (), binaries: str | os.PathLike[str] | None = None) -> Callable[[Callable[..., Any]], JitKernel]:
    """Decorate a Python function to make it a CUDA kernel (``device=True``: a device function).

    ``signatures``: argument signatures to build ahead of time (``"float32[:], float32[:], uint32"``, or
    sequences of dtypes / ``"dtype[:]"`` strings / NumPy stand-ins); ``k.specs()`` gives their raw specs.
    ``options``: NVRTC options. ``binaries``: a ``kspec build`` output directory to load kernels from.
    """
    if mode != "cuda":
        raise KspecValueError(f"rawkernel: mode={mode!r} is not supported; kspec.jit generates CUDA (mode='cuda')")
    if callable(signatures) and not isinstance(signatures, (list, tuple)):
        raise KspecTypeError("rawkernel takes keyword arguments only: write @jit.rawkernel() (with parentheses)")

    def decorate(func: Callable[..., Any]) -> JitKernel:
        return JitKernel(func, device=device, signatures=signatures, options=options, binaries=binaries)

    return decorate
