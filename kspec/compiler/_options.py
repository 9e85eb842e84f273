"""NVRTC options as a frozen dataclass, and the architectures kspec builds for."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .._errors import KspecTypeError, KspecValueError
from ._arch import check_arch

# Architectures `kspec build` and the build hook compile CUBINs for. Only targets NVRTC 13.0 (the GPU
# machine's) accepts: its nvrtcGetSupportedArchs() is sm_75 80 86 87 88 89 90 100 103 110 120 121 (13.5 adds
# sm_107; CUDA 13 dropped everything below sm_75). One CUBIN per major version: an sm_80 CUBIN runs on sm_86
# and sm_89 (the binary stores pick the highest minor not above the device's, kspec/kernels/binaries/_precompiled.py), so
# building those two as well cost a third of the main job's time and bytes for ptxas's scheduling
# of the same code; `--arch sm_80,sm_86,...` still builds them. Filter with `supported_archs()` at build time:
# another NVRTC may differ.
DEFAULT_ARCHS: tuple[str, ...] = ("sm_80", "sm_90", "sm_100", "sm_120")

# A build stops a kernel's compile after this long (kspec build --compile-timeout, KSPEC_COMPILE_TIMEOUT, the
# hook's compile-timeout): a CUB-heavy kernel compiles in seconds, so ten minutes means a runaway expression
# (NVRTC's time grows faster than the expression: 5k terms ~8 s, 20k ~190 s), not a slow machine.
DEFAULT_COMPILE_TIMEOUT_S = 600.0
COMPILE_TIMEOUT_ENV = "KSPEC_COMPILE_TIMEOUT"


def compile_timeout(value: object = None, *, param: str = "--compile-timeout") -> float:
    """A build's per-kernel compile time limit in seconds (0: none): ``value`` when given (a number or its
    text), else ``KSPEC_COMPILE_TIMEOUT``, else :data:`DEFAULT_COMPILE_TIMEOUT_S`. A ``KspecValueError``
    naming ``param`` (or the variable) for anything but a finite number >= 0."""
    if value is None:
        text = os.environ.get(COMPILE_TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_COMPILE_TIMEOUT_S
        value, param = text, COMPILE_TIMEOUT_ENV
    try:
        if isinstance(value, bool):
            raise ValueError
        seconds = float(value)  # type: ignore[arg-type]  # any other type is the ValueError/TypeError below
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise KspecValueError(f"{param}: expected seconds >= 0 (0: no limit), got {value!r}")
    return seconds

_STD_RE = re.compile(r"c\+\+\d\d")  # NVRTC knows no gnu++ dialects
# NAME, NAME=VALUE, or a function-like macro F(a,b)=VALUE, as -D takes them.
_DEFINE_RE = re.compile(r"[A-Za-z_]\w*(\([\w\s,.]*\))?(=.*)?", re.DOTALL)

_ARCH_FLAGS = ("-arch", "--gpu-architecture")
_STD_FLAGS = ("-std", "--std")


def _flag_value(extra: Sequence[str], flags: tuple[str, ...]) -> str | None:
    """The value the user's options give to one of ``flags`` (last one wins, as in NVRTC), or None.

    Accepts ``-flag=value``, ``-flag value`` in one string, and ``-flag`` followed by ``value``.
    """
    found = None
    items = list(extra)
    for index, item in enumerate(items):
        for flag in flags:
            if item.startswith(flag + "="):
                found = item[len(flag) + 1 :].strip()
            elif item.startswith(flag + " "):
                found = item[len(flag) + 1 :].strip()
            elif item == flag and index + 1 < len(items):
                found = items[index + 1].strip()
    return found


def _as_str_tuple(value: object, param: str) -> tuple[str, ...]:
    if isinstance(value, str):  # ("-O3") without the comma is a common slip; a lone string is one option
        return (value,)
    if not isinstance(value, Iterable):
        raise KspecTypeError(f"{param}: expected a sequence of strings, got {type(value).__name__}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise KspecTypeError(f"{param}: every item must be a str, got {item!r}")
    return items


@dataclass(frozen=True)
class CompileOptions:
    """What NVRTC is told, besides the include directories.

    ``extra`` holds user options passed through verbatim (CuPy's ``options=``); a ``-std`` or ``-arch`` /
    ``--gpu-architecture`` among them wins over the ``std`` / ``arch`` fields, since CuPy code passes
    ``'-std=c++11'`` and expects it honoured.
    """

    arch: str = "sm_90"
    std: str = "c++17"
    defines: tuple[str, ...] = ()
    fast_math: bool = False
    extra: tuple[str, ...] = ()
    relocatable: bool = False

    def __post_init__(self) -> None:
        check_arch(self.arch)
        if not isinstance(self.std, str) or not _STD_RE.fullmatch(self.std):
            raise KspecValueError(f"std: expected a C++ standard such as 'c++17', got {self.std!r}")
        defines = _as_str_tuple(self.defines, "defines")
        for define in defines:
            if not _DEFINE_RE.fullmatch(define):
                raise KspecValueError(f"defines: expected 'NAME' or 'NAME=VALUE', got {define!r}")
        # Lists are accepted for convenience and stored as tuples so options stay hashable.
        object.__setattr__(self, "defines", defines)
        object.__setattr__(self, "extra", _as_str_tuple(self.extra, "extra"))
        user_arch = _flag_value(self.extra, _ARCH_FLAGS)
        if user_arch is not None:
            check_arch(user_arch, param="extra (its -arch option)")

    @property
    def effective_arch(self) -> str:
        """The architecture NVRTC compiles for: a ``-arch`` in ``extra``, else ``arch``."""
        return _flag_value(self.extra, _ARCH_FLAGS) or self.arch

    @property
    def effective_std(self) -> str:
        """The C++ standard NVRTC uses: a ``-std`` in ``extra``, else ``std``."""
        return _flag_value(self.extra, _STD_FLAGS) or self.std

    @property
    def is_ptx(self) -> bool:
        """True when the output is PTX (a ``compute_XX`` target), False for a CUBIN (``sm_XX``)."""
        return self.effective_arch.startswith("compute_")

    def to_args(self, include_dirs: Sequence[str]) -> list[str]:
        """The full NVRTC option list, include directories included, in a stable order."""
        args: list[str] = []
        if _flag_value(self.extra, _ARCH_FLAGS) is None:
            args.append(f"-arch={self.arch}")
        if _flag_value(self.extra, _STD_FLAGS) is None:
            args.append(f"-std={self.std}")
        args.extend(f"-D{define}" for define in self.defines)
        if self.fast_math:
            args.append("--use_fast_math")
        if self.relocatable:
            args.append("-rdc=true")
        args.extend(f"-I{directory}" for directory in include_dirs)
        args.extend(self.extra)
        return args
