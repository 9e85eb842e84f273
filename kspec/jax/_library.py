"""The process's FFI handler: the C one (``_handler.cc``, built on first use) or the Python fallback.

The C handler is built by kspec's host compiler (kspec.compiler.compile_host_library: the binary cache keeps
it, so a process after the first only loads it) against jaxlib's FFI headers (``jax.ffi.include_dir()``) and
kspec's CPU-device entry ABI, loaded with ctypes and registered with XLA as the target ``kspec_launch`` for
the CPU and for CUDA (declared command-buffer compatible on CUDA unless ``KSPEC_JAX_COMMAND_BUFFER=0``). Where no
host compiler exists (:class:`kspec.HostCompilerNotFoundError`), or
``KSPEC_JAX_HANDLER=python``, the same handler written with ctypes callbacks (:mod:`._pyhandler`) is used,
with one :class:`kspec.PerformanceWarning`: it costs tens of microseconds of host time per call.

Descriptions are registered once per distinct plan (the same bytes get the same index); each index is good
for this process only, which the handler checks against the process number carried next to it.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import threading
import warnings
from typing import Any, Protocol

from .._errors import HostCompilerNotFoundError, KspecValueError, LaunchError, PerformanceWarning
from ._describe import BLOB_VERSION, KIND_CUDA, Description

TARGET = "kspec_launch"
HANDLER_ENV = "KSPEC_JAX_HANDLER"
COMMAND_BUFFER_ENV = "KSPEC_JAX_COMMAND_BUFFER"
COMMAND_BUFFER_COMPATIBLE = 1  # XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE
_PLATFORMS = {"cpu": "kspec_xla_host", "CUDA": "kspec_xla_cuda"}
_lock = threading.Lock()


class Handler(Protocol):
    process: int
    kind: str

    def register(self, description: Description) -> int: ...

    def capsule(self, platform: str) -> Any: ...

    def set_cuda(self, launch: int, error_string: int, error_name: int) -> None: ...

    def set_cuda_traits(self, traits: int) -> None: ...


class CHandler:
    """``_handler.cc`` loaded from its shared object."""

    kind = "c"

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        built = ctypes.c_int.in_dll(self.lib, "kspec_xla_blob_version").value
        if built != BLOB_VERSION:
            raise LaunchError(f"kspec.jax: the FFI handler at {path} reads launch descriptions of version {built}, "
                              f"kspec writes version {BLOB_VERSION}")  # fmt: skip
        self.process = secrets.randbits(62) + 1  # never 0: an attribute left at 0 is not this process
        self.lib.kspec_xla_set_process(ctypes.c_int64(self.process))
        self._register = self.lib.kspec_xla_register
        self._register.restype = ctypes.c_int64
        self._register.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint64]

    def register(self, description: Description) -> int:
        blob = description.blob()
        why = ctypes.create_string_buffer(256)
        index = int(self._register(blob, len(blob), why, len(why)))
        if index < 0:
            raise LaunchError(f"kernel '{description.name}': the FFI handler refused its launch: {why.value.decode()}")
        return index

    def capsule(self, platform: str) -> Any:
        import jax

        fn = getattr(self.lib, _PLATFORMS[platform])
        return jax.ffi.pycapsule(fn)

    def set_cuda(self, launch: int, error_string: int, error_name: int) -> None:
        self.lib.kspec_xla_set_cuda(ctypes.c_void_p(launch), ctypes.c_void_p(error_string), ctypes.c_void_p(error_name))

    def set_cuda_traits(self, traits: int) -> None:
        self.lib.kspec_xla_set_cuda_traits(ctypes.c_uint32(traits))


_handler: Handler | None = None
_indices: dict[bytes, int] = {}
_targets: set[str] = set()
_cuda_set = False


def handler() -> Handler:
    """The process's handler, made (built, loaded, registered with XLA for the CPU and CUDA) on first use."""
    global _handler
    if _handler is None:
        with _lock:
            if _handler is None:
                made = _make()
                made.set_cuda_traits(COMMAND_BUFFER_COMPATIBLE if command_buffers() else 0)
                for platform in _PLATFORMS:
                    _register_target(made, platform)
                _handler = made
    return _handler


def handler_choice() -> str:
    """``"c"`` or ``"python"``: ``KSPEC_JAX_HANDLER`` (default ``c``)."""
    value = os.environ.get(HANDLER_ENV, "").strip().lower() or "c"
    if value not in ("c", "python"):
        raise KspecValueError(f"{HANDLER_ENV}: expected 'c' or 'python', got {value!r}")
    return value


