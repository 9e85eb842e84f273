"""The CPU device's compiler: CUDA C++ -> a host shared object, beside NVRTC's CUBINs.

The same source NVRTC would compile (kspec's host templates for elementwise/reduction kernels, a raw module's
code, jit output) is built by a host C++ compiler against kspec's host headers (``templates/include_host``,
force-included prelude ``kspec_host/cuda.h``), with one ``extern "C"`` entry appended per name expression,
as NVRTC instantiates name expressions on demand. Which compiler: ``KSPEC_HOST_CXX`` (a command, e.g.
``"clang++"`` or ``"python -m ziglang c++"``), else the system's ``c++`` / ``g++`` / ``clang++``, else zig's
clang from PyPI (``pip install "kspec[cpu]"``): the system compiler first because zig builds its C++ runtime
on first use (a minute), and a machine with g++ already has what -march=native needs.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..._binfmt import host_symbol
from ..._digest import sha256
from ..._errors import CompileTimeoutError, HostCompilerNotFoundError, about_kernel
from ..._resources import templates_dir
from .._arch import HOST_ARCH
from .._failure import compile_failure
from .._options import CompileOptions, compile_timeout
from .._program import CompiledProgram

HOST_CXX_ENV = "KSPEC_HOST_CXX"
_SYSTEM_COMPILERS = ("c++", "g++", "clang++")
# -O2 and the host's vector units (the cache key names the CPU); no -ffast-math: results must match the GPU's
# IEEE arithmetic within rounding. -fno-math-errno only lets sqrt & co. vectorise (kernels never read errno).
_FLAGS = ("-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-math-errno", "-pthread",
          "-DKSPEC_HOST=1", "-w")  # fmt: skip
_KEPT_OPTION = re.compile(r"-[DUI]")  # user options that mean the same to a host compiler
# Target options for the host compiler (e.g. -mno-f16c: a build without the F16C conversions, as on a CPU
# lacking them); after -march=native, so they win. NVRTC's own -m options (-m64/-m32, -maxrregcount, -minimal,
# -modify-stack-limit) are not.
_HOST_TARGET_OPTION = re.compile(r"-m(?!64$|32$|axrregcount|inimal|odify-stack-limit)\w")


@dataclass(frozen=True)
class HostCompiler:
    """A host C++ compiler: the command that runs it and what identifies its output (cache keys)."""

    command: tuple[str, ...]
    identity: str


@lru_cache(maxsize=1)
def host_compiler() -> HostCompiler:
    """The host compiler (see the module docstring); :class:`kspec.HostCompilerNotFoundError` if none."""
    looked: list[str] = []
    configured = os.environ.get(HOST_CXX_ENV, "").strip()
    if configured:
        command = tuple(shlex.split(configured))
        path = shutil.which(command[0])
        if path is None:
            raise HostCompilerNotFoundError(f"{HOST_CXX_ENV}={configured!r}: {command[0]!r} is not an executable on PATH")
        return HostCompiler((path, *command[1:]), _identity(path, command[1:]))
    for name in _SYSTEM_COMPILERS:
        path = shutil.which(name)
        looked.append(name)
        if path is not None:
            return HostCompiler((path,), _identity(path, ()))
    if importlib.util.find_spec("ziglang") is not None:  # the optional "cpu" extra
        from importlib import metadata

        return HostCompiler((sys.executable, "-m", "ziglang", "c++"), f"ziglang {metadata.version('ziglang')}")
    raise HostCompilerNotFoundError(
        "the CPU device compiles kernels with a host C++ compiler and found none: looked for "
        f"{HOST_CXX_ENV}, {', '.join(looked)} on PATH and the ziglang package; install g++ or clang++, or "
        'pip install "kspec[cpu]" (zig\'s clang from PyPI)'
    )


def _identity(path: str, args: Sequence[str]) -> str:
    """The compiler's real path, size and mtime (a reinstall changes them) without running it."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = "-"
    return f"{real} {stamp} {' '.join(args)}"


