"""compile_source (one NVRTC run, with useful errors) and compile_cached (the same behind the cache)."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._digest import sha256_hex
from .._errors import CompileError, KspecTypeError, KspecValueError, NvrtcNotFoundError, about_kernel
from .cache import ENTRY_SUFFIX, BinaryCache, default_cache
from ._failure import compile_failure, indent
from ._includes import include_dirs, kspec_include_dir
from ._key import cache_key, check_name_expressions
from ._log import record_load
from ._policy import CompileRequest, check_compile
from ._nvrtc import NvrtcCallError, nvrtc_version, run_nvrtc, supported_archs
from ._arch import HOST_ARCH, arch_number
from ._options import CompileOptions
from ._program import CompiledProgram

if TYPE_CHECKING:
    import logging


def _logger() -> logging.Logger:
    """The "kspec.compiler" logger: imported when there is something to say (``logging`` costs ~1-2 ms of a
    first compile)."""
    import logging

    return logging.getLogger("kspec.compiler")


_FALSE = ("", "0", "false", "no", "off")


def _dump_requested() -> bool:
    return os.environ.get("KSPEC_DUMP_SOURCE", "").strip().lower() not in _FALSE


def dump_source(source: str, name: str) -> Path:
    """Write ``source`` under ``KSPEC_DUMP_DIR`` (default: ``<tmp>/kspec-dump``); return the file's path."""
    directory = Path(os.environ.get("KSPEC_DUMP_DIR") or Path(tempfile.gettempdir(), "kspec-dump"))
    directory.mkdir(parents=True, exist_ok=True)
    safe_name = re.sub(r"[^\w.-]", "_", name)[:80]
    # The digest makes one file per distinct source, so specializations of one kernel do not overwrite.
    path = directory / f"{safe_name}-{sha256_hex(source.encode())[:12]}.cu"
    path.write_text(source, encoding="utf-8")
    return path


def _check_inputs(source: object, name: object, options: object) -> None:
    if not isinstance(source, str):
        raise KspecTypeError(f"source: expected CUDA C++ source as a str, got {type(source).__name__}")
    if not isinstance(name, str) or not name:
        raise KspecValueError(f"name: expected a non-empty kernel or module name, got {name!r}")
    if not isinstance(options, CompileOptions):
        raise KspecTypeError(f"options: expected a CompileOptions, got {type(options).__name__}")


def _check_arch_supported(options: CompileOptions) -> None:
    arch = options.effective_arch
    supported = supported_archs()
    if f"sm_{arch_number(arch)}" not in supported:
        param = "arch" if arch == options.arch else "extra (its -arch option)"
        major, minor = nvrtc_version()
        raise KspecValueError(
            f"{param}: {arch!r} is not a target of NVRTC {major}.{minor}; it supports "
            f"{', '.join(supported)} (sm_XX for a CUBIN, compute_XX for PTX)"
        )


def compile_source(
    source: str,
    *,
    name: str,
    options: CompileOptions = CompileOptions(),
    name_expressions: Sequence[str] = (),
    needs: Iterable[str] = (),
    backend: str = "nvrtc",
) -> CompiledProgram:
    """Compile CUDA C++ ``source`` with NVRTC (or ``backend="nvcc"``: a CUDA toolkit's nvcc) into a CUBIN (``sm_XX``) or PTX (``compute_XX``); no cache.

    ``name`` names the kernel or module in messages and the NVRTC program (``name.cu``). Each of
    ``name_expressions`` (``"fx3<float>"``, ``"ns::k"``) is registered before the compile and resolved to
    its lowered symbol after it. Raises CompileError carrying the NVRTC log and the numbered source. With
    ``KSPEC_DUMP_SOURCE=1`` the source is also written to a file (``KSPEC_DUMP_DIR``), named in the error
    or logged on success.
    """
    _check_inputs(source, name, options)
    names = check_name_expressions(name_expressions)
    _check_backend(backend)
    if options.effective_arch == HOST_ARCH:  # the CPU device: the host C++ compiler, whatever the backend
        from .host import compile_host

        return compile_host(source, name, options, names)
    if backend == "nvcc":
        return _compile_nvcc(source, name, options, names, tuple(needs))
    args = options.to_args(include_dirs(needs))
    _check_arch_supported(options)
    arch = options.effective_arch
    version = nvrtc_version()

    start = time.perf_counter()
    notice = _slow_compile_notice(name, arch, len(source))
    try:
        output = run_nvrtc(source, f"{name}.cu", args, names, ptx=options.is_ptx)
        error, log = output.error, output.log
    except NvrtcCallError as exc:
        output, error, log = None, str(exc), ""
    finally:
        notice.cancel()
    compile_ms = (time.perf_counter() - start) * 1e3

    dump_note = _dump_note(source, name, error)
    if error:
        raise compile_failure(f"NVRTC {version[0]}.{version[1]}", "NVRTC", name, arch, error, log, args, source, dump_note)

    assert output is not None
    if log:
        _logger().debug("kernel %r compiled with messages:\n%s", name, log)
    return CompiledProgram(
        binary=output.binary,
        format="ptx" if options.is_ptx else "cubin",
        arch=arch,
        lowered_names=output.lowered_names,
        log=log,
        nvrtc_version=version,
        compile_ms=compile_ms,
    )


