"""Build and run CUDA C++ on kspec's CPU device without the host compiler path of kspec.compiler: the
contract's compile command through subprocess, the entries it appends, and a ctypes launcher. The CPU-device
tests use it until kspec.compiler builds host modules."""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
HOST_FLAGS = ("-std=c++17", "-O2", "-march=native", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-math-errno",
              "-pthread", "-DKSPEC_HOST=1")


def host_compiler() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


def entry_symbol(expression: str) -> str:
    return "kspec_entry_" + hashlib.sha256(expression.encode()).hexdigest()[:16]


def append_entries(source: str, expressions: Sequence[str], uses_sync: bool) -> str:
    """``source`` followed by one ``kspec_entry_<hash>`` per name expression and the ``kspec_host_entries``
    table (the contract's host module layout)."""
    sync = "true" if uses_sync else "false"
    parts = [source, ""]
    for expression in expressions:
        quoted = expression.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(
            f'extern "C" __attribute__((visibility("default")))\n'
            f"int {entry_symbol(expression)}(void** params, const kspec_host_launch* launch, kspec_host_fault* fault) {{\n"
            f'  return ::kspec_host::run_entry<{sync}>(&{expression}, "{quoted}", params, launch, fault);\n'
            "}\n"
        )
    table = "\\n".join(e.replace("\\", "\\\\").replace('"', '\\"') for e in expressions)
    parts.append(f'extern "C" __attribute__((visibility("default"))) const char kspec_host_entries[] = "{table}";\n')
    return "\n".join(parts)


def compile_host(source: str, directory: Path, name: str = "module", extra_flags: Sequence[str] = ()) -> Path:
    """Compiles a whole host module (entries appended) into ``directory/name.so``; raises with the compiler's
    output on failure."""
    cpp, so = directory / f"{name}.cpp", directory / f"{name}.so"
    cpp.write_text(source)
    compiler = host_compiler()
    assert compiler, "no host C++ compiler"
    command = [compiler, *HOST_FLAGS, *extra_flags, "-I", str(REPO / "templates" / "include_host"), "-I",
               str(REPO / "templates" / "include"), "-include", "kspec_host/cuda.h", str(cpp), "-o", str(so)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"host compile failed:\n{done.stderr[-6000:]}")
    return so


class Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_ulonglong),
                ("threads", ctypes.c_int)]


class Fault(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 2048)]


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


class HostModule:
    """A loaded host module: ``launch(expression, grid, block, args)`` runs one entry."""

    def __init__(self, path: Path) -> None:
        self.library = ctypes.CDLL(str(path))

    def entries(self) -> list[str]:
        table = ctypes.c_char_p.in_dll(self.library, "kspec_host_entries")
        return (ctypes.cast(ctypes.addressof(table), ctypes.c_char_p).value or b"").decode().split("\n")

    def launch(self, expression: str, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
               shared_bytes: int = 0, threads: int = 2) -> tuple[int, str]:
        entry = getattr(self.library, entry_symbol(expression))
        entry.restype = ctypes.c_int
        values = [_argument(a) for a in args]
        params = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        grid3 = (list(grid) + [1, 1])[:3]
        block3 = (list(block) + [1, 1])[:3]
        launch = Launch((ctypes.c_uint * 3)(*grid3), (ctypes.c_uint * 3)(*block3), shared_bytes, threads)
        fault = Fault()
        code = entry(params, ctypes.byref(launch), ctypes.byref(fault))
        assert code == fault.code
        return code, fault.message.decode()


def build(source: str, expressions: Sequence[str], uses_sync: bool, directory: Path, name: str = "module",
          extra_flags: Sequence[str] = ()) -> HostModule:
    return HostModule(compile_host(append_entries(source, expressions, uses_sync), directory, name, extra_flags))
