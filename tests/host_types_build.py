"""Test helper: compile CUDA-flavoured C++ with the host compiler the way kspec's CPU device does (the
contract's command line: the kspec_host/cuda.h prelude, templates/include_host before templates/include)
into a shared object, and load it with ctypes. Until the host compiler path lands in kspec.compiler, tests
of the host headers build through here."""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INCLUDE_HOST = ROOT / "templates" / "include_host"
INCLUDE = ROOT / "templates" / "include"
RUNTIME_H = INCLUDE_HOST / "kspec_host" / "runtime.h"

FLAGS = ("-std=c++17", "-O2", "-march=native", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-math-errno", "-pthread",
         "-DKSPEC_HOST=1")

# What test sources put before a function that Python calls.
EXPORT = '#define EXPORT extern "C" __attribute__((visibility("default")))\n'


def host_cxx() -> str | None:
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


requires_host_cxx = pytest.mark.skipif(host_cxx() is None, reason="no host C++ compiler (c++, g++ or clang++) on PATH")


def runtime_stand_in() -> str:
    """Declarations of the execution model (threadIdx, __syncthreads...) for sources that name them, while
    kspec_host/runtime.h (another helper's) does not define them yet; empty once it does."""
    text = RUNTIME_H.read_text() if RUNTIME_H.exists() else ""
    if "blockIdx" in text:
        return ""
    return (
        "struct kspec_test_dim3 { unsigned x, y, z; };\n"
        "extern kspec_test_dim3 threadIdx, blockIdx, blockDim, gridDim;\n"
        "void __syncthreads();\n"
        "void __syncwarp(unsigned = 0xffffffffu);\n"
        "int __shfl_xor_sync(unsigned, int, int, int = 32);\n"
        "#define __shared__ static\n"
    )


def fault_index_stand_in() -> str:
    """A definition of kspec_host::fault_index (throws) while the runtime does not provide one yet."""
    text = RUNTIME_H.read_text() if RUNTIME_H.exists() else ""
    if "fault_index" in text:
        return ""
    return "namespace kspec_host { [[noreturn]] void fault_index(long long, long long) { throw 1; } }\n"


def command(source: Path, output: Path, extra: tuple[str, ...] = ()) -> list[str]:
    compiler = host_cxx()
    assert compiler is not None
    return [compiler, *FLAGS, *extra, "-I", str(INCLUDE_HOST), "-I", str(INCLUDE), "-include", "kspec_host/cuda.h",
            str(source), "-o", str(output)]


def compile_source(source: str, workdir: Path, extra: tuple[str, ...] = ()) -> Path:
    """Compile ``source``; raise AssertionError with the compiler's messages when it fails."""
    digest = hashlib.sha256((source + "\0".join(extra)).encode()).hexdigest()[:16]
    src = workdir / f"m{digest}.cpp"
    out = workdir / f"m{digest}.so"
    src.write_text(source)
    done = subprocess.run(command(src, out, extra), capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"host compile failed:\n{done.stderr[-6000:]}"
    return out


def load(source: str, workdir: Path, extra: tuple[str, ...] = ()) -> ctypes.CDLL:
    return ctypes.CDLL(str(compile_source(EXPORT + source, workdir, extra)))