SLOW_COMPILE_S = 30.0  # a compile still running after this long says so on stderr, once


def _slow_compile_notice(name: str, arch: str, source_bytes: int) -> threading.Timer:
    """A timer that prints one line if this compile runs past :data:`SLOW_COMPILE_S` (a 50,000-term operation
    compiles for minutes: a user should see that it is working, and on what); cancelled when the compile ends."""

    def say() -> None:
        print(f"kspec: still compiling kernel {name!r} for {arch} after {SLOW_COMPILE_S:.0f} s "
              f"({source_bytes / 1e3:.0f} KB of source); NVRTC is working, large kernels can take minutes",
              file=sys.stderr, flush=True)

    timer = threading.Timer(SLOW_COMPILE_S, say)
    timer.daemon = True
    timer.start()
    return timer


def _dump_note(source: str, name: str, error: str) -> str:
    """With KSPEC_DUMP_SOURCE set: write the source and say where (or why not)."""
    dump_note = ""
    if _dump_requested():
        try:
            dump_path = dump_source(source, name)
            dump_note = f"source written to {dump_path}"
            if not error:
                _logger().info("kernel %r: %s", name, dump_note)
        except OSError as exc:
            dump_note = f"could not write the source dump ({exc})"
            _logger().warning("kernel %r: %s", name, dump_note)
    return dump_note


_BACKENDS = ("nvrtc", "nvcc")


def _check_backend(backend: object) -> None:
    if backend not in _BACKENDS:
        raise KspecValueError(f"backend: expected 'nvrtc' or 'nvcc', got {backend!r}")


def _compile_nvcc(
    source: str, name: str, options: CompileOptions, names: tuple[str, ...], needs: tuple[str, ...]
) -> CompiledProgram:
    """One nvcc run (kspec/compiler/_nvcc.py says how name expressions are lowered)."""
    from ._nvcc import find_nvcc, instantiating_source, nvcc_version, run_nvcc

    nvcc = find_nvcc()
    arch = options.effective_arch
    args = options.to_args([kspec_include_dir()])  # nvcc has its toolkit's headers; kspec adds only its own
    start = time.perf_counter()
    error, log, binary = run_nvcc(nvcc, instantiating_source(source, names), f"{name}.cu", args, ptx=options.is_ptx)
    compile_ms = (time.perf_counter() - start) * 1e3
    dump_note = _dump_note(source, name, error)
    if error:
        raise compile_failure(f"nvcc {nvcc_version(nvcc)} ({nvcc})", "nvcc", name, arch, error, log, args, source, dump_note)
    lowered: dict[str, str] = {}
    if names:  # NVRTC's own lowering of the same source, parsed only
        output = run_nvrtc(source, f"{name}.cu", [*options.to_args(include_dirs(needs)), "-fdevice-syntax-only"], names, ptx=False)
        if output.error:
            raise CompileError(
                about_kernel(
                    name,
                    f"nvcc compiled it, but NVRTC could not parse it to lower its name expressions "
                    f"({output.error}):\n{indent(output.log)}",
                ),
                kernel=name, log=output.log, source=source,
            )
        lowered = dict(output.lowered_names)
    return CompiledProgram(binary=binary, format="ptx" if options.is_ptx else "cubin", arch=arch,
                           lowered_names=lowered, log=log, nvrtc_version=(0, 0), compile_ms=compile_ms)


