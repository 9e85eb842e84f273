"""A build's modules compiled once to PTX and linked per arch (kspec/compiler/_link.py says when and why).

``kspec build`` makes one unit per (module, arch). Where a module qualifies (:func:`kspec.compiler.one_front_end`),
the first of its units to run compiles its PTX for the build's lowest arch (behind the binary cache, in a worker
process like any compile) and every unit links its own arch's CUBIN from it; the CUBIN goes into the cache under
the key a per-arch compile of the module would have, so a later build, ``kspec warm`` or a first call finds it.
A module that does not qualify, whose PTX compile fails (an intrinsic only newer archs have, say) or whose link
fails compiles per arch as before; one whose PTX compile runs past the time limit fails for every arch at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import CompileTimeoutError, KspecError
from ..compiler import BinaryCache, CompiledProgram, CompileOptions, cache_key, link_ptx, one_front_end

# (cache, pool, name, source, options, name expressions, needs) -> (program, cache hit): the build's compile
Compile = Callable[..., tuple[CompiledProgram, bool]]


class SharedFrontEnd:
    """Per program (a build unit's ``program_key``): its PTX arch, or None, and its PTX once compiled."""

    def __init__(self, archs_by_module: dict[Any, set[str]]) -> None:
        self._archs = archs_by_module
        self._ptx_arch: dict[Any, str | None] = {}
        self._ptx: dict[Any, CompiledProgram | KspecError] = {}
        self._locks: dict[Any, threading.Lock] = {k: threading.Lock() for k in archs_by_module}

    def compile(self, compile: Compile, cache: BinaryCache, pool: Any, program_key: Any, arch: str, *, name: str,
                source: str, extra: tuple[str, ...], name_expressions: tuple[str, ...],
                needs: tuple[str, ...], source_key: str | None = None) -> tuple[CompiledProgram, bool, bool]:  # fmt: skip
        """The unit's program, whether the cache had it, whether it was linked from the module's PTX.
        ``source_key``: the string that determines ``source`` (a first call's program of one launch variant,
        kspec.compiler.variant_program), which keys the cache instead of the text, as for that call."""
        options = CompileOptions(arch=arch, extra=extra)
        common: dict[str, Any] = {"name": name, "source": source, "name_expressions": name_expressions, "needs": needs}
        if source_key is not None:
            common.update(source=lambda: source, source_key=source_key)
        with self._locks[program_key]:
            if program_key not in self._ptx_arch:
                self._ptx_arch[program_key] = one_front_end(source, sorted(self._archs[program_key]), extra)
        ptx_arch = self._ptx_arch[program_key]
        if ptx_arch is None:
            return (*compile(cache, pool, options=options, **common), False)
        key = cache_key(None if source_key is not None else source, options=options, name_expressions=name_expressions,
                        needs=needs, source_key=source_key)
        found = cache.get(key)
        if found is not None:
            return found, True, False
        ptx = self._shared_ptx(compile, cache, pool, program_key, CompileOptions(arch=ptx_arch, extra=extra), common)
        if isinstance(ptx, CompileTimeoutError):
            raise ptx  # the source's front end ran past the limit: per arch it would, once per arch
        if isinstance(ptx, KspecError):  # e.g. an intrinsic of a newer arch: each arch's own compile says
            return (*compile(cache, pool, options=options, **common), False)
        try:
            program = link_ptx(ptx, arch, name)
        except KspecError:
            return (*compile(cache, pool, options=options, **common), False)  # an nvJitLink older than the PTX, say
        cache.put(key, program, kernel=name)
        return program, False, True

    def _shared_ptx(self, compile: Compile, cache: BinaryCache, pool: Any, program_key: Any, options: CompileOptions,
                    common: dict[str, Any]) -> CompiledProgram | KspecError:  # fmt: skip
        with self._locks[program_key]:  # the program's other units wait for the first one's PTX
            found = self._ptx.get(program_key)
            if found is None:
                try:
                    found, _ = compile(cache, pool, options=options, **common)
                except KspecError as exc:
                    found = exc
                self._ptx[program_key] = found
            return found


def archs_by_module(units: Sequence[Any]) -> dict[Any, set[str]]:
    """Each program's archs in the build (units sharing a ``program_key`` share a program: a module, or one of its
    captured launch variants)."""
    found: dict[Any, set[str]] = {}
    for unit in units:
        found.setdefault(unit.program_key, set()).add(unit.arch)
    return found
