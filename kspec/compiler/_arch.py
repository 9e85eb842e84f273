"""The one rule for architecture strings (``sm_90``, ``sm_90a``, ``compute_120``): a leaf module, so the
process serving precompiled binaries picks one by architecture without importing the compile options."""

from __future__ import annotations

import re

from .._errors import KspecValueError

# sm_XX -> CUBIN, compute_XX -> PTX; the "a" / "f" suffixes are CUDA 12.9+'s arch- and family-specific targets.
_ARCH_RE = re.compile(r"(sm|compute)_(\d{2,3})([af]?)")


HOST_ARCH = "host"  # the CPU device: a shared object from the host C++ compiler (kspec/compiler/host/_compiler.py)


def check_arch(arch: object, *, param: str = "arch") -> str:
    """Return ``arch`` when it reads ``sm_XX``, ``compute_XX`` or ``host``; else a KspecValueError naming ``param``."""
    if not isinstance(arch, str) or not (_ARCH_RE.fullmatch(arch) or arch == HOST_ARCH):
        raise KspecValueError(
            f"{param}: expected 'sm_XX' (CUBIN), 'compute_XX' (PTX) or 'host' (the CPU device), e.g. 'sm_90', got {arch!r}"
        )
    return arch


def arch_number(arch: str) -> int:
    """``'sm_90a'`` -> 90."""
    match = _ARCH_RE.fullmatch(arch)
    if match is None:
        raise KspecValueError(f"arch: expected 'sm_XX' or 'compute_XX', got {arch!r}")
    return int(match.group(2))


def arch_version(arch: str) -> tuple[int, int] | None:
    """``'sm_90a'`` -> (9, 0), ``'compute_120'`` -> (12, 0); None when ``arch`` is not an arch string."""
    match = _ARCH_RE.fullmatch(arch)
    if match is None:
        return None
    number = int(match.group(2))
    return number // 10, number % 10
