"""A raw module's constructor arguments, checked, and the build they share with identical constructions.

:class:`RawCode` holds a RawModule's code (CUDA source, or a .cubin/.ptx/.fatbin file) and options, checked
with the messages RawModule gives, and its :class:`~._build.RawBuild`: what they compile and load into.
Identical ``code=`` constructions share one build (kspec/kernels/records/_constructor_memo.py). :class:`kspec.kernels.raw._module.RawModule`
adds CuPy's API on top.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from ..._args import flag, options_tuple as _options_tuple
from ..._binfmt import HEAD_BYTES, content_problem
from ..._errors import KspecFileNotFoundError, KspecNotImplementedError, KspecTypeError, KspecValueError
from ...runtime import LoadedModule
from ..records import notify, observers, RAW_MODULES
from ._build import RawBuild

_BINARY_SUFFIXES = (".cubin", ".ptx", ".fatbin")


def _check_backend(backend: object) -> None:
    if backend not in ("nvrtc", "nvcc"):
        raise KspecValueError(f"backend: expected 'nvrtc' (the default) or 'nvcc', got {backend!r}")
    if backend == "nvcc":
        from ...compiler import find_nvcc

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


def module_key(code: Any, options: Any, backend: Any, translate_cucomplex: bool, enable_cooperative_groups: bool,
               name_expressions: Any, jitify: bool, label: str) -> tuple[Any, ...]:
    """A RawModule / RawKernel construction's key in RAW_MODULES: its arguments as given (see kspec/kernels/records/_constructor_memo.py)."""
    return (code, options, backend, translate_cucomplex, enable_cooperative_groups, name_expressions, jitify, label)


class RawCode:
    """A raw module's code and options, checked, and the build they compile and load into (see the module doc).

    ``code`` XOR ``path``; the arguments are RawModule's, checked here with the messages it gives. ``label``
    names the module in the compile log (a RawKernel's module: the kernel's name or "raw_kernel").
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
        label: str = "raw_module",
    ) -> None:
        key = None
        # a file's module is read again (the file may change); source is remembered (kspec/kernels/records/_constructor_memo.py)
        if path is None and type(translate_cucomplex) is bool and type(enable_cooperative_groups) is bool and type(jitify) is bool:
            key, state = RAW_MODULES.find(module_key(
                code, options if type(options) is not list else tuple(options), backend, translate_cucomplex,
                enable_cooperative_groups, name_expressions if type(name_expressions) is not list else tuple(name_expressions),
                jitify, label))  # fmt: skip
            if state is not None:
                self._build = state
                return
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
        checked_path = None if path is None else _binary_path(path)
        expressions = _name_expressions(name_expressions)
        if expressions and checked_path is not None:
            raise KspecValueError(
                "need CUDA C++ code for the requested kernels: "
                "name_expressions: only meaningful with code= (a binary loaded from path= is already compiled; "
                "get_function takes its symbol names)"
            )
        self._build = RawBuild(code, checked_path, _options_tuple(options), str(backend),
                               flag(translate_cucomplex, "translate_cucomplex"),
                               flag(enable_cooperative_groups, "enable_cooperative_groups"), expressions, label)  # fmt: skip
        RAW_MODULES.put(key, self._build)
        if observers and code is not None:  # kspec capture (kspec/kernels/records/_observers.py)
            notify("constructed", self._build)

    # -- the checked arguments (the build holds them) ----------------------------------------------------

    @property
    def _code(self) -> str | None:
        return self._build.code

    @property
    def _path(self) -> str | None:
        return self._build.path

    @property
    def _options(self) -> tuple[str, ...]:
        return self._build.options

    @property
    def _backend(self) -> str:
        return self._build.backend

    @property
    def _translate_cucomplex(self) -> bool:
        return self._build.translate_cucomplex

    @property
    def _cooperative(self) -> bool:
        return self._build.cooperative

    @property
    def _name_expressions(self) -> tuple[str, ...]:
        return self._build.name_expressions

    @property
    def _binaries(self) -> Any:
        """The BinaryStore serving this module's source (kspec.load of a raw spec), or None."""
        return self._build.binaries

    # -- compiling and loading: the build's (kspec/kernels/raw/_build.py) --------------------------------

    @property
    def _programs(self) -> dict[str, Any]:
        return self._build.programs

    def _program(self, arch: str) -> Any:
        """The CompiledProgram for ``arch`` (NVRTC, behind kspec's binary cache)."""
        return self._build.program(arch)

    def _use_binaries(self, store: Any, key: str) -> None:
        """Load from ``store`` (a BinaryStore) the binary built for this source under ``key`` when it has one
        for the device; compile otherwise. NVRTC is not imported when a binary serves. This module leaves the
        build it shared (kernels got from it before take the new one: RawKernel._use_binaries)."""
        self._build = self._build.with_binaries(store, key)

    def _stored(self, arch: str) -> Any:
        return self._build.stored(arch)

    def _module(self, device_id: int) -> LoadedModule:
        return self._build.module(device_id)

    def _symbol(self, name: str, arch: str) -> str:
        return self._build.symbol(name, arch)

    def _function(self, device_id: int, name: str) -> Any:
        """The CUfunction for ``name`` on a device; a KspecValueError listing the module's names if absent."""
        return self._build.function(device_id, name)
