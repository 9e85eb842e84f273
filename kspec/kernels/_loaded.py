"""A specialization's code on one device: its precompiled module, or its entry points compiled one by one.

A module rendered for a specialization declares every launch variant (contiguous, strided, tiled...) as a
template; a call uses one or two. Compiling all of them costs NVRTC four times what the one a first call
needs does, so a kernel without a precompiled binary compiles each variant on first use, as its own
program (its own binary-cache entry). ``kspec build`` still writes one binary with every variant: a
precompiled kernel is loaded whole.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import LaunchError, NvrtcNotFoundError, kernel_label
from ..render import ModuleInterface, Specialization, VariantKey, module_interface
from ..compiler import HOST_ARCH  # a leaf constant (kspec.compiler is lazy: no NVRTC, no cache)
from ..compiler import record_load  # the compile log (a leaf module)
from ..runtime import Device, LoadedModule

if TYPE_CHECKING:
    from ..render import RenderedModule

_lock = threading.RLock()
_interfaces: dict[str, ModuleInterface] = {}
_rendered: dict[tuple[str, bool], RenderedModule] = {}
_loaded: dict[tuple[str, int], LoadedKernel] = {}


def interface_of(specialization: Specialization) -> ModuleInterface:
    """The memoised launch interface (no Jinja: a kernel served by a binary never renders its source)."""
    found = _interfaces.get(specialization.key)
    if found is None:
        found = _interfaces[specialization.key] = module_interface(specialization)
    return found


def rendered_module(specialization: Specialization, arch: str = "") -> RenderedModule:
    """The module's source for ``arch``: CUDA C++ for a GPU, kspec's host templates for the CPU device
    (``arch == "host"``: same entries and ABI, host loops)."""
    host = arch == HOST_ARCH
    found = _rendered.get((specialization.key, host))
    if found is None:
        from ..render import render, render_host  # render a plain spec (kspec.spec.PlainSpec) as it is: no Pydantic

        found = _rendered[(specialization.key, host)] = (render_host if host else render)(specialization)
    return found


class LoadedKernel:
    """One specialization on one device: its entry points by variant, each resolved once."""

    def __init__(self, specialization: Specialization, interface: ModuleInterface, device: Device, binaries: Any,
                 whole: tuple[LoadedModule, Mapping[str, str]] | None) -> None:
        self.specialization = specialization
        self.interface = interface
        self.device = device
        self.binaries = binaries
        self._whole = whole  # the precompiled module with every variant, when there is one
        self._modules: dict[VariantKey, tuple[LoadedModule, Mapping[str, str]]] = {}
        self.functions: dict[VariantKey, Any] = {}

    def module(self, variant: VariantKey) -> LoadedModule:
        """The loaded module holding ``variant``'s entry point (compiled and loaded on first use)."""
        return self._module_and_names(variant)[0]

    def function(self, variant: VariantKey) -> Any:
        fn = self.functions.get(variant)
        if fn is None:
            module, lowered = self._module_and_names(variant)
            expression = self.interface.variants[variant]
            fn = module.function(lowered[expression])
            if fn is None:
                raise LaunchError(f"{module.what}: entry point {expression} is missing from the binary")
            self.functions[variant] = fn
        return fn

    def _module_and_names(self, variant: VariantKey) -> tuple[LoadedModule, Mapping[str, str]]:
        if self._whole is not None:
            return self._whole
        found = self._modules.get(variant)
        if found is None:
            with _lock:
                found = self._modules.get(variant)
                if found is None:
                    expression = self.interface.variants[variant]
                    image, lowered, _log = compile_program(self.specialization, self.device.arch, self.binaries, (expression,))
                    module = LoadedModule(image, self.device, what=kernel_label(self.interface.name))
                    found = self._modules[variant] = (module, dict(lowered))
        return found


def loaded_kernel(specialization: Specialization, device_id: int, binaries: Any = None) -> LoadedKernel:
    """``specialization`` on a device, once: from ``binaries`` (a BinaryStore) when it has a binary for the
    device (loaded whole), else each variant compiled (or fetched from the binary cache) on first use."""
    key = (specialization.key, device_id)
    found = _loaded.get(key)
    if found is not None:
        return found
    with _lock:
        found = _loaded.get(key)
        if found is None:
            device = Device(device_id)
            # the interface the build stored with the binaries (kspec/_manifest.py), else derived
            stored_interface = binaries.interface(specialization.key) if binaries is not None else None
            interface = stored_interface if stored_interface is not None else interface_of(specialization)
            stored = binaries.find(specialization.key, device.arch) if binaries is not None else None
            whole = None
            if stored is not None:
                start = time.perf_counter()
                module = LoadedModule(stored.read(), device, what=kernel_label(interface.name, stored.path))
                whole = (module, dict(stored.lowered_names))
                record_load(interface.name, specialization_label(specialization, None), device.arch, "binary",
                            (time.perf_counter() - start) * 1e3)
            found = _loaded[key] = LoadedKernel(specialization, interface, device, binaries, whole)
    return found


