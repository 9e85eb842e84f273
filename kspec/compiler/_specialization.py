"""A specialization's launch variants compiled as run time compiles them: one program (one binary-cache
entry) per variant's name expression, keyed by the specialization key and the renderer's digest.

The one definition of those programs: a kernel's first call (kspec/kernels/binaries/_loaded.py), its ``compile()``
and ``kspec warm`` (kspec/build/_warm.py) all go through :func:`variant_program`, so what warming writes
is exactly what a call looks up. Imports nothing heavy at module level (the serving path imports it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._named_tuple import NamedTuple
from .._errors import NvrtcNotFoundError, kernel_label
from ._arch import HOST_ARCH

if TYPE_CHECKING:
    from ..render import RenderedModule, Specialization
    from ._options import CompileOptions

_rendered: dict[tuple[str, bool], RenderedModule] = {}
_render_lock = threading.Lock()  # Jinja's environment is shared: warming renders from several threads


def rendered_module(specialization: Specialization, arch: str = "") -> RenderedModule:
    """The module's source for ``arch``: CUDA C++ for a GPU, kspec's host templates for the CPU device
    (``arch == "host"``: same entries and ABI, host loops). Memoised per specialization and device kind."""
    host = arch == HOST_ARCH
    found = _rendered.get((specialization.key, host))
    if found is None:
        from ..render import render, render_host  # render a plain spec (kspec.spec.PlainSpec) as it is: no Pydantic

        with _render_lock:
            found = _rendered.get((specialization.key, host))
            if found is None:
                found = _rendered[(specialization.key, host)] = (render_host if host else render)(specialization)
    return found


class VariantProgram(NamedTuple):
    """What ``compile_cached`` is given for some of a specialization's name expressions on one arch."""

    name: str
    source: Callable[[], str]  # made only on a cache miss
    source_key: str  # determines the source: a cache hit neither renders it nor imports Jinja
    options: CompileOptions
    name_expressions: tuple[str, ...]
    needs: tuple[str, ...]


def variant_program(specialization: Specialization, arch: str, expressions: tuple[str, ...] | None = None) -> VariantProgram:
    """The program of ``expressions`` (default: every variant) of ``specialization`` for ``arch``."""
    from .._version import __version__
    from .._resources import renderer_digest
    from ._options import CompileOptions

    return VariantProgram(
        name=specialization.name,
        source=lambda: rendered_module(specialization, arch).source,
        source_key=f"kspec {__version__} specialization {specialization.key} renderer {renderer_digest()}",
        options=CompileOptions(arch=arch, extra=specialization.nvrtc_options),
        name_expressions=tuple(specialization.name_expressions if expressions is None else expressions),
        needs=tuple(specialization.needs),
    )


class ProgramImage(NamedTuple):
    """A compiled program as a kernel loads it: the binary, lowered names, NVRTC log and the binary-cache key
    it is kept under (:func:`cached_binary` reads it back in another process)."""

    binary: bytes
    lowered_names: Mapping[str, str]
    log: str
    cache_key: str


def compile_program(specialization: Specialization, arch: str, binaries: Any = None,
                    expressions: tuple[str, ...] | None = None) -> ProgramImage:
    """The binary, lowered names, NVRTC log and cache key of ``expressions`` (default: every variant) of
    ``specialization`` for ``arch``, behind the binary cache, as a kernel compiles on its own (the compile
    policy applies, the compile log records it). Without NVRTC, a kernel that has ``binaries`` (a
    BinaryStore) raises the store's error naming the binary it lacks."""
    from ._compile import compile_keyed
    from ._policy import CompileRequest

    program = variant_program(specialization, arch, expressions)
    names = program.name_expressions
    label = specialization_label(specialization, names[0] if len(names) == 1 else None)
    # binaries for other archs only: a store of captured variants that lacks this one has this arch
    archs = binaries.archs(specialization.key) if binaries is not None else []
    request = CompileRequest(program.name, label, bool(archs) and arch not in archs,
                             lambda target: build_advice(specialization, target))
    try:
        compiled, _hit, key = compile_keyed(
            program.source, source_key=program.source_key, name=program.name, options=program.options,
            name_expressions=names, needs=program.needs, request=request,
        )
    except NvrtcNotFoundError as exc:
        if binaries is None:
            raise
        what = kernel_label(program.name, dict(specialization.types) or "no placeholders")
        raise binaries.missing(what, specialization.key, arch, exc) from None
    return ProgramImage(compiled.binary, compiled.lowered_names, compiled.log, key)


def cached_binary(key: str) -> bytes | None:
    """The binary the process's binary cache keeps under ``key`` (a :class:`ProgramImage`'s), or None where
    it has none (evicted, damaged, another cache directory): a read, never a compile."""
    from .cache import default_cache

    program = default_cache().get(key)
    return None if program is None else program.binary


def specialization_label(specialization: Specialization, expression: str | None) -> str:
    """The specialization as the compile log and the compile policy's messages name it: placeholder types,
    scalar inputs, and the variant's name expression (``all variants`` for a whole module)."""
    types = ", ".join(f"{letter}={dtype}" for letter, dtype in specialization.types.items()) or "no placeholders"
    parts = [types]
    if specialization.scalars:
        parts.append("scalar inputs " + ", ".join(sorted(specialization.scalars)))
    parts.append(f"variant {expression}" if expression is not None else "all variants")
    return "; ".join(parts)


def build_advice(specialization: Specialization, arch: str) -> str:
    """What would have produced a binary of ``specialization`` for ``arch``: the ``kspec build`` line for a
    spec from a file (with the ``instantiations`` entry it lacks, if any), else the generic advice."""
    spec = specialization.spec
    origin = getattr(spec, "origin", None)
    types = dict(specialization.types)
    declared = getattr(spec, "instantiations", None)
    if declared is None and hasattr(spec, "to_data"):  # a plain spec (a generated module's table)
        declared = spec.to_data().get("instantiations")
    entry = "{" + ", ".join(f'{letter} = "{dtype}"' for letter, dtype in types.items()) + "}"
    lacks = bool(types) and not any(_covers(inst, types) for inst in declared or ())
    if origin is not None:
        line = f"kspec build {origin} --arch {arch}"
        return f"add {entry} to its instantiations in {origin}, then {line}" if lacks else line
    if declared and lacks:  # a generated module's kernel: its spec file declares what the build compiles
        return f"add {entry} to its instantiations in its spec file, then kspec build <spec file> --arch {arch}"
    return (f"call it once with KSPEC_COMPILE=allow (the binary cache then serves it), or build it ahead "
            f"(kspec build <spec file> --arch {arch})")


def _covers(instantiation: Any, types: dict[str, str]) -> bool:
    """Whether a declared instantiation (``{T = "float32"}``, or a table's ``{T = ["float32", ...]}``) names
    the binding ``types``."""
    if not isinstance(instantiation, Mapping) or set(instantiation) != set(types):
        return False
    return all(types[k] in (v if isinstance(v, (list, tuple)) else (v,)) for k, v in instantiation.items())
