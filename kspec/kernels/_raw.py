"""RawModule and RawKernel: CuPy's raw CUDA kernels, compiled by NVRTC and launched by kspec's runtime.

Code written for ``cupy.RawKernel`` / ``cupy.RawModule`` runs unchanged, with CuPy arrays, PyTorch tensors or
kspec arrays as arguments. Where kspec differs:

* Nothing is compiled or loaded when an object is created, nor by ``get_function``: the first call, the
  first ``attributes`` read, ``get_global`` or ``compile()`` do it (for the current device's architecture).
  A name that is not in the module is reported then, with the names the module does have.
* The default C++ standard is C++17 (CuPy: C++11), which the CCCL headers behind ``<cupy/complex.cuh>``
  need; a ``-std=`` in ``options`` wins.
* ``backend='nvcc'`` compiles with a CUDA toolkit's nvcc where one is found (``CUDA_PATH``, ``CUDA_HOME``,
  ``PATH``, cuda.pathfinder): same options, name expressions (unlike CuPy), cache and ``compile(log_stream=)``.
  ``jitify=True`` is not supported (a clear error says what to do instead).
* A non-``extern "C"`` kernel can be named plainly (``RawKernel(code, 'my_kernel')``): the name is
  registered as an NVRTC name expression and lowered, so C++ linkage needs no mangled name.
* Argument count and sizes are checked against the kernel's parameters where the driver can say
  (CUDA >= 12.4), see :mod:`kspec.runtime._launch`.
* Pickling keeps the source and options (or the path), and the settable attributes; the kernel compiles
  again (from the disk cache) in the process that unpickles it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from .._args import flag, options_tuple as _options_tuple
from .._binfmt import HEAD_BYTES, content_problem, loadable_image
from .._errors import (
    KspecNotImplementedError,
    KspecTypeError,
    KspecValueError,
    LaunchError,
    NvrtcNotFoundError,
)
from ..runtime import (
    Device,
    DeviceArray,
    LaunchPlan,
    LoadedModule,
    cuda_driver,
    describe_driver_error,
    device_array_from_pointer,
    get_device,
    register_kspec_type,
)

_ATTRIBUTES: dict[str, str] = {
    "max_threads_per_block": "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "shared_size_bytes": "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES",
    "const_size_bytes": "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES",
    "local_size_bytes": "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES",
    "num_regs": "CU_FUNC_ATTRIBUTE_NUM_REGS",
    "ptx_version": "CU_FUNC_ATTRIBUTE_PTX_VERSION",
    "binary_version": "CU_FUNC_ATTRIBUTE_BINARY_VERSION",
    "cache_mode_ca": "CU_FUNC_ATTRIBUTE_CACHE_MODE_CA",
    "max_dynamic_shared_size_bytes": "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
    "preferred_shared_memory_carveout": "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT",
}

_BINARY_SUFFIXES = (".cubin", ".ptx", ".fatbin")

# A kernel name NVRTC can take as a name expression (plain, qualified or a template-id), not a mangled one.
_EXPRESSION_RE = re.compile(r"(?!_Z)[A-Za-z_][\w:]*(<.*>)?", re.DOTALL)


def _check_backend(backend: object) -> None:
    if backend not in ("nvrtc", "nvcc"):
        raise KspecValueError(f"backend: expected 'nvrtc' (the default) or 'nvcc', got {backend!r}")
    if backend == "nvcc":
        from ..compiler import find_nvcc

        find_nvcc()  # NvccNotFoundError now, naming where it looked, rather than at the first call


def _check_jitify(jitify: object) -> None:
    if flag(jitify, "jitify"):
        raise KspecNotImplementedError(
            "jitify=True is not supported. Jitify's role in CuPy is to stand in for C++ standard headers "
            "NVRTC lacks; kspec's include path has CCCL instead: include <cuda/std/type_traits>, "
            "<cuda/std/limits>, <cuda/std/complex>... in place of <type_traits>, <limits>, <complex>"
        )


def _binary_path(path: object) -> str:
    """``path=`` of a RawModule: an existing .cubin/.ptx/.fatbin file whose first bytes say it is one."""
    if not isinstance(path, (str, os.PathLike)):
        raise KspecTypeError(f"path: expected a file path (str or os.PathLike), got {type(path).__name__}")
    resolved = Path(os.fspath(path)).expanduser()
    if resolved.suffix not in _BINARY_SUFFIXES:
        raise KspecValueError(f"path: expected a .cubin, .ptx or .fatbin file, got {str(path)!r}")
    if not resolved.is_file():
        raise FileNotFoundError(f"path: no such file: {str(path)!r}")
    with resolved.open("rb") as handle:
        problem = content_problem(resolved.suffix, handle.read(HEAD_BYTES))
    if problem:  # the driver would refuse it at the first launch, far from here, with a bare status code
        raise KspecValueError(f"path: {str(path)!r} {problem}")
    return str(resolved.resolve())


class DeviceGlobal:
    """A ``__device__`` or ``__constant__`` variable of a loaded module: its address and size on one device.

    ``as_array(dtype, shape=None)`` views it as a DeviceArray (``.set()`` / ``.get()`` to write and read it;
    ``cupy.asarray(g.as_array(np.float32))`` for a CuPy view). It can also be passed to a kernel as a pointer.
    """

    __slots__ = ("_ptr", "_device_id", "nbytes", "name", "_module")

    def __init__(self, ptr: int, nbytes: int, device_id: int, name: str, module: LoadedModule) -> None:
        self._ptr = ptr
        self._device_id = device_id
        self.nbytes = nbytes
        self.name = name
        self._module = module  # keeps the module (so the memory) loaded

    @property
    def ptr(self) -> int:
        return self._ptr

    @property
    def size(self) -> int:
        """Size in bytes (CuPy's MemoryPointer calls it size too)."""
        return self.nbytes

    @property
    def device(self) -> Device:
        return Device(self._device_id)

    def __int__(self) -> int:
        return self._ptr

    def as_array(self, dtype: Any, shape: Any = None) -> DeviceArray:
        """A DeviceArray over the variable's memory (the whole variable when ``shape`` is None)."""
        return device_array_from_pointer(self._ptr, self.nbytes, np.dtype(dtype), shape, self._device_id, self)

    def __repr__(self) -> str:
        return f"<kspec.DeviceGlobal {self.name!r} 0x{self._ptr:x} ({self.nbytes} B) on device {self._device_id}>"


register_kspec_type(DeviceGlobal)


class RawModule:
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
        if (code is None) == (path is None):
            raise KspecTypeError(
                "Exactly one of `code` and `path` keyword arguments must be given. "
                "RawModule: pass exactly one of code= (CUDA source) and path= (a .cubin, .ptx or .fatbin file)"
                + ("; both were given" if code is not None else "; neither was given")
            )
        _check_backend(backend)
        _check_jitify(jitify)
        if code is not None and not isinstance(code, str):
            raise KspecTypeError(f"code: expected CUDA source as a str, got {type(code).__name__}")
        self._code = code
        self._path: str | None = None
        if path is not None:
            self._path = _binary_path(path)
        self._options = _options_tuple(options)
        self._backend = str(backend)
        self._translate_cucomplex = flag(translate_cucomplex, "translate_cucomplex")
        self._cooperative = flag(enable_cooperative_groups, "enable_cooperative_groups")
        if name_expressions is None:
            self._name_expressions: tuple[str, ...] = ()
        elif isinstance(name_expressions, str):
            self._name_expressions = (name_expressions,)
        else:
            self._name_expressions = tuple(name_expressions)
        for expression in self._name_expressions:
            if not isinstance(expression, str) or not expression.strip():
                raise KspecTypeError(f"name_expressions: every item must be a non-empty str, got {expression!r}")
        if self._name_expressions and self._path is not None:
            raise KspecValueError(
                "need CUDA C++ code for the requested kernels: "
                "name_expressions: only meaningful with code= (a binary loaded from path= is already compiled; "
                "get_function takes its symbol names)"
            )
        self._label = "raw_module"
        self._binaries: Any = None  # a BinaryStore serving this module's source (kspec.load of a raw spec)
        self._binary_key = ""
        self._programs: dict[str, Any] = {}
        self._loaded: dict[int, LoadedModule] = {}
        self._kernels: dict[str, RawKernel] = {}
        self._lock = threading.RLock()

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

    # -- compiling and loading ---------------------------------------------------------------------------

    def _source(self) -> str:
        assert self._code is not None
        from ..render import raw_source  # the same path as a raw spec from a spec file

        return raw_source(self._code, translate_cucomplex=self._translate_cucomplex)

    def _program(self, arch: str) -> Any:
        """The CompiledProgram for ``arch`` (NVRTC, behind kspec's binary cache)."""
        program = self._programs.get(arch)
        if program is None:
            from ..compiler import CompileOptions, compile_cached
            from ..render import needs_of_raw_source

            source = self._source()
            options = CompileOptions(arch=arch, extra=self._options)
            program, _hit = compile_cached(
                source,
                name=self._label,
                options=options,
                name_expressions=self._name_expressions,
                needs=tuple(sorted(needs_of_raw_source(source, self._translate_cucomplex))),
                backend=self._backend,
            )
            self._programs[arch] = program
        return program

    def compile(self, log_stream: IO[str] | None = None, *, arch: str | None = None) -> None:
        """Compile now (normally the first use does it) and write NVRTC's log to ``log_stream``.

        Without ``arch`` it compiles for the current device and loads the module there; with ``arch``
        (``'sm_90'``...) it only compiles, which needs no GPU. A module from ``path=`` has nothing to
        compile; without ``arch`` it is loaded.
        """
        if self._code is not None:
            target = arch if arch is not None else get_device().arch
            program = self._program(target)
            if log_stream is not None and program.log:
                log_stream.write(program.log)
                if not program.log.endswith("\n"):
                    log_stream.write("\n")
        if arch is None:
            self._module(get_device().id)

    def _use_binaries(self, store: Any, key: str) -> None:
        """Load from ``store`` (a BinaryStore) the binary built for this source under ``key`` when it has one
        for the device; compile otherwise. NVRTC is not imported when a binary serves."""
        self._binaries, self._binary_key = store, key

    def _stored(self, arch: str) -> Any:
        return self._binaries.find(self._binary_key, arch) if self._binaries is not None else None

    def _image(self, device: Device) -> bytes:
        if self._path is not None:
            return loadable_image(Path(self._path).read_bytes(), Path(self._path).suffix)
        stored = self._stored(device.arch)
        if stored is not None:
            return stored.read()
        try:
            return self._program(device.arch).binary
        except NvrtcNotFoundError as exc:
            if self._binaries is None:
                raise
            raise self._binaries.missing(f"module {self._label!r}", self._binary_key, device.arch, exc) from None

    def _module(self, device_id: int) -> LoadedModule:
        module = self._loaded.get(device_id)
        if module is None:
            with self._lock:
                module = self._loaded.get(device_id)
                if module is None:
                    device = Device(device_id)
                    what = self._path if self._path else f"module {self._label!r}"
                    module = LoadedModule(self._image(device), device, what=what)
                    self._loaded[device_id] = module
        return module

    def _symbol(self, name: str, arch: str) -> str:
        if self._code is not None and name in self._name_expressions:
            stored = self._stored(arch)
            lowered = stored.lowered_names if stored is not None else self._program(arch).lowered_names
            return str(lowered[name])
        return name

    def _function(self, device_id: int, name: str) -> Any:
        """The CUfunction for ``name`` on a device; a KspecValueError listing the module's names if absent."""
        module = self._module(device_id)
        symbol = self._symbol(name, Device(device_id).arch)
        fn = module.function(symbol)
        if fn is None:
            raise KspecValueError(self._not_found(name, module, "kernel"))
        return fn

    def _not_found(self, name: str, module: LoadedModule, what: str) -> str:
        names = module.function_names()
        parts = [f"{what} {name!r} is not in {module.what}"]
        if names:
            parts.append("its kernels: " + ", ".join(names))
        if self._name_expressions:
            parts.append("its name expressions: " + ", ".join(self._name_expressions))
        if "<" in name and name not in self._name_expressions:
            parts.append("a template kernel must be listed in name_expressions= to be instantiated")
        elif self._code is not None and not self._name_expressions and names and name not in names:
            parts.append('C++ kernels need extern "C" or name_expressions= to be found by their plain name')
        return "; ".join(parts)

    # -- CuPy's lookups ----------------------------------------------------------------------------------

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name`` (a plain name, or one of ``name_expressions``) as a RawKernel.

        Lazy: nothing is compiled or looked up until the kernel is first used.
        """
        if not isinstance(name, str) or not name:
            raise KspecTypeError(f"name: expected a kernel name (str), got {name!r}")
        kernel = self._kernels.get(name)
        if kernel is None:
            kernel = self._kernels[name] = RawKernel._from_module(self, name)
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


class RawKernel:
    """A kernel from raw CUDA source: ``RawKernel(code, name)(grid, block, args, shared_mem=0, stream=None)``.

    ``grid`` and ``block`` are ints or 1-3 tuples. ``args`` is a tuple: device arrays (CuPy, PyTorch, kspec,
    anything with ``__cuda_array_interface__`` / ``__dlpack__``) become pointers; Python int -> int64,
    float -> double, complex -> complex128, bool -> bool; NumPy scalars keep their dtype; None -> NULL.
    Without ``stream=``, the launch goes to the current stream of the arrays' library (CuPy's, PyTorch's),
    else to the legacy default stream.
    """

    _module: RawModule
    _name: str
    _plan: LaunchPlan
    _overrides: dict[str, int]

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
        expressions = (name,) if _EXPRESSION_RE.fullmatch(name) else None
        module = RawModule(
            code=code,
            options=options,
            backend=backend,
            translate_cucomplex=translate_cucomplex,
            enable_cooperative_groups=enable_cooperative_groups,
            name_expressions=expressions,
            jitify=jitify,
        )
        module._label = name if expressions else "raw_kernel"
        self._setup(module, name)

    @classmethod
    def _from_module(cls, module: RawModule, name: str) -> RawKernel:
        kernel = object.__new__(cls)
        kernel._setup(module, name)
        return kernel

    def _setup(self, module: RawModule, name: str) -> None:
        # Each kernel gets a private subclass so its launch plan can install the packer of the current
        # signature as the class's __call__: `k(grid, block, args)` then runs one generated function
        # instead of __call__ plus a packer (see LaunchPlan; measured in benchmarks/launch_overhead.py).
        self.__class__ = type("RawKernel", (RawKernel,), {"__module__": RawKernel.__module__})
        self._module = module
        self._name = name
        self._overrides = {}
        self._plan = LaunchPlan(name, self._resolve, cooperative=module._cooperative, install=self._install)

    def _install(self, method: Any) -> None:
        cls = type(self)
        if method is None:
            if "__call__" in cls.__dict__:
                del cls.__call__
        else:
            setattr(cls, "__call__", method)  # noqa: B010  (mypy refuses assigning a method directly)

    def _resolve(self, device_id: int) -> Any:
        fn = self._module._function(device_id, self._name)
        for attr, value in self._overrides.items():
            _set_attribute(fn, attr, value, self._name)
        return fn

    # -- the call ----------------------------------------------------------------------------------------

    def __call__(self, grid: Any, block: Any, args: Any, *, shared_mem: int = 0, stream: Any = None) -> None:
        # Only until the first launch: then the plan installs a generated __call__ on this kernel's class.
        self._plan.launch(grid, block, args, shared_mem, stream)

    # -- CuPy's read-only attributes ---------------------------------------------------------------------

    @property
    def code(self) -> str | None:
        return self._module.code

    @property
    def name(self) -> str:
        return self._name

    @property
    def options(self) -> tuple[str, ...]:
        return self._module.options

    @property
    def backend(self) -> str:
        return self._module.backend

    @property
    def translate_cucomplex(self) -> bool:
        return self._module.translate_cucomplex

    @property
    def enable_cooperative_groups(self) -> bool:
        return self._module.enable_cooperative_groups

    @property
    def file_path(self) -> str | None:
        return self._module.path

    @property
    def module(self) -> RawModule:
        return self._module

    def __repr__(self) -> str:
        return f"<kspec.RawKernel {self._name!r}>"

    def compile(self, log_stream: IO[str] | None = None, *, arch: str | None = None) -> None:
        """Compile now and write NVRTC's log to ``log_stream``; see :meth:`RawModule.compile`.

        Without ``arch`` it also loads the kernel on the current device (so a wrong name is reported here).
        """
        self._module.compile(log_stream, arch=arch)
        if arch is None:
            self._plan.function(get_device().id)

    # -- attributes --------------------------------------------------------------------------------------

    def _function_here(self) -> Any:
        return self._plan.function(get_device().id)

    def _get(self, attr: str) -> int:
        fn = self._function_here()
        cu = cuda_driver()
        enum = getattr(cu.CUfunction_attribute, _ATTRIBUTES[attr], None)
        if enum is None:
            return -1
        err, value = cu.cuFuncGetAttribute(enum, fn)
        return -1 if err else int(value)

    @property
    def attributes(self) -> dict[str, int]:
        """All of CuPy's function attributes on the current device (-1 for one the driver lacks)."""
        return {attr: self._get(attr) for attr in _ATTRIBUTES}

    def _set(self, attr: str, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise KspecTypeError(f"{attr}: expected an int, got {type(value).__name__}")
        value = int(value)
        fn = self._function_here()
        _set_attribute(fn, attr, value, self._name)
        self._overrides[attr] = value
        # Other devices where the kernel is already loaded get it too; later ones get it in _resolve.
        for other in self._plan.loaded_functions():
            if other is not fn:
                _set_attribute(other, attr, value, self._name)
        self._plan.forget_occupancy()  # occupancy depends on the shared-memory configuration

    @property
    def max_threads_per_block(self) -> int:
        return self._get("max_threads_per_block")

    @property
    def shared_size_bytes(self) -> int:
        return self._get("shared_size_bytes")

    @property
    def const_size_bytes(self) -> int:
        return self._get("const_size_bytes")

    @property
    def local_size_bytes(self) -> int:
        return self._get("local_size_bytes")

    @property
    def num_regs(self) -> int:
        return self._get("num_regs")

    @property
    def ptx_version(self) -> int:
        return self._get("ptx_version")

    @property
    def binary_version(self) -> int:
        return self._get("binary_version")

    @property
    def cache_mode_ca(self) -> int:
        return self._get("cache_mode_ca")

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._get("max_dynamic_shared_size_bytes")

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        self._set("max_dynamic_shared_size_bytes", value)

    @property
    def preferred_shared_memory_carveout(self) -> int:
        return self._get("preferred_shared_memory_carveout")

    @preferred_shared_memory_carveout.setter
    def preferred_shared_memory_carveout(self, value: int) -> None:
        self._set("preferred_shared_memory_carveout", value)

    # -- pickling ----------------------------------------------------------------------------------------

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_rebuild_kernel, (self._module, self._name, dict(self._overrides)))


def _rebuild_kernel(module: RawModule, name: str, overrides: dict[str, int]) -> RawKernel:
    kernel = module.get_function(name)
    kernel._overrides.update(overrides)
    return kernel


def _set_attribute(fn: Any, attr: str, value: int, kernel: str) -> None:
    cu = cuda_driver()
    enum = getattr(cu.CUfunction_attribute, _ATTRIBUTES[attr])
    (err,) = cu.cuFuncSetAttribute(fn, enum, value)
    if err:
        raise LaunchError(f"kernel '{kernel}': setting {attr} = {value} failed: {describe_driver_error(err)}")