def command_buffers() -> bool:
    """``KSPEC_JAX_COMMAND_BUFFER`` (default ``1``): the CUDA handler is declared command-buffer compatible, so
    XLA may capture kspec's launches into its CUDA graphs with its own kernels (a chain of 8 calls: 4.5 us of
    host time per call, as jnp's 4.5, against 7.3 as thunks of their own; H200, jax 0.11.2); ``0``: XLA runs
    each kspec call as a thunk of its own between them."""
    value = os.environ.get(COMMAND_BUFFER_ENV, "").strip().lower() or "1"
    if value not in ("0", "1"):
        raise KspecValueError(f"{COMMAND_BUFFER_ENV}: expected '0' or '1', got {value!r}")
    return value == "1"


def _make() -> Handler:
    if handler_choice() == "c":
        try:
            return CHandler(build_handler())
        except HostCompilerNotFoundError as exc:
            warnings.warn(
                f"kspec.jax: the C FFI handler needs a host C++ compiler and none was found ({exc}); kspec kernels "
                "inside jax.jit run through a Python FFI handler instead, which costs tens of microseconds of host "
                "time per kspec call where the C one costs about one. Install g++ or clang++, or "
                'pip install "kspec[cpu]".', PerformanceWarning, stacklevel=4,
            )  # fmt: skip
    from ._pyhandler import PythonHandler

    return PythonHandler()


def handler_source() -> str:
    """The C++ source of the handler, shipped beside this module."""
    with open(os.path.join(os.path.dirname(__file__), "_handler.cc"), encoding="utf-8") as f:
        return f.read()


def handler_include_dirs() -> list[str]:
    """jaxlib's FFI headers and kspec's CPU-device headers (the entry ABI)."""
    import jax

    from .._resources import templates_dir

    return [str(jax.ffi.include_dir()), str(templates_dir() / "include_host")]


def build_handler() -> str:
    """The handler built (or taken from the binary cache) and written where ctypes can load it; its path."""
    import tempfile

    from ..compiler import compile_host_library

    program = compile_host_library(handler_source(), "kspec_jax_ffi_handler", handler_include_dirs())
    directory = tempfile.mkdtemp(prefix="kspec-jax-")
    path = os.path.join(directory, "kspec_jax_ffi.so")
    with open(path, "wb") as f:
        f.write(program.binary)
    import atexit
    import shutil

    atexit.register(shutil.rmtree, directory, True)  # the library stays mapped until exit
    return path


def _register_target(made: Handler, platform: str) -> None:
    import jax

    capsule = made.capsule(platform)
    extra = {}
    if platform == "CUDA" and command_buffers():  # the traits are in the handler's metadata; and here, for XLAs
        traits = _xla_traits()                    # that take them from the registration
        if traits is not None:
            extra["traits"] = traits
    # instantiate too: an executable holding a launch of another process fails when it is loaded, not later
    jax.ffi.register_ffi_target(TARGET, {"instantiate": capsule, "execute": capsule}, platform=platform, api_version=1,
                                **extra)  # fmt: skip
    _targets.add(platform)


def _xla_traits() -> Any:
    """jaxlib's CustomCallTargetTraits.COMMAND_BUFFER_COMPATIBLE, where this jaxlib has it."""
    import importlib

    try:
        traits = importlib.import_module("jaxlib.xla_client").CustomCallTargetTraits
    except (ImportError, AttributeError):
        return None
    return getattr(traits, "COMMAND_BUFFER_COMPATIBLE", None)


def register(description: Description) -> tuple[int, int]:
    """(index, process number) of ``description`` in the handler's table: the attributes of its calls."""
    made = handler()
    if description.kind == KIND_CUDA:
        _set_cuda(made)
    blob = description.blob()
    with _lock:
        index = _indices.get(blob)
        if index is None:
            index = _indices[blob] = made.register(description)
    return index, made.process


def _set_cuda(made: Handler) -> None:
    """Give the handler the driver's cuLaunchKernel, cuGetErrorString and cuGetErrorName, once."""
    global _cuda_set
    if _cuda_set:
        return
    from cuda.bindings import driver as cu  # the binding kspec's runtime initialised when it planned the call

    pointers = []
    for symbol in (b"cuLaunchKernel", b"cuGetErrorString", b"cuGetErrorName"):
        err, pointer, _status = cu.cuGetProcAddress(symbol, 12000, cu.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT)
        if err != cu.CUresult.CUDA_SUCCESS or not int(pointer):
            raise LaunchError(f"kspec.jax: the CUDA driver has no {symbol.decode()} (cuGetProcAddress: {err!r})")
        pointers.append(int(pointer))
    made.set_cuda(*pointers)
    _cuda_set = True
