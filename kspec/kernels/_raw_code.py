"""What a raw module's code becomes: its constructor arguments checked, then programs and loaded modules.

:class:`RawCode` holds a RawModule's code (CUDA source, or a .cubin/.ptx/.fatbin file) and options, and
turns them into what a launch needs: the compiled program per architecture (NVRTC or nvcc, behind the
binary cache, or a binary a BinaryStore serves), the module loaded per device, and each kernel's function by
its name or name expression. :class:`kspec.kernels._raw.RawModule` adds CuPy's API on top.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from .._args import flag, options_tuple as _options_tuple
from .._binfmt import HEAD_BYTES, content_problem, loadable_image
from .._errors import KspecFileNotFoundError, KspecNotImplementedError, KspecTypeError, KspecValueError, NvrtcNotFoundError
from ..compiler import record_load  # the compile log (a leaf module)
from ..runtime import Device, LoadedModule

_BINARY_SUFFIXES = (".cubin", ".ptx", ".fatbin")


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
    if resolved.is_dir():
        raise KspecValueError(f"path: {str(path)!r} is a directory; expected a .cubin, .ptx or .fatbin file")
    if resolved.suffix not in _BINARY_SUFFIXES:
        raise KspecValueError(f"path: expected a .cubin, .ptx or .fatbin file, got {str(path)!r}")
    if not resolved.exists():
        raise KspecFileNotFoundError(f"path: no such file: {str(path)!r}")
    if not resolved.is_file():  # a FIFO (opening it would block), a device
        raise KspecValueError(f"path: {str(path)!r} is not a regular file; expected a .cubin, .ptx or .fatbin file")
    try:
        with resolved.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError as exc:  # a file this user may not read
        raise KspecValueError(f"path: {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    problem = content_problem(resolved.suffix, head)
    if problem:  # the driver would refuse it at the first launch, far from here, with a bare status code
        raise KspecValueError(f"path: {str(path)!r} {problem}")
    return str(resolved.resolve())


def _name_expressions(value: object) -> tuple[str, ...]:
    """``name_expressions=``: None, one str (CuPy would take its characters; kspec takes it whole), or a
    sequence (list, tuple) of non-empty str. A mapping, a set (no order) or a number is a type error here, not
    a failure far away at the compile."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (Mapping, AbstractSet, bytes, bytearray)) or not isinstance(value, Iterable):
        raise KspecTypeError(
            f"name_expressions: expected a sequence of str (e.g. ['f<int>', 'g']), got {type(value).__name__}"
        )
    expressions = tuple(value)
    for expression in expressions:
        if not isinstance(expression, str) or not expression.strip():
            raise KspecTypeError(f"name_expressions: every item must be a non-empty str, got {expression!r}")
    return expressions


class RawCode:
    """A raw module's code and options, checked, and what they compile and load into (see the module doc).

    ``code`` XOR ``path``; the arguments are RawModule's, checked here with the messages it gives.
    """

    def __init__(
        self,
        code: str | None,
        path: str | os.PathLike[str] | None,
        options: Sequence[str],
        backend: str,
        translate_cucomplex: bool,
        enable_cooperative_groups: bool,
        name_expressions: Sequence[str] | None,
        jitify: bool,
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
        self._name_expressions = _name_expressions(name_expressions)
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
        self._lock = threading.RLock()

    # -- compiling and loading ---------------------------------------------------------------------------

    def _program(self, arch: str) -> Any:
        """The CompiledProgram for ``arch`` (NVRTC, behind kspec's binary cache)."""
        program = self._programs.get(arch)
        if program is None:
            # the one definition of the program, shared with `kspec warm` (kspec/compiler/_raw_program.py)
            from ..compiler import CompileRequest, compile_cached, raw_program

            assert self._code is not None
            made = raw_program(self._code, arch, options=self._options, translate_cucomplex=self._translate_cucomplex,
                               name_expressions=self._name_expressions, backend=self._backend)
            has_binaries = self._binaries is not None and bool(self._binaries.archs(self._binary_key))
            program, _hit = compile_cached(
                made.source,
                name=self._label,
                options=made.options,
                name_expressions=made.name_expressions,
                needs=made.needs,
                backend=made.backend,
                request=CompileRequest(self._label, self._what(), has_binaries),
            )
            self._programs[arch] = program
        return program

    def _use_binaries(self, store: Any, key: str) -> None:
        """Load from ``store`` (a BinaryStore) the binary built for this source under ``key`` when it has one
        for the device; compile otherwise. NVRTC is not imported when a binary serves."""
        self._binaries, self._binary_key = store, key

    def _stored(self, arch: str) -> Any:
        return self._binaries.find(self._binary_key, arch) if self._binaries is not None else None

    def _what(self) -> str:
        """The compile log's (and the compile policy's) name for what this module compiles."""
        if self._path is not None:
            return f"file {self._path}"
        if self._name_expressions:
            return "name expressions " + ", ".join(self._name_expressions)
        return "raw module"

    def _image(self, device: Device) -> tuple[bytes, bool]:
        """The module's image for the device, and whether it is a precompiled binary (else compiled/cached)."""
        if self._path is not None:
            return loadable_image(Path(self._path).read_bytes(), Path(self._path).suffix), True
        stored = self._stored(device.arch)
        if stored is not None:
            return stored.read(), True
        try:
            return self._program(device.arch).binary, False
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
                    start = time.perf_counter()
                    image, precompiled = self._image(device)
                    module = LoadedModule(image, device, what=what)
                    if precompiled:  # a compile or a cache hit is logged by compile_cached
                        record_load(self._label, self._what(), device.arch, "binary", (time.perf_counter() - start) * 1e3)
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
