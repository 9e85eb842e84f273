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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

# the rule of which name expressions a raw module compiles with (a leaf module: render keys by it too)
from .._named_tuple import NamedTuple
from .._raw_names import kernel_expressions, raw_spec_expressions, single_kernel

__all__ = ["RawProgram", "kernel_expressions", "raw_program", "raw_source_key", "raw_spec_expressions", "single_kernel"]

if TYPE_CHECKING:
    from ._options import CompileOptions


class RawProgram(NamedTuple):
    """What ``compile_cached`` is given for a raw module on one arch."""

    source: Callable[[], str]  # made only on a cache miss
    source_key: str  # determines the source: a cache hit neither renders it nor imports Jinja
    options: CompileOptions
    name_expressions: tuple[str, ...]
    needs: tuple[str, ...]
    backend: str


def raw_program(code: str, arch: str, *, options: Sequence[str] = (), translate_cucomplex: bool = False,
                name_expressions: Sequence[str] = (), backend: str = "nvrtc") -> RawProgram:
    """The program of a raw module's ``code`` for ``arch`` (``sm_XX``, ``compute_XX`` or ``host``)."""
    from ..render import needs_of_raw_source
    from ._options import CompileOptions

    def source() -> str:
        from ..render import raw_source

        return str(raw_source(code, translate_cucomplex=translate_cucomplex))

    return RawProgram(
        source=source,
        source_key=raw_source_key(code, translate_cucomplex),
        options=CompileOptions(arch=arch, extra=tuple(options)),
        name_expressions=tuple(name_expressions),
        # the template adds no #include but the cuComplex header, which translate_cucomplex needs already
        needs=tuple(sorted(needs_of_raw_source(code, translate_cucomplex))),
        backend=backend,
    )


def raw_source_key(code: str, translate_cucomplex: bool = False) -> str:
    """What determines the source of a raw module (:func:`kspec.render.raw_source`): the code, the cuComplex
    translation, kspec's templates and rendering code. The binary cache keys raw programs by it, so a warm
    process's first raw kernel finds its binary without rendering (importing Jinja costs ~25-50 ms)."""
    from .._resources import renderer_digest, templates_digest
    from .._version import __version__

    return (f"kspec {__version__} raw module templates {templates_digest()} renderer {renderer_digest()} "
            f"cucomplex {bool(translate_cucomplex)}\n{code}")
