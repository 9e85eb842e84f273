"""What a raw module of CUDA source compiles at run time: the one definition of its program.

``RawModule(code=...)`` and ``RawKernel(code, name)`` compile their module whole, behind the binary cache, with
the source after kspec's raw template (``raw_source``), the user's options, their name expressions and the
header packages the source includes (kspec/kernels/raw/_code.py). ``kspec warm`` makes the same programs for
the raw specs of spec files (kspec/build/_warm.py), so the entries it writes are the ones a raw kernel's
first call looks up. Both go through :func:`raw_program`; which name expressions the kernel object of a raw
spec compiles with is :func:`raw_spec_expressions`. Imports nothing heavy at module level (the serving
path imports it; the renderer only when a program is made).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

# the rule of which name expressions a raw module compiles with (a leaf module: render keys by it too)
from .._raw_names import kernel_expressions, raw_spec_expressions, single_kernel

__all__ = ["RawProgram", "kernel_expressions", "raw_program", "raw_spec_expressions", "single_kernel"]

if TYPE_CHECKING:
    from ._options import CompileOptions


class RawProgram(NamedTuple):
    """What ``compile_cached`` is given for a raw module on one arch."""

    source: str
    options: CompileOptions
    name_expressions: tuple[str, ...]
    needs: tuple[str, ...]
    backend: str


def raw_program(code: str, arch: str, *, options: Sequence[str] = (), translate_cucomplex: bool = False,
                name_expressions: Sequence[str] = (), backend: str = "nvrtc") -> RawProgram:
    """The program of a raw module's ``code`` for ``arch`` (``sm_XX``, ``compute_XX`` or ``host``)."""
    from ..render import needs_of_raw_source, raw_source
    from ._options import CompileOptions

    source = raw_source(code, translate_cucomplex=translate_cucomplex)
    return RawProgram(
        source=source,
        options=CompileOptions(arch=arch, extra=tuple(options)),
        name_expressions=tuple(name_expressions),
        needs=tuple(sorted(needs_of_raw_source(source, translate_cucomplex))),
        backend=backend,
    )