def compile_program(specialization: Specialization, arch: str, binaries: Any = None,
                    expressions: tuple[str, ...] | None = None) -> tuple[bytes, Mapping[str, str], str]:
    """The binary, lowered names and NVRTC log of ``expressions`` (default: every variant) of
    ``specialization`` for ``arch``, behind the binary cache. Without NVRTC, a kernel that has ``binaries``
    raises the store's error naming the binary it lacks.

    The cache key names the source by the specialization key and the renderer's digest (which determine
    it), so a hit neither renders the source nor imports Jinja; a miss renders it."""
    from .. import __version__
    from .._resources import renderer_digest
    from ..compiler import CompileOptions, CompileRequest, compile_cached

    name = specialization.name
    if expressions is None:
        expressions = specialization.name_expressions
    options = CompileOptions(arch=arch, extra=specialization.nvrtc_options)
    label = specialization_label(specialization, expressions[0] if len(expressions) == 1 else None)
    request = CompileRequest(name, label, binaries is not None and bool(binaries.archs(specialization.key)),
                             lambda target: build_advice(specialization, target))
    try:
        program, _hit = compile_cached(
            lambda: rendered_module(specialization, arch).source,
            source_key=f"kspec {__version__} specialization {specialization.key} renderer {renderer_digest()}",
            name=name,
            options=options,
            name_expressions=expressions,
            needs=specialization.needs,
            request=request,
        )
    except NvrtcNotFoundError as exc:
        if binaries is None:
            raise
        what = kernel_label(name, dict(specialization.types) or "no placeholders")
        raise binaries.missing(what, specialization.key, arch, exc) from None
    return program.binary, program.lowered_names, program.log


def specialization_label(specialization: Specialization, expression: str | None) -> str:
    """The specialization as the compile log and the compile policy's messages name it: placeholder types,
    scalar inputs, and the variant's name expression (``all variants`` for a whole module)."""
    types = ", ".join(f"{letter}={dtype}" for letter, dtype in specialization.types.items()) or "no placeholders"
    parts = [types]
    if specialization.scalars:
        parts.append("scalar inputs " + ", ".join(sorted(specialization.scalars)))
    parts.append(f"variant {expression}" if expression is not None else "all variants")
    return "; ".join(parts)


def build_advice(specialization: Specialization, arch: str) -> str:
    """What would have produced a binary of ``specialization`` for ``arch``: the ``kspec build`` line for a
    spec from a file (with the ``instantiations`` entry it lacks, if any), else the generic advice."""
    spec = specialization.spec
    origin = getattr(spec, "origin", None)
    types = dict(specialization.types)
    declared = getattr(spec, "instantiations", None)
    if declared is None and hasattr(spec, "to_data"):  # a plain spec (a generated module's table)
        declared = spec.to_data().get("instantiations")
    entry = "{" + ", ".join(f'{letter} = "{dtype}"' for letter, dtype in types.items()) + "}"
    lacks = bool(types) and not any(_covers(inst, types) for inst in declared or ())
    if origin is not None:
        line = f"kspec build {origin} --arch {arch}"
        return f"add {entry} to its instantiations in {origin}, then {line}" if lacks else line
    if declared and lacks:  # a generated module's kernel: its spec file declares what the build compiles
        return f"add {entry} to its instantiations in its spec file, then kspec build <spec file> --arch {arch}"
    return (f"call it once with KSPEC_COMPILE=allow (the binary cache then serves it), or build it ahead "
            f"(kspec build <spec file> --arch {arch})")


def _covers(instantiation: Any, types: dict[str, str]) -> bool:
    """Whether a declared instantiation (``{T = "float32"}``, or a table's ``{T = ["float32", ...]}``) names
    the binding ``types``."""
    if not isinstance(instantiation, Mapping) or set(instantiation) != set(types):
        return False
    return all(types[k] in (v if isinstance(v, (list, tuple)) else (v,)) for k, v in instantiation.items())
