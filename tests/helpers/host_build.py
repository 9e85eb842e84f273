"""Build and run CUDA C++ on kspec's CPU device in tests, through the product's own path: the source goes to
``kspec.compiler.compile_source`` with ``CompileOptions(arch="host")`` (the source scan, the appended entries,
the precompiled prelude and the flags are kspec's), and the shared object is loaded and launched by kspec's
host driver (kspec/runtime/host/_driver.py). The one thing added here: :meth:`HostModule.launch` calls an
entry directly with the driver's launch/fault structures, for tests that check the raw fault code (1 index,
2 trap/assert, 3 unsupported at run time, 4 C++ exception) rather than the exception a user sees."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from kspec import HostCompilerNotFoundError
from kspec.compiler import CompileOptions, compile_source
from kspec.compiler.host import host_compiler
from kspec.runtime.host import HostDriver, HostFunction

# What test sources put before a plain function that Python calls through ctypes (not a kernel).
EXPORT = '#define EXPORT extern "C" __attribute__((visibility("default")))\n'


def has_host_compiler() -> bool:
    try:
        host_compiler()
    except HostCompilerNotFoundError:
        return False
    return True


requires_host_cxx = pytest.mark.skipif(not has_host_compiler(), reason="no host C++ compiler (c++, g++ or clang++) on PATH")

_DRIVER = HostDriver()


def jit_arguments(*args: Any) -> list[Any]:
    """A kspec.jit kernel's C++ arguments: an array becomes its data, then its shape, then its strides in bytes."""
    out: list[Any] = []
    for a in args:
        out.append(a)
        if isinstance(a, np.ndarray):
            out += [np.int64(n) for n in a.shape] + [np.int64(s) for s in a.strides]
    return out


def _argument(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ctypes.c_void_p(value.ctypes.data)
    if isinstance(value, np.generic):
        return (ctypes.c_char * value.nbytes).from_buffer_copy(value.tobytes())
    return value  # a ctypes value or structure


def _dim3(values: Sequence[int]) -> list[int]:
    return (list(values) + [1, 1])[:3]


class HostModule:
    """A host module loaded by kspec's host driver."""

    def __init__(self, binary: bytes) -> None:
        status, module = _DRIVER.cuModuleLoadData(binary)
        assert status == 0 and module is not None, f"cuModuleLoadData: {status}"
        self.module = module
        self.lib = module.lib  # for EXPORT functions called through ctypes

    def entries(self) -> list[str]:
        return self.module.entries()

    def function(self, expression: str) -> HostFunction:
        status, fn = _DRIVER.cuModuleGetFunction(self.module, expression.encode())
        assert status == 0 and fn is not None, f"cuModuleGetFunction({expression!r}): {status}"
        return fn

    def launch(self, expression: str, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
               shared_bytes: int = 0, threads: int = 2) -> tuple[int, str]:
        """Runs one entry with ``args`` (arrays, NumPy scalars, ctypes values); returns (fault code, message)."""
        values = [_argument(a) for a in args]
        params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        (gx, gy, gz), (bx, by, bz) = _dim3(grid), _dim3(block)
        return self.function(expression).launch((gx, gy, gz), (bx, by, bz), shared_bytes, threads, ctypes.addressof(params))[:2]  # (code, message)

    def run(self, expression: str, grid: int, block: int, params: int, threads: int = 2) -> None:
        """Launches through the driver's cuLaunchKernel with a filled parameter frame at ``params``: a fault
        raises what users see (kspec.KernelIndexError, KernelFaultError, HostUnsupportedError)."""
        fn = self.function(expression)
        previous, _DRIVER.threads = _DRIVER.threads, threads
        try:
            (status,) = _DRIVER.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, 0, params, 0)
        finally:
            _DRIVER.threads = previous
        assert status == 0, f"cuLaunchKernel({expression!r}): {status}"


def build(source: str, name: str = "module", expressions: Sequence[str] = (), extra: Sequence[str] = ()) -> HostModule:
    """Compiles ``source`` for the CPU device (kspec.compiler, arch "host"; the scan adds the plain kernels to
    ``expressions``) and loads it. A compile failure raises kspec.CompileError with the compiler's log."""
    program = compile_source(source, name=name, options=CompileOptions(arch="host", extra=tuple(extra)),
                             name_expressions=tuple(expressions))  # fmt: skip
    return HostModule(program.binary)


def load(source: str, extra: Sequence[str] = ()) -> ctypes.CDLL:
    """``source`` (EXPORT functions) built for the CPU device; the loaded library, to call them with ctypes."""
    return build(EXPORT + source, "exported", extra=extra).lib
