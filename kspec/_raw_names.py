"""Which name expressions a raw module compiles with: one rule for constructors, spec files and content keys.

A leaf module (no imports of kspec's layers): the compiler (what a program registers with NVRTC), render (a raw
module's content key) and the kernels (RawKernel, spec tables) all follow it, so a ``RawKernel(code, name)``
call and a spec file's raw kernel of the same code name the same program.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A kernel name NVRTC can take as a name expression (plain, qualified or a template-id), not a mangled one.
_EXPRESSION_RE = re.compile(r"(?!_Z)[A-Za-z_][\w:]*(<.*>)?", re.DOTALL)


def kernel_expressions(name: str) -> tuple[str, ...]:
    """The name expressions ``RawKernel(code, name)`` compiles with: the name itself when NVRTC can take it
    as one (the lowered symbol is then looked up), none for a mangled name (looked up as it is)."""
    return (name,) if _EXPRESSION_RE.fullmatch(name) else ()


def single_kernel(kernels: Sequence[str], name_expressions: Sequence[str]) -> bool:
    """Whether a raw spec's kernel object is a RawKernel (one plain kernel, no name expressions), else a
    RawModule (kspec/kernels/_library.py)."""
    return len(kernels) == 1 and not name_expressions


def raw_spec_expressions(kernels: Sequence[str], name_expressions: Sequence[str]) -> tuple[str, ...]:
    """The name expressions the kernel object of a raw spec (``kspec.load``, a generated module) compiles
    with: its RawKernel's (:func:`kernel_expressions`), else the spec's ``name_expressions``."""
    if single_kernel(kernels, name_expressions):
        return kernel_expressions(kernels[0])
    return tuple(name_expressions)
