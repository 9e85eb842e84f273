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
from collections.abc import Callable, Mapping
from typing import Any

from ..._errors import LaunchError, kernel_label
from ...render import ModuleInterface, Specialization, VariantKey, module_interface, stand_in
# the per-variant compile, shared with `kspec warm` (kspec/compiler/_specialization.py)
from ...compiler import cached_binary, compile_program, record_load, specialization_label
from ...runtime import Device, LoadedModule, refuse_while_capturing
from ._stores import content_store

_lock = threading.RLock()
_interfaces: dict[str, ModuleInterface] = {}
_loaded: dict[tuple[str, int], LoadedKernel] = {}
# (binary-cache key, device) -> its module: a variant's module loaded once per process, whether a plan or a call
# record (kspec/kernels/records/_call_store.py) asked for it first
_by_cache_key: dict[tuple[str, int], LoadedModule] = {}
# told (specialization key, variant text) of each launch variant loaded on its own: how kspec capture learns which
# entry points a call used (kspec/kernels/records/_observers.py forwards it); empty unless a capture watches
_variant_hooks: list[Callable[[str, str], None]] = []


def on_variant_loaded(hook: Callable[[str, str], None]) -> None:
    """Call ``hook(specialization_key, "entry/index/ndim/vec")`` for each launch variant a kernel loads on its own
    (compiled, cached or a variant binary) from now on; a whole precompiled module's variants are not told."""
    if hook not in _variant_hooks:
        _variant_hooks.append(hook)


def interface_of(specialization: Specialization) -> ModuleInterface:
    """The memoised launch interface (no Jinja: a kernel served by a binary never renders its source)."""
    found = _interfaces.get(specialization.key)
    if found is None:
        found = _interfaces[specialization.key] = module_interface(specialization)
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
        self._cache_keys: dict[VariantKey, str] = {}  # variant -> its module's binary-cache key
        self.functions: dict[VariantKey, Any] = {}
        self.reduce_itemsize: int | None = None  # a reduction's partial size where only the binary says it

    def module(self, variant: VariantKey, stream: int | None = None) -> LoadedModule:
        """The loaded module holding ``variant``'s entry point (compiled and loaded on first use)."""
        return self._module_and_names(variant, stream)[0]

    def function(self, variant: VariantKey, stream: int | None = None) -> Any:
        """``variant``'s entry point, resolved once. ``stream``: the launch stream of the call that asks; a
        first resolution while it captures a CUDA graph raises :class:`kspec.CaptureError` before anything
        compiles or loads."""
        fn = self.functions.get(variant)
        if fn is None:
            if stream is not None:
                refuse_while_capturing(stream, kernel_label(self.interface.name))
            module, lowered = self._module_and_names(variant)
            expression = self.interface.variants[variant]
            fn = module.function(lowered[expression])
            if fn is None:
                raise LaunchError(f"{module.what}: entry point {expression} is missing from the binary")
            self.functions[variant] = fn
        return fn

    def locator(self, variant: VariantKey) -> tuple[str, str] | None:
        """(binary-cache key, lowered entry name) of a resolved ``variant``: where another process finds it
        (:func:`cached_function`); None for a precompiled module (a BinaryStore's, not the cache's)."""
        key = self._cache_keys.get(variant)
        if key is None or self._whole is not None:
            return None
        return key, self._modules[variant][1][self.interface.variants[variant]]

    def _module_and_names(self, variant: VariantKey, stream: int | None = None) -> tuple[LoadedModule, Mapping[str, str]]:
        if self._whole is not None:
            return self._whole
        found = self._modules.get(variant)
        if found is None:
            if stream is not None:
                refuse_while_capturing(stream, kernel_label(self.interface.name))
            with _lock:
                found = self._modules.get(variant)
                if found is None:
                    found = self._modules[variant] = (self._stored_variant(variant) or self._stored_twin(variant)
                                                      or self._compiled_variant(variant))
                    for hook in _variant_hooks:
                        hook(self.specialization.key, variant.text)
        return found

    def _stored_variant(self, variant: VariantKey) -> tuple[LoadedModule, Mapping[str, str]] | None:
        """``variant``'s binary where the store holds it alone (a build of a captured specialization's
        ``variants``), loaded; None otherwise."""
        if self.binaries is None:
            return None
        stored = self.binaries.find_variant(self.specialization.key, variant.text, self.device.arch)
        if stored is None:
            return None
        start = time.perf_counter()
        expression = self.interface.variants[variant]
        module = LoadedModule(stored.read(), self.device, what=kernel_label(self.interface.name, stored.path))
        record_load(self.interface.name, specialization_label(self.specialization, expression), self.device.arch,
                    "binary", (time.perf_counter() - start) * 1e3)
        return module, dict(stored.lowered_names)

    def _stored_twin(self, variant: VariantKey) -> tuple[LoadedModule, Mapping[str, str]] | None:
        """``variant`` served by its stand-in's stored binary (:func:`kspec.render.stand_in`: an indexed module's
        dense entry by the strided one), where the store holds that one alone, so that a served call loads it
        rather than compiling (or, under ``KSPEC_COMPILE=never``, being refused)."""
        twin = stand_in(variant)
        if twin is None or twin not in self.interface.variants:
            return None
        found = self._stored_variant(twin)
        if found is None:
            return None
        module, lowered = found
        return module, {self.interface.variants[variant]: lowered[self.interface.variants[twin]]}

    def _compiled_variant(self, variant: VariantKey) -> tuple[LoadedModule, Mapping[str, str]]:
        """``variant``'s own program, from the binary cache or compiled (the compile policy applies)."""
        expression = self.interface.variants[variant]
        image = compile_program(self.specialization, self.device.arch, self.binaries, (expression,))
        module = _by_cache_key.get((image.cache_key, self.device.id))
        if module is None:
            module = LoadedModule(image.binary, self.device, what=kernel_label(self.interface.name))
            _by_cache_key[(image.cache_key, self.device.id)] = module
        self._cache_keys[variant] = image.cache_key
        return module, dict(image.lowered_names)


