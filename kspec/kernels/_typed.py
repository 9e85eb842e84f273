"""What ElementwiseKernel and ReductionKernel share: specializations, their modules per device, launches.

One rendered module per specialization (spec + placeholder binding + scalar inputs) serves every call
shape; it is rendered once per process, compiled once per architecture (behind the disk cache) and loaded
once per device. The tables are module-level, so two kernel objects with equal specs share everything.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .._errors import LaunchError
from ..compiler import CompileOptions, compile_cached
from ..render import RenderedModule, Specialization, VariantKey, render, specialize
from ..runtime import _driver
from ..runtime._device import Device
from ..runtime._devicearray import allocate_like
from ..runtime._module import LoadedModule
from ..runtime._stream import cu_stream, default_stream_getter, stream_handle
from ..spec import ElementwiseSpec, ReductionSpec

_INVALID_CONTEXT = 201

_lock = threading.Lock()
_specializations: dict[tuple[str, tuple[tuple[str, str], ...], frozenset[str]], Specialization] = {}
_rendered: dict[str, RenderedModule] = {}
_loaded: dict[tuple[str, int], "LoadedKernel"] = {}


def specialization_of(spec: ElementwiseSpec | ReductionSpec, spec_key: str, types: dict[str, str], scalars: frozenset[str]) -> Specialization:
    """The memoised Specialization of ``spec`` (identified by ``spec_key``) for a binding."""
    key = (spec_key, tuple(types.items()), scalars)
    found = _specializations.get(key)
    if found is None:
        found = _specializations[key] = specialize(spec, types, scalars=scalars)
    return found


def rendered_module(specialization: Specialization) -> RenderedModule:
    found = _rendered.get(specialization.key)
    if found is None:
        found = _rendered[specialization.key] = render(specialization)
    return found


@dataclass
class LoadedKernel:
    """One specialization's module loaded on one device, and its entry points by variant."""

    rendered: RenderedModule
    module: LoadedModule
    lowered: dict[str, str]
    functions: dict[VariantKey, Any]

    def function(self, variant: VariantKey) -> Any:
        fn = self.functions.get(variant)
        if fn is None:
            expression = self.rendered.variants[variant]
            fn = self.module.function(self.lowered[expression])
            if fn is None:
                raise LaunchError(f"{self.module.what}: entry point {expression} is missing from the binary")
            self.functions[variant] = fn
        return fn


def loaded_kernel(specialization: Specialization, device_id: int) -> LoadedKernel:
    """Render, compile (or fetch from the binary cache) and load ``specialization`` on a device, once."""
    key = (specialization.key, device_id)
    found = _loaded.get(key)
    if found is not None:
        return found
    with _lock:
        found = _loaded.get(key)
        if found is None:
            device = Device(device_id)
            rendered = rendered_module(specialization)
            options = CompileOptions(arch=device.arch, extra=tuple(specialization.spec.options))
            program, _hit = compile_cached(
                rendered.source,
                name=rendered.name,
                options=options,
                name_expressions=rendered.name_expressions,
                needs=rendered.needs,
            )
            module = LoadedModule(program.binary, device, what=f"kernel '{rendered.name}'")
            found = _loaded[key] = LoadedKernel(rendered, module, dict(program.lowered_names), {})
    return found


def resolve_stream(stream: object, library: str | None, device_id: int) -> int:
    """The handle to launch on: ``stream=`` when given, else the current stream of the arrays' library."""
    if stream is not None:
        return stream_handle(stream)
    return default_stream_getter(library)(device_id)


def allocate(library: str | None, shape: tuple[int, ...], dtype: str, stream: int, device_id: int) -> Any:
    from .. import dtypes

    np_dtype = dtypes.BY_NAME[dtype].numpy
    return allocate_like(library, shape, np_dtype, stream, device=device_id)


def launch(fn: Any, grid: int, block: int, params: int, stream: int, device_id: int, what: str) -> None:
    """``cuLaunchKernel`` with a 1-d grid and block and a ready ``kernelParams`` address."""
    cu = _driver.driver()
    hs = cu_stream(stream)
    (err,) = cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, hs, params, 0)
    if err and int(err) == _INVALID_CONTEXT:
        Device(device_id).activate()
        (err,) = cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, hs, params, 0)
    if err:
        raise LaunchError(f"launching {what} (grid={grid}, block={block}) failed: {_driver.describe(err)}")


def activate(device_id: int) -> None:
    """Make the arrays' device current when the process sees several (one device: nothing to do)."""
    if _driver._device_count > 1:
        Device(device_id).activate()
