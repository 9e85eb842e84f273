"""What a raw module's code compiles and loads into, shared by identical RawModule / RawKernel constructions.

A :class:`RawBuild` holds a module's code and options (already checked by :mod:`._code`) and what they
become: the compiled program per architecture (NVRTC or nvcc, behind the binary cache, or a binary a
BinaryStore serves), the module loaded per device, each kernel's function by its name or name expression,
and the launch state of each kernel (:mod:`._module`: its class and launcher). Identical constructor calls share
one build (kspec/kernels/records/_constructor_memo.py), as CuPy shares its loaded modules per device, so a kernel built
inside a function is compiled, loaded and prepared for launch once.

Function attributes (``max_dynamic_shared_size_bytes``...) belong to a loaded function and the driver keeps
them there: a kernel whose attributes were set must not share its function with kernels that did not set
them. So functions are resolved per *attribute set*: the kernels that set none share the build's modules;
those with a set of values share a module loaded for that set, with the values written at resolution.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ..._binfmt import loadable_image
from ..._errors import CompileError, KspecValueError, NvrtcNotFoundError
from ...compiler import record_load  # the compile log (a leaf module)
from ...runtime import Device, Launcher, LoadedModule
from ..callpath import refuse_traced
from ._module_cache import module_cache
from ..binaries import content_store, registered_binaries, write_attribute
from ..records import notify, observers

Overrides = tuple[tuple[str, int], ...]  # a kernel's attribute values, sorted by name: () for none


class RawBuild:
    """One raw module's code and what it compiles and loads into (see the module docstring)."""

    def __init__(self, code: str | None, path: str | None, options: tuple[str, ...], backend: str,
                 translate_cucomplex: bool, cooperative: bool, name_expressions: tuple[str, ...],
                 label: str, binaries: Any = None, binary_key: str = "") -> None:  # fmt: skip
        self.code, self.path, self.options, self.backend = code, path, options, backend
        self.translate_cucomplex, self.cooperative, self.name_expressions = translate_cucomplex, cooperative, name_expressions
        self.label = label  # the compile log's name for what this module compiles
        self.binaries, self.binary_key = binaries, binary_key  # a BinaryStore serving this source (kspec.load)
        self.programs: dict[str, Any] = {}
        self.cached_names: dict[str, dict[str, str]] = {}  # arch -> lowered names of a binary a ModuleCache held
        self._content_key = ""
        self.loaded: dict[tuple[Overrides, int], LoadedModule] = {}
        self.launch_states: dict[tuple[str, Overrides], Any] = {}  # (kernel, attribute set) -> RawKernel's state
        self.plain_classes: dict[str, type] = {}  # kernel -> the class of its state without attributes set
        self.lock = threading.RLock()

    def with_binaries(self, store: Any, key: str) -> RawBuild:
        """A new build of the same code that loads the binary ``kspec build`` filed under ``key`` first."""
        return RawBuild(self.code, self.path, self.options, self.backend, self.translate_cucomplex, self.cooperative,
                        self.name_expressions, self.label, store, key)

    # -- launching ---------------------------------------------------------------------------------------

    def launch_state(self, name: str, overrides: Overrides, kernel_class: type) -> tuple[type, Launcher]:
        """The launch state of this build's kernel ``name`` for an attribute set, shared by every kernel with that
        name and set: a private subclass of ``kernel_class`` (RawKernel) and its Launcher. The launcher installs
        the packer of the current signature as that class's __call__, so `k(grid, block, args)` runs one
        generated function instead of __call__ plus a packer (see Launcher; measured in
        benchmarks/host/launch_overhead.py)."""
        state = self.launch_states.get((name, overrides))
        if state is None:
            with self.lock:
                state = self.launch_states.get((name, overrides))
                if state is None:
                    state = self.launch_states[(name, overrides)] = self._new_launch_state(name, overrides, kernel_class)
        return state

    def _new_launch_state(self, name: str, overrides: Overrides, kernel_class: type) -> tuple[type, Launcher]:
        # What every kernel of this state shares sits on the class, so a new kernel object sets only its module.
        cls = type(kernel_class.__name__, (kernel_class,), {"__module__": kernel_class.__module__, "_build": self, "_name": name})

        def install(method: Any) -> None:
            if method is None:
                if "__call__" in cls.__dict__:
                    del cls.__call__
            else:
                setattr(cls, "__call__", method)  # noqa: B010  (mypy refuses assigning a method directly)

        def resolve(device_id: int) -> Any:
            return self.function(device_id, name, overrides)

        def vet(args: Any) -> None:  # a new signature's arguments: JAX's tracers get kspec.jax's error
            refuse_traced("RawKernel", name, args)

        launcher = Launcher(name, resolve, cooperative=self.cooperative, install=install, vet=vet)
        setattr(cls, "_launcher", launcher)  # noqa: B010  (a class made here: mypy knows no attributes of it)
        if not overrides:
            self.plain_classes[name] = cls
        return cls, launcher

    # -- compiling ---------------------------------------------------------------------------------------

    def program(self, arch: str) -> Any:
        """The CompiledProgram for ``arch`` (NVRTC, behind kspec's binary cache)."""
        program = self.programs.get(arch)
        if program is None:
            # the one definition of the program, shared with `kspec warm` (kspec/compiler/_raw_program.py)
            from ...compiler import CompileRequest, compile_cached, raw_program

            assert self.code is not None
            made = raw_program(self.code, arch, options=self.options, translate_cucomplex=self.translate_cucomplex,
                               name_expressions=self.name_expressions, backend=self.backend)
            has_binaries = self.binaries is not None and bool(self.binaries.archs(self.binary_key))
            program, _hit = compile_cached(
                made.source,
                source_key=made.source_key,
                name=self.label,
                options=made.options,
                name_expressions=made.name_expressions,
                needs=made.needs,
                backend=made.backend,
                request=CompileRequest(self.label, self.what(), has_binaries),
            )
            self.programs[arch] = program
        return program

    def content_key(self) -> str:
        """The key a ``kspec build`` of a raw spec of the same code files its binary under."""
        if not self._content_key:
            from ...render import raw_module_key

            assert self.code is not None
            self._content_key = raw_module_key(self.code, self.options, self.name_expressions, self.translate_cucomplex)
        return self._content_key

    def _find_by_content(self) -> None:
        """A registered store's binary of this code (kspec/kernels/binaries/_stores.py), found by its content key; once
        per build."""
        if self.binary_key or not registered_binaries():
            return
        self.binary_key = self.content_key()
        self.binaries = content_store(self.binary_key)

    def stored(self, arch: str) -> Any:
        return self.binaries.find(self.binary_key, arch) if self.binaries is not None else None

    def what(self) -> str:
        """The compile log's (and the compile policy's) name for what this module compiles."""
        if self.path is not None:
            return f"file {self.path}"
        if self.name_expressions:
            return "name expressions " + ", ".join(self.name_expressions)
        return "raw module"

    def image(self, device: Device) -> tuple[bytes, bool]:
        """The module's image for the device, and whether it is a precompiled binary (else compiled/cached)."""
        if self.path is not None:
            return loadable_image(Path(self.path).read_bytes(), Path(self.path).suffix), True
        if self.binaries is None and self.backend == "nvrtc":
            self._find_by_content()
        stored = self.stored(device.arch)
        if stored is not None:
            failed = stored.failure()
            if failed is not None:  # a captured module that failed to compile where it was built, and must here too
                from ...compiler import recorded_failure

                raise recorded_failure(failed, self.label)
            return stored.read(), True
        cache = module_cache() if self.code is not None and self.backend == "nvrtc" else None
        if cache is not None:  # a cache the program pointed CuPy's kernel cache to (kspec/kernels/raw/_module_cache.py)
            found = cache.load(self.content_key(), device.arch, self.name_expressions)
            if found is not None:
                self.cached_names[device.arch] = found[1]
                return found[0], True
        try:
            program = self.program(device.arch)
        except NvrtcNotFoundError as exc:
            if self.binaries is None:
                raise
            raise self.binaries.missing(f"module {self.label!r}", self.binary_key, device.arch, exc) from None
        if cache is not None:
            assert self.code is not None
            cache.save(self.content_key(), device.arch, program.binary, program.lowered_names, self.code)
        return program.binary, False

    # -- loading -----------------------------------------------------------------------------------------

    def module(self, device_id: int, overrides: Overrides = ()) -> LoadedModule:
        """The module loaded on a device for the kernels with this attribute set (the shared one for none)."""
        module = self.loaded.get((overrides, device_id))
        if module is None:
            with self.lock:
                module = self.loaded.get((overrides, device_id))
                if module is None:
                    device = Device(device_id)
                    what = self.path if self.path else f"module {self.label!r}"
                    start = time.perf_counter()
                    image, precompiled = self.image(device)
                    module = LoadedModule(image, device, what=what)
                    if observers and self.code is not None and not self.loaded:  # kspec capture, once per module
                        notify("raw_loaded", self)
                    if precompiled:  # a compile or a cache hit is logged by compile_cached
                        record_load(self.label, self.what(), device.arch, "binary", (time.perf_counter() - start) * 1e3)
                    self.loaded[(overrides, device_id)] = module
        return module

    def symbol(self, name: str, arch: str) -> str:
        if self.code is not None and name in self.name_expressions:
            stored = self.stored(arch)
            if stored is not None and name in stored.lowered_names:
                return str(stored.lowered_names[name])
            cached = self.cached_names.get(arch)
            if cached is not None and name in cached:
                return cached[name]
            return str(self.program(arch).lowered_names[name])  # a binary built without this name: compile
        return name

    def function(self, device_id: int, name: str, overrides: Overrides = ()) -> Any:
        """The CUfunction for ``name`` on a device, with the attribute set written (a KspecValueError listing the
        module's names if there is no such kernel)."""
        try:
            module = self.module(device_id, overrides)
        except CompileError:
            if observers and self.code is not None:  # kspec capture: a failure the calling code may rely on
                notify("raw_failed", self, name)
            raise
        if observers and self.code is not None:  # kspec capture: the functions a module is asked for
            notify("raw_function", self, name)
        fn = module.function(self.symbol(name, Device(device_id).arch))
        if fn is None:
            raise KspecValueError(self.not_found(name, module, "kernel"))
        for attr, value in overrides:
            write_attribute(fn, attr, value, name)
        return fn

    def not_found(self, name: str, module: LoadedModule, what: str) -> str:
        names = module.function_names()
        parts = [f"{what} {name!r} is not in {module.what}"]
        if names:
            parts.append("its kernels: " + ", ".join(names))
        if self.name_expressions:
            parts.append("its name expressions: " + ", ".join(self.name_expressions))
        if "<" in name and name not in self.name_expressions:
            parts.append("a template kernel must be listed in name_expressions= to be instantiated")
        elif self.code is not None and not self.name_expressions and names and name not in names:
            parts.append('C++ kernels need extern "C" or name_expressions= to be found by their plain name')
        return "; ".join(parts)