def compile_cached(
    source: str | Callable[[], str],
    *,
    name: str,
    options: CompileOptions = CompileOptions(),
    name_expressions: Sequence[str] = (),
    needs: Iterable[str] = (),
    cache: BinaryCache | None = None,
    backend: str = "nvrtc",
    source_key: str | None = None,
    request: CompileRequest | None = None,
) -> tuple[CompiledProgram, bool]:
    """``compile_source`` behind ``cache`` (default: ``default_cache()``); returns ``(program, cache_hit)``.
    (:func:`compile_keyed` also returns the entry's key.)

    A hit costs a key computation and a dict lookup in-process, or one file read from disk. With
    ``KSPEC_DUMP_SOURCE`` set, a hit writes the source too (as a compile does). ``source`` may be a function
    making it, given with ``source_key`` (see :func:`cache_key`): then it is made only on a miss.

    ``request``: given by a kernel compiling on its own (at a call), saying which kernel and specialization
    this is. Such a load goes to the compile log, and on a miss the compile policy is applied before the
    source is made (kspec/compiler/_policy.py: ``never`` raises CompileForbiddenError). Without it the
    compile is explicit (``kspec build``, a direct call): always allowed, not logged.
    """
    program, hit, _key = compile_keyed(source, name=name, options=options, name_expressions=name_expressions,
                                       needs=needs, cache=cache, backend=backend, source_key=source_key,
                                       request=request)  # fmt: skip
    return program, hit


def compile_keyed(
    source: str | Callable[[], str],
    *,
    name: str,
    options: CompileOptions = CompileOptions(),
    name_expressions: Sequence[str] = (),
    needs: Iterable[str] = (),
    cache: BinaryCache | None = None,
    backend: str = "nvrtc",
    source_key: str | None = None,
    request: CompileRequest | None = None,
) -> tuple[CompiledProgram, bool, str]:
    """:func:`compile_cached`'s ``(program, cache_hit)`` and the cache key it was found or stored under."""
    start = time.perf_counter()
    if callable(source):
        if not isinstance(source_key, str) or not source_key:
            raise KspecTypeError("source_key: a source given as a function needs the str that determines it")
        _check_inputs("", name, options)
    else:
        if source_key is not None:
            raise KspecTypeError("source_key: only for a source given as a function")
        _check_inputs(source, name, options)
    if cache is None:
        cache = default_cache()
    needs = tuple(needs) if not isinstance(needs, str) else (needs,)
    _check_backend(backend)
    try:
        key = cache_key(None if callable(source) else source, options=options, name_expressions=name_expressions,
                        needs=needs, backend=backend, source_key=source_key)
    except NvrtcNotFoundError:
        # no NVRTC: the cache cannot be read either (its keys name the compiler), so this is a run-time compile,
        # and under `never` the policy's error (naming the kernel and what would build it) is the one to give
        if request is not None:
            check_compile(request, options.effective_arch, "", "no binary for it, and no NVRTC to key the binary cache")
        raise
    program = cache.get(key)
    text = source if isinstance(source, str) else None
    if program is not None:
        if _dump_requested():  # the source is wanted whether or not this process compiles it
            try:
                text = text if text is not None else _made(source)
                _logger().info("kernel %r (cache hit): source written to %s", name, dump_source(text, name))
            except OSError as exc:
                _logger().warning("kernel %r: could not write the source dump (%s)", name, exc)
        if request is not None:
            record_load(request.kernel, request.what, options.effective_arch, "cache", _ms_since(start))
        return program, True, key
    reason = ""
    if request is not None:
        reason = _miss_reason(request, cache, key)
        check_compile(request, options.effective_arch, key, reason)  # before the source is even made
    text = text if text is not None else _made(source)
    program = compile_source(
        text, name=name, options=options, name_expressions=name_expressions, needs=needs, backend=backend
    )
    cache.put(key, program, kernel=name)
    if request is not None:
        record_load(request.kernel, request.what, options.effective_arch, "compiled", _ms_since(start), reason)
    return program, False, key


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def _miss_reason(request: CompileRequest, cache: BinaryCache, key: str) -> str:
    """Why a kernel's load compiles: the compile log's reason. An entry file there that the cache did not
    serve was unreadable or damaged (the cache takes those as misses)."""
    if request.has_binaries:
        return "no binary for this arch"
    directory = cache.directory
    if directory is not None and (directory / f"{key}{ENTRY_SUFFIX}").exists():
        return "stale cache entry"
    return "new specialization"


def _made(source: str | Callable[[], str]) -> str:
    text = source() if callable(source) else source
    if not isinstance(text, str):
        raise KspecTypeError(f"source: the function made a {type(text).__name__}, expected CUDA C++ source as a str")
    return text