def module_loaded(cache_key: str, device_id: int) -> bool:
    """Whether the binary the cache keeps under ``cache_key`` is loaded on the device in this process."""
    return (cache_key, device_id) in _by_cache_key


def cached_function(cache_key: str, entry: str, device_id: int, name: str,
                    binary: Callable[[str], bytes | None] | None = None) -> Any | None:  # fmt: skip
    """The entry point ``entry`` (lowered) of the binary kept under ``cache_key``, loaded on a device once per
    process (shared with the plans that load it): ``binary(cache_key)``'s copy, else the binary cache's; None
    where neither has it."""
    module = _by_cache_key.get((cache_key, device_id))
    if module is None:
        image = binary(cache_key) if binary is not None else None
        if image is None:
            image = cached_binary(cache_key)
        if image is None:
            return None
        with _lock:
            module = _by_cache_key.get((cache_key, device_id))
            if module is None:
                module = _by_cache_key[(cache_key, device_id)] = LoadedModule(image, Device(device_id),
                                                                              what=kernel_label(name))
    return module.function(entry)


def loaded_kernel(specialization: Specialization, device_id: int, binaries: Any = None,
                  stream: int | None = None) -> LoadedKernel:  # fmt: skip
    """``specialization`` on a device, once: from ``binaries`` (a BinaryStore) when it has a binary for the
    device (loaded whole), else each variant compiled (or fetched from the binary cache) on first use.
    ``stream``: the launch stream of the call that asks; a first load while it captures a CUDA graph raises
    :class:`kspec.CaptureError` before anything loads."""
    key = (specialization.key, device_id)
    found = _loaded.get(key)
    if found is not None:
        return found
    if stream is not None:
        refuse_while_capturing(stream, kernel_label(specialization.spec.name))
    with _lock:
        found = _loaded.get(key)
        if found is None:
            device = Device(device_id)
            if binaries is None:  # a constructor call: a registered store may hold this code's binary
                binaries = content_store(specialization.key)
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