@lru_cache(maxsize=1)
def host_cpu() -> str:
    """What -march=native compiles for: the machine and, on Linux, the first CPU's model and feature flags."""
    parts = [platform.machine()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU part"):
                    parts.append(line.strip())
    except OSError:
        pass
    return sha256("\n".join(parts).encode()).hexdigest()[:16]


HOST_MARCH_ENV = "KSPEC_HOST_MARCH"


def host_march() -> str:
    """``-march`` of host builds: ``KSPEC_HOST_MARCH``, else ``native`` (this machine's vector units; the
    cache key names the CPU). ``kspec build --arch host`` sets :func:`portable_host_march` instead, so that
    prebuilt modules run on any machine of the architecture."""
    return os.environ.get(HOST_MARCH_ENV, "").strip() or "native"


def portable_host_march() -> str:
    """What every CPU of this machine's architecture runs: x86-64-v2 (SSE4.2, 2009 on), armv8-a."""
    return {"x86_64": "x86-64-v2", "AMD64": "x86-64-v2", "aarch64": "armv8-a", "arm64": "armv8-a"}.get(platform.machine(), "native")


def host_args(options: CompileOptions) -> tuple[list[str], list[str]]:
    """(the host compiler's arguments without input/output, the user options ignored on the host)."""
    root = templates_dir()
    std = options.effective_std
    number = int(std[3:]) if std[3:].isdigit() else 17
    args = [f"-std=c++{max(number, 17)}", f"-march={host_march()}", *_FLAGS]  # kspec's host headers need C++17
    args += [f"-D{define}" for define in options.defines]
    ignored = []
    extra = list(options.extra)
    index = 0
    while index < len(extra):
        item = extra[index]
        if item in ("-D", "-U", "-I") and index + 1 < len(extra):  # the value as the next option
            args += [item, extra[index + 1]]
            index += 1
        elif _KEPT_OPTION.match(item) or _HOST_TARGET_OPTION.match(item):
            args.append(item)
        elif not item.startswith(("-std", "--std", "-arch", "--gpu-architecture")):
            ignored.append(item)
        index += 1
    args += [f"-I{root / 'include_host'}", f"-I{root / 'include'}", "-include", "kspec_host/cuda.h"]
    return args, ignored


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def entries_source(expressions: Sequence[str], uses_sync: bool) -> str:
    """The ``extern "C"`` entries appended to a module: one per expression, and the list of them."""
    sync = "true" if uses_sync else "false"
    lines = ["", "// kspec: entries of the CPU device (kspec/compiler/host/_compiler.py), one per name expression"]
    for expression in expressions:
        lines.append(
            f'extern "C" __attribute__((visibility("default"))) int {host_symbol(expression)}('
            "void** params, const kspec_host_launch* launch, kspec_host_fault* fault) {\n"
            f"  return ::kspec_host::run_entry<{sync}>(&{expression}, {_c_string(expression)}, params, launch, fault);\n"
            "}\n"
            f'extern "C" __attribute__((visibility("default"))) const unsigned long long* '
            f"{host_symbol(expression, 'sizes')} = ::kspec_host::param_sizes(&{expression});"
        )
    names = "".join(e + "\n" for e in expressions)
    lines.append(f'extern "C" __attribute__((visibility("default"))) const char kspec_host_entries[] = {_c_string(names)};')
    return "\n".join(lines) + "\n"


def run_host_compiler(compiler: HostCompiler, args: Sequence[str], source: str, file_name: str, name: str) -> tuple[bytes, str]:
    """Build ``source`` (written to ``file_name`` in a fresh directory) into a shared library with ``args``: its
    bytes and the compiler's log. A CompileError with the log and the numbered source when it fails, a
    CompileTimeoutError past KSPEC_COMPILE_TIMEOUT, HostCompilerNotFoundError when the compiler cannot run."""
    import subprocess  # here, not at import: a warm-cache process only computes keys (kspec/compiler/_key.py)
    import tempfile

    timeout = compile_timeout() or None
    with tempfile.TemporaryDirectory(prefix="kspec-cxx-") as work:
        src, out = os.path.join(work, file_name), os.path.join(work, "module.so")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        command = [*compiler.command, *args, src, "-o", out]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CompileTimeoutError(
                about_kernel(name, f"the host compiler ran past {timeout:g} s ({COMPILE_TIMEOUT_NOTE})"), kernel=name
            ) from None
        except OSError as exc:
            raise HostCompilerNotFoundError(f"running the host compiler {compiler.command[0]!r} failed: {exc}") from None
        log = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or not os.path.exists(out):
            raise compile_failure(f"host compiler {' '.join(compiler.command)}", "compiler", name, HOST_ARCH,
                                  f"exit status {done.returncode}", log, list(args), source, None)  # fmt: skip
        with open(out, "rb") as f:
            return f.read(), log


def compile_host(source: str, name: str, options: CompileOptions, name_expressions: Sequence[str]) -> CompiledProgram:
    """Build ``source`` for the CPU device (see the module docstring). Refuses what the CPU device cannot run
    (:class:`kspec.HostUnsupportedError`) before compiling; a compile failure is a CompileError with the
    compiler's log and the numbered source."""
    from ._scan import scan_host_source

    scan = scan_host_source(source, name)
    expressions = list(dict.fromkeys([*name_expressions, *scan.kernels]))
    full = scan.source + entries_source(expressions, scan.uses_sync)
    compiler = host_compiler()
    args, ignored = host_args(options)
    args = precompiled_prelude(compiler, args)
    start = time.perf_counter()
    binary, log = run_host_compiler(compiler, args, full, f"{_file_name(name)}.cpp", name)
    if ignored:
        log = (log + "\n" if log else "") + f"kspec: options ignored on the CPU device: {' '.join(ignored)}"
    return CompiledProgram(binary=binary, format="so", arch=HOST_ARCH, lowered_names={e: e for e in expressions},
                           log=log, nvrtc_version=(0, 0), compile_ms=(time.perf_counter() - start) * 1e3)  # fmt: skip


def _is_gcc(compiler: HostCompiler) -> bool:
    import subprocess

    try:
        done = subprocess.run([*compiler.command, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Free Software Foundation" in done.stdout and "clang" not in done.stdout.lower()


_PRELUDE_INCLUDE = ["-include", "kspec_host/cuda.h"]


def precompiled_prelude(compiler: HostCompiler, args: list[str]) -> list[str]:
    """``args`` with the prelude served precompiled (GCC's .gch, built once per compiler, flags and headers
    in kspec's memo directory): parsing kspec's host headers is most of a small kernel's compile time.
    Anything unusual (another compiler, a failed build, an unwritable memo directory) keeps the plain -include;
    GCC itself falls back to the header when the .gch does not match the flags.

    The memo directory, not the binary cache's: the .gch is a fact of this machine's install (its compiler, CPU
    and kspec's headers, all in its digest) as the memos are, and the cache directory holds only cache entries
    and may be shared. Built there, it is built once per machine rather than once per cache directory (5 s and
    70 MB each: the tests, which give most processes a cache of their own, built dozens per run)."""
    from ..._atomic import write_atomic
    from ..._memo import memo_dir, tree_digest

    import subprocess

    if args[-2:] != _PRELUDE_INCLUDE or not _gcc(compiler):
        return args
    flags = args[:-2]
    digest = sha256("\0".join([compiler.identity, host_cpu(), *flags,
                                        tree_digest(str(templates_dir() / "include_host")),
                                        tree_digest(str(templates_dir() / "include"))]).encode()).hexdigest()[:20]  # fmt: skip
    directory = memo_dir() / "host-prelude" / digest
    header = directory / "prelude.h"
    if not (directory / "prelude.h.gch").exists():
        try:
            # renamed into place, never truncated: another process's .gch build may be reading it (a header read
            # while a second writer had emptied it gave a .gch without the prelude: "'__device__' does not name a
            # type" in every later compile that used it, seen once in CI)
            if not header.exists():
                write_atomic(header, b"#include <kspec_host/cuda.h>\n")
            partial = directory / f"prelude.h.gch.{os.getpid()}.{threading.get_ident()}.tmp"  # per writer
            done = subprocess.run([*compiler.command, *[a for a in flags if a != "-shared"], "-x", "c++-header",
                                   str(header), "-o", str(partial)], capture_output=True, timeout=600, check=False)  # fmt: skip
            if done.returncode != 0:
                partial.unlink(missing_ok=True)
                return args
            os.replace(partial, directory / "prelude.h.gch")
        except (OSError, subprocess.TimeoutExpired):
            return args
    return [*flags, "-include", str(header)]


@lru_cache(maxsize=None)
def _gcc(compiler: HostCompiler) -> bool:
    return _is_gcc(compiler)


COMPILE_TIMEOUT_NOTE = "KSPEC_COMPILE_TIMEOUT sets the limit"


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "module"


def host_key_parts(options: CompileOptions) -> list[tuple[str, str]]:
    """What identifies a host build in the cache key: compiler, CPU, arguments and the host headers."""
    args, _ignored = host_args(options)
    return [("host-compiler", host_compiler().identity), ("host-cpu", host_cpu()), ("args", "\0".join(args)),
            ("host-headers", host_headers_digest())]  # fmt: skip


@lru_cache(maxsize=1)
def host_headers_digest() -> str:
    """sha256 over kspec's host device headers, once per process (as kspec_headers_digest for NVRTC's): walking
    and stat-ing them for every key was a third of a warm cache hit on the CPU device."""
    from ..._memo import tree_digest

    return tree_digest(str(templates_dir() / "include_host"))

