"""RawModule and RawKernel: CuPy's raw CUDA kernels, compiled by NVRTC and launched by kspec's runtime.

Code written for ``cupy.RawKernel`` / ``cupy.RawModule`` runs unchanged, with CuPy arrays, PyTorch tensors or
kspec arrays as arguments. Where kspec differs:

* Nothing is compiled or loaded when an object is created, nor by ``get_function``: the first call, the
  first ``attributes`` read, ``get_global`` or ``compile()`` do it (for the current device's architecture).
  A name that is not in the module is reported then, with the names the module does have.
* The default C++ standard is C++17 (CuPy: C++11), which CCCL's headers (``<cuda/std/...>``, cub) need
  (kspec's complex header and ``<cupy/cuda_workaround.h>`` keep to C++11); a ``-std=`` in ``options`` wins.
* ``backend='nvcc'`` compiles with a CUDA toolkit's nvcc where one is found (``CUDA_PATH``, ``CUDA_HOME``,
  ``PATH``, cuda.pathfinder): same options, name expressions (unlike CuPy), cache and ``compile(log_stream=)``.
  ``jitify=True`` is not supported (a clear error says what to do instead).
* A non-``extern "C"`` kernel can be named plainly (``RawKernel(code, 'my_kernel')``): the name is
  registered as an NVRTC name expression and lowered, so C++ linkage needs no mangled name.
* Argument count and sizes are checked against the kernel's parameters where the driver can say
  (CUDA >= 12.4), see :mod:`kspec.runtime._launch_args`.
* Pickling keeps the source and options (or the path), and the settable attributes; the kernel compiles
  again (from the disk cache) in the process that unpickles it.

Both classes live here because each makes the other (``RawKernel(code, name)`` its module,
``RawModule.get_function`` its kernels). What a module's code compiles and loads into is
:mod:`._code`; the kernels' function attributes are :mod:`..binaries._function_attributes`.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import IO, Any

import numpy as np

from ..._errors import KspecTypeError, KspecValueError
from ...compiler import kernel_expressions
from ...runtime import DeviceGlobal, Launcher, get_device
from ..binaries import FUNCTION_ATTRIBUTES, FunctionAttribute, read_attribute, write_attribute
from ._build import RawBuild
from ..records import RAW_MODULES
from ._module_cache import module_cache
from ._code import RawCode


_NO_OVERRIDES: Mapping[str, int] = MappingProxyType({})  # a kernel's attribute values until it sets one
_class_watchers: list[Callable[[type], None]] = []


def watch_raw_kernel_classes(watcher: Callable[[type], None]) -> None:
    """Tell ``watcher`` of every RawKernel class: RawKernel, the launch-state subclasses made so far
    (RawBuild.launch_state), then each new one as it is made. kspec.torch gives them to Dynamo, which dispatches
    on a value's exact type."""
    _class_watchers.append(watcher)
    classes: list[type] = [RawKernel, *RawKernel.__subclasses__()]
    for cls in classes:
        watcher(cls)


class RawModule(RawCode):
    """A CUDA module from source (compiled by NVRTC) or from a ``.cubin`` / ``.ptx`` / ``.fatbin`` file.

    ``code`` XOR ``path``. ``name_expressions`` lists template (or other C++) kernels to instantiate, e.g.
    ``['fx3<float>', 'fx3<double>']``; each is then a valid ``get_function`` name.
    """

    def __init__(
        self,
        code: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        options: Sequence[str] = (),
        backend: str = "nvrtc",
        translate_cucomplex: bool = False,
        enable_cooperative_groups: bool = False,
        name_expressions: Sequence[str] | None = None,
        jitify: bool = False,
    ) -> None:
        self._kernels: dict[str, RawKernel] = {}
        if path is None and type(code) is str and type(options) is tuple and name_expressions is None and (
            translate_cucomplex is False and enable_cooperative_groups is False and jitify is False
        ):  # CuPy's usual call, made again: the remembered build without the general checks (~1 us less)
            build = RAW_MODULES.get((code, options, backend, False, False, None, False, "raw_module"))  # module_key's
            if build is not None:
                self._build = build
                return
        super().__init__(
            code, path, options, backend, translate_cucomplex, enable_cooperative_groups, name_expressions, jitify
        )

    @classmethod
    def _of_build(cls, build: RawBuild) -> RawModule:
        """A module object of a build (for a kernel whose module object is gone)."""
        module = object.__new__(cls)
        module._build = build
        module._kernels = {}
        return module

    @classmethod
    def _of_kernel(cls, code: str, name: str, options: Sequence[str], backend: str, translate_cucomplex: bool,
                   enable_cooperative_groups: bool, jitify: bool) -> RawModule:  # fmt: skip
        """``RawKernel(code, name)``'s own module: ``name`` lowered as a name expression where NVRTC can take
        it, and the compile log's label."""
        expressions = kernel_expressions(name) or None  # shared with `kspec warm` (kspec/compiler/_raw_program.py)
        module = object.__new__(cls)
        RawCode.__init__(module, code, None, options, backend, translate_cucomplex, enable_cooperative_groups,
                         expressions, jitify, name if expressions else "raw_kernel")  # fmt: skip
        module._kernels = {}
        return module

    # -- CuPy's read-only attributes ---------------------------------------------------------------------

    @property
    def code(self) -> str | None:
        return self._code

    @property
    def path(self) -> str | None:
        return self._path

    file_path = path  # CuPy's name

    @property
    def options(self) -> tuple[str, ...]:
        return self._options

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def translate_cucomplex(self) -> bool:
        return self._translate_cucomplex

    @property
    def enable_cooperative_groups(self) -> bool:
        return self._cooperative

    @property
    def name_expressions(self) -> tuple[str, ...]:
        return self._name_expressions

    def __repr__(self) -> str:
        what = f"path={self._path!r}" if self._path else f"code=<{len(self._code or '')} chars>"
        return f"<kspec.RawModule {what}>"

    # -- pickling ----------------------------------------------------------------------------------------

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild_module, (self._code, self._path, self._options, self._translate_cucomplex,
                                  self._cooperative, self._name_expressions or None, self._backend))

    # -- compiling (the machinery is RawCode's) ----------------------------------------------------------

    def compile(self, log_stream: IO[str] | None = None, *, arch: str | None = None) -> None:
        """Compile now (normally the first use does it) and write NVRTC's log to ``log_stream``.

        Without ``arch`` it compiles for the current device and loads the module there; with ``arch``
        (``'sm_90'``...) it only compiles, which needs no GPU. A module from ``path=`` has nothing to
        compile; without ``arch`` it is loaded.
        """
        from ...compiler import explicit_compiles

        with explicit_compiles():  # asked for: allowed whatever the compile policy (kspec.compile_policy)
            if self._code is not None:
                target = arch if arch is not None else get_device().arch
                program = self._program(target)
                if log_stream is not None and program.log:
                    log_stream.write(program.log)
                    if not program.log.endswith("\n"):
                        log_stream.write("\n")
            if arch is None:
                self._module(get_device().id)

    # -- CuPy's lookups ----------------------------------------------------------------------------------

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name`` (a plain name, or one of ``name_expressions``) as a RawKernel.

        Lazy: nothing is compiled or looked up until the kernel is first used (or now, for a ModuleCache).
        """
        kernels = self._kernels
        kernel = kernels.get(name) if type(name) is str else None
        if kernel is not None:
            return kernel
        if not isinstance(name, str) or not name:
            raise KspecTypeError(f"name: expected a kernel name (str), got {name!r}")
        # A kernel refers to its module weakly (the module keeps it: no reference cycle for the collector, for
        # code that gets a kernel from a new module on every call); the rest of its state is its class's.
        build = self._build
        kernel_class = build.plain_classes.get(name) or build.launch_state(name, (), RawKernel)[0]
        kernel = kernels[name] = object.__new__(kernel_class)
        kernel._owner = weakref.ref(self)
        if module_cache() is not None:  # CuPy's cache pointed elsewhere: it holds the module once this returns
            build.function(get_device().id, name)
        return kernel

    def get_global(self, name: str) -> DeviceGlobal:
        """The ``__device__`` / ``__constant__`` variable ``name`` on the current device (compiles and loads)."""
        if not isinstance(name, str) or not name:
            raise KspecTypeError(f"name: expected a variable name (str), got {name!r}")
        device = get_device()
        module = self._module(device.id)
        symbol = self._symbol(name, device.arch)
        found = module.global_symbol(symbol)
        if found is None:
            raise KspecValueError(f"global {name!r} is not in {module.what} (no __device__ or __constant__ variable of that name)")
        ptr, size = found
        return DeviceGlobal(ptr, size, device.id, name, module)


class RawKernel:
    """A kernel from raw CUDA source: ``RawKernel(code, name)(grid, block, args, shared_mem=0, stream=None)``.

    ``grid`` and ``block`` are ints or 1-3 tuples. ``args`` is a tuple: device arrays (CuPy, PyTorch, kspec,
    anything with ``__cuda_array_interface__`` / ``__dlpack__``) become pointers; Python int -> int64,
    float -> double, complex -> complex128, bool -> bool; NumPy scalars keep their dtype; None -> NULL.
    Without ``stream=``, the launch goes to the current stream of the arrays' library (CuPy's, PyTorch's),
    else to the legacy default stream.
    """

    _owner: RawModule | weakref.ReferenceType[RawModule]  # its own module, or the module it came from (weakly)
    _build: RawBuild
    _name: str
    _launcher: Launcher
    _overrides: Mapping[str, int] = _NO_OVERRIDES  # the attribute values this kernel set (a new mapping per set)
    # _build, _name and _launcher are also the launch state's class attributes (RawBuild.launch_state)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for watcher in _class_watchers:
            watcher(cls)

    def __init__(
        self,
        code: str,
        name: str,
        options: Sequence[str] = (),
        backend: str = "nvrtc",
        translate_cucomplex: bool = False,
        *,
        enable_cooperative_groups: bool = False,
        jitify: bool = False,
    ) -> None:
        if not isinstance(code, str):
            raise KspecTypeError(f"code: expected CUDA source as a str, got {type(code).__name__}")
        if not isinstance(name, str) or not name:
            raise KspecTypeError(f"name: expected the kernel's name (str), got {name!r}")
        module = RawModule._of_kernel(code, name, options, backend, translate_cucomplex, enable_cooperative_groups, jitify)
        self._setup(module, name)

    def _setup(self, module: RawModule, name: str) -> None:
        self._owner = module
        self._build = module._build
        self._name = name
        self._overrides = _NO_OVERRIDES
        self._take_launch_state()

    @property
    def _module(self) -> RawModule:
        """The module this kernel came from (a module object of the same build when that one is gone)."""
        owner = self._owner
        if isinstance(owner, weakref.ReferenceType):
            found = owner()
            if found is None:
                found = self._owner = RawModule._of_build(self._build)
            return found
        return owner

    def _take_launch_state(self) -> None:
        """Become a kernel of the launch state for this name and attribute set in the module's build, shared with
        every kernel of an identical construction that set the same attributes (RawBuild.launch_state)."""
        overrides = tuple(sorted(self._overrides.items())) if self._overrides else ()
        self.__class__, self._launcher = self._build.launch_state(self._name, overrides, RawKernel)

    def _use_binaries(self, store: Any, key: str) -> None:
        """Serve this kernel's module from ``store`` (see RawCode._use_binaries) and launch from that build."""
        module = self._module
        module._use_binaries(store, key)
        self._build = module._build
        self._take_launch_state()

    # -- the call ----------------------------------------------------------------------------------------

    def __call__(self, grid: Any, block: Any, args: Any, *, shared_mem: int = 0, stream: Any = None) -> None:
        # Only until the first launch: then the launcher installs a generated __call__ on this kernel's class.
        self._launcher.launch(grid, block, args, shared_mem, stream)

    # -- CuPy's read-only attributes ---------------------------------------------------------------------

    @property
    def code(self) -> str | None:
        return self._build.code

    @property
    def name(self) -> str:
        return self._name

    @property
    def options(self) -> tuple[str, ...]:
        return self._build.options

    @property
    def backend(self) -> str:
        return self._build.backend

    @property
    def translate_cucomplex(self) -> bool:
        return self._build.translate_cucomplex

    @property
    def enable_cooperative_groups(self) -> bool:
        return self._build.cooperative

    @property
    def file_path(self) -> str | None:
        return self._build.path

    @property
    def module(self) -> RawModule:
        return self._module

    def __repr__(self) -> str:
        return f"<kspec.RawKernel {self._name!r}>"

    def compile(self, log_stream: IO[str] | None = None, *, arch: str | None = None) -> None:
        """Compile now and write NVRTC's log to ``log_stream``; see :meth:`RawModule.compile`.

        Without ``arch`` it also loads the kernel on the current device (so a wrong name is reported here).
        """
        from ...compiler import explicit_compiles

        with explicit_compiles():
            self._module.compile(log_stream, arch=arch)
            if arch is None:
                self._launcher.function(get_device().id)

    # -- attributes (kspec/kernels/binaries/_function_attributes.py) -----------------------------------------------------

    max_threads_per_block = FunctionAttribute()
    shared_size_bytes = FunctionAttribute()
    const_size_bytes = FunctionAttribute()
    local_size_bytes = FunctionAttribute()
    num_regs = FunctionAttribute()
    ptx_version = FunctionAttribute()
    binary_version = FunctionAttribute()
    cache_mode_ca = FunctionAttribute()
    max_dynamic_shared_size_bytes = FunctionAttribute()  # settable
    preferred_shared_memory_carveout = FunctionAttribute()  # settable

    def _function_here(self) -> Any:
        return self._launcher.function(get_device().id)

    @property
    def attributes(self) -> dict[str, int]:
        """All of CuPy's function attributes on the current device (-1 for one the driver lacks)."""
        fn = self._function_here()
        return {attr: read_attribute(fn, attr) for attr, _enum, _settable in FUNCTION_ATTRIBUTES}

    def _set_attribute(self, attr: str, value: int) -> None:
        """Set a function attribute of this kernel only: it moves to the launch state of its new attribute set
        (a function of its own, loaded for that set; kernels sharing its construction keep theirs)."""
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise KspecTypeError(f"{attr}: expected an int, got {type(value).__name__}")
        before = self._overrides
        self._overrides = MappingProxyType({**before, attr: int(value)})
        self._take_launch_state()
        try:
            fn = self._function_here()  # resolved with every value of the set written (the driver checks them)
            write_attribute(fn, attr, int(value), self._name)
        except BaseException:
            self._overrides = before
            self._take_launch_state()
            raise

    # -- pickling ----------------------------------------------------------------------------------------

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild_kernel, (self._module, self._name, dict(self._overrides)))




def _rebuild_kernel(module: RawModule, name: str, overrides: dict[str, int]) -> RawKernel:
    kernel = module.get_function(name)
    if overrides:
        kernel._overrides = MappingProxyType(dict(overrides))
        kernel._take_launch_state()  # the values are written where the kernel is first resolved
    return kernel


def _rebuild_module(code, path, options, translate_cucomplex, cooperative, name_expressions, backend="nvrtc"):  # type: ignore[no-untyped-def]
    return RawModule(
        code,
        path=path,
        options=options,
        backend=backend,
        translate_cucomplex=translate_cucomplex,
        enable_cooperative_groups=cooperative,
        name_expressions=name_expressions,
    )
