"""Warming: every declared specialization compiled into the binary cache as run time looks it up.

A kernel without a precompiled binary compiles each launch variant on first use, as its own binary-cache
entry (kspec/compiler/_specialization.py); a raw kernel compiles its module whole, as one entry
(kspec/compiler/_raw_program.py). ``kspec warm`` / ``kspec.warm`` make exactly those entries ahead of time,
for the instantiations ``kspec build`` would compile (:func:`plan_build`) and every raw spec of CUDA
source, so that a process with ``KSPEC_COMPILE=never`` serves every declared call from the cache. Needs
NVRTC (or the host compiler for ``host``), never a GPU; never imports the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import KspecError, KspecTypeError, KspecValueError
from ..compiler import BinaryCache, RawProgram, default_cache, raw_program, raw_spec_expressions, variant_program
from ..render import Specialization, module_interface, specialize
from ..spec import AnySpec, RawSpec
from ._precompile import BuildUnit, UnitOutcome, built_variant, cached_compile, fails_as_declared, plan_build, run_parallel
from ._progress import BuildProgress
from ._workers import DEFAULT_COMPILE_TIMEOUT_S, CompilePool


@dataclass(frozen=True)
class WarmUnit:
    """One binary-cache entry to make: one launch variant of one specialization, for one arch."""

    spec: AnySpec
    types: Mapping[str, str]
    scalars: frozenset[str]
    arch: str
    specialization: Specialization | None  # None: a raw module (``raw``), or specializing failed (``problem``)
    expression: str = ""  # the variant's name expression
    problem: KspecError | None = None
    raw: RawProgram | None = None  # a raw spec's module, compiled whole as its kernel object compiles it

    @property
    def label(self) -> str:
        """The instantiation as ``kspec build`` names it (``T=float32``, ``-``), then the variant."""
        return BuildUnit(self.spec, self.types, self.arch, self.scalars).label + (f" {self.expression}" if self.expression else "")


@dataclass
class WarmResult(UnitOutcome):
    """One cache entry's outcome; ``what`` reads ``kernel [instantiation variant] arch``."""

    unit: WarmUnit
    cache_hit: bool = False
    error: KspecError | None = None


@dataclass
class WarmPlan:
    """The entries a warm makes, and the kernels it leaves out (and why)."""

    units: list[WarmUnit]
    skipped: list[tuple[AnySpec, str]]

    @property
    def kernels(self) -> int:
        return len({id(u.spec) for u in self.units})


def plan_warm(specs: Iterable[AnySpec], archs: Sequence[str]) -> WarmPlan:
    """Every launch variant of every declared specialization (what ``kspec build`` would compile), per arch."""
    build = plan_build(specs, archs)
    units: list[WarmUnit] = []
    skipped = list(build.skipped)
    variants: dict[tuple[Any, ...], tuple[Specialization, tuple[str, ...]] | KspecError] = {}
    for unit in build.units:
        if isinstance(unit.spec, RawSpec):
            units.append(_raw_unit(unit))
            continue
        k = unit.memo_key
        if k not in variants:  # once per specialization, whatever the number of archs
            try:
                specialization = specialize(unit.spec, unit.types, scalars=unit.scalars, raw_layouts=dict(unit.raw_layouts))
                # the variants' name expressions, each once, as a call looks them up (kernels' interface_of)
                expressions = tuple(dict.fromkeys(module_interface(specialization).variants.values()))
                variants[k] = (specialization, expressions)
            except KspecError as exc:
                variants[k] = exc
        found = variants[k]
        if isinstance(found, KspecError):
            units.append(WarmUnit(unit.spec, unit.types, unit.scalars, unit.arch, None, problem=found))
            continue
        specialization, expressions = found
        if unit.variant is not None:  # a captured variant: its entry point alone, as the build compiles it
            try:
                expressions = (specialization.name_expression(built_variant(unit, specialization)),)
            except KspecError as exc:
                units.append(WarmUnit(unit.spec, unit.types, unit.scalars, unit.arch, None, problem=exc))
                continue
        units.extend(WarmUnit(unit.spec, unit.types, unit.scalars, unit.arch, specialization, e) for e in expressions)
    return WarmPlan(units, skipped)


def _raw_unit(unit: BuildUnit) -> WarmUnit:
    """The entry of a raw spec's module for one arch: the program its kernel object (kspec.load, a generated
    module) compiles on its first call, made by the same function (kspec/compiler/_raw_program.py)."""
    spec = unit.spec
    assert isinstance(spec, RawSpec)
    try:
        program = raw_program(spec.read_source(), unit.arch, options=tuple(spec.options),
                              translate_cucomplex=spec.translate_cucomplex,
                              name_expressions=raw_spec_expressions(tuple(spec.kernels), tuple(spec.name_expressions)))
    except KspecError as exc:
        return WarmUnit(spec, unit.types, unit.scalars, unit.arch, None, problem=exc)
    return WarmUnit(spec, unit.types, unit.scalars, unit.arch, None, raw=program)


def warm_units(
    units: Sequence[WarmUnit],
    *,
    jobs: int | None = None,
    cache: BinaryCache | None = None,
    on_result: Callable[[WarmResult], None] | None = None,
    timeout: float | None = DEFAULT_COMPILE_TIMEOUT_S,
    isolate: bool | None = None,
) -> list[WarmResult]:
    """Find or compile every unit's cache entry (in parallel, as :func:`precompile`); failures are recorded,
    not raised. These are explicit compiles: the compile policy does not apply, the compile log is not written."""
    store = cache if cache is not None else default_cache()

    def warm(unit: WarmUnit, pool: CompilePool | None) -> WarmResult:
        result = WarmResult(unit, error=unit.problem)
        try:
            if unit.specialization is not None:
                program = variant_program(unit.specialization, unit.arch, (unit.expression,))
                _compiled, result.cache_hit = cached_compile(
                    store, pool, name=program.name, source=program.source, source_key=program.source_key,
                    options=program.options, name_expressions=program.name_expressions, needs=program.needs,
                )
            elif unit.raw is not None:
                raw = unit.raw  # backend: raw specs compile with NVRTC (no spec field chooses nvcc)
                _compiled, result.cache_hit = cached_compile(
                    store, pool, name=unit.spec.name, source=raw.source, source_key=raw.source_key, options=raw.options,
                    name_expressions=raw.name_expressions, needs=raw.needs,
                )
        except KspecError as exc:
            if not fails_as_declared(unit.spec, exc):  # nothing to cache of a declared failure
                result.error = exc
        if on_result is not None:
            on_result(result)
        return result

    return run_parallel(units, warm, jobs=jobs, timeout=timeout, isolate=isolate)


def warm_with_progress(
    units: Sequence[WarmUnit],
    *,
    jobs: int | None = None,
    timeout: float | None = DEFAULT_COMPILE_TIMEOUT_S,
    show: bool = True,
) -> tuple[list[WarmResult], float]:
    """:func:`warm_units` behind the build's progress bar (``show=False``: none); the results and the wall
    time in seconds."""
    start = time.perf_counter()
    with BuildProgress(len(units), enabled=show) as progress:
        results = warm_units(units, jobs=jobs, timeout=timeout,
                             on_result=lambda r: progress.step(f"{r.unit.spec.name} {r.unit.arch}"))
    return results, time.perf_counter() - start


def warm_summary(results: Sequence[WarmResult], archs: Sequence[str], kernels: int, wall: float, skipped: int) -> str:
    """``12 kernels, 150 cache entries for sm_90 in 4.10 s: 140 compiled, 10 already cached, 0 failed``."""
    failed = sum(not r.ok for r in results)
    hits = sum(r.cache_hit and r.ok for r in results)
    line = (f"{kernels} {'kernel' if kernels == 1 else 'kernels'}, {len(results)} cache entries for {','.join(archs)} "
            f"in {wall:.2f} s: {len(results) - hits - failed} compiled, {hits} already cached, {failed} failed")
    if skipped:
        line += f"; {skipped} {'kernel' if skipped == 1 else 'kernels'} not warmed"
    return line


@dataclass
class WarmReport:
    """What a warm did: every entry's result, the kernels left out, the archs and the wall time."""

    results: list[WarmResult]
    skipped: list[tuple[AnySpec, str]]
    archs: list[str]
    kernels: int
    wall: float
    directory: str | None = None  # the cache directory written (None: memory only)

    @property
    def compiled(self) -> int:
        return sum(r.ok and not r.cache_hit for r in self.results)

    @property
    def cached(self) -> int:
        return sum(r.ok and r.cache_hit for r in self.results)

    @property
    def failures(self) -> list[WarmResult]:
        return [r for r in self.results if not r.ok]

    def summary(self) -> str:
        line = warm_summary(self.results, self.archs, self.kernels, self.wall, len(self.skipped))
        return line + (f"; binary cache {self.directory}" if self.directory else "; binary cache in memory only")


def warm_specs(specs: Iterable[AnySpec], archs: Sequence[str], *, jobs: int | None = None,
               timeout: float | None = DEFAULT_COMPILE_TIMEOUT_S, show: bool = False) -> WarmReport:
    """Plan and warm ``specs`` for ``archs`` (checked arch strings), behind a progress bar when ``show``."""
    plan = plan_warm(specs, archs)
    results, wall = warm_with_progress(plan.units, jobs=jobs, timeout=timeout, show=show)
    directory = default_cache().directory
    return WarmReport(results, plan.skipped, list(archs), plan.kernels, wall, None if directory is None else str(directory))


def specs_of(target: Any) -> list[AnySpec]:
    """The specs ``kspec.warm`` is given: spec files or directories (a path or several), or a generated
    module (``kspec generate``'s output, which holds its kernels' spec tables)."""
    import os
    import types

    from ..spec import load_library, parse_spec

    if isinstance(target, types.ModuleType):
        tables = getattr(target, "_SPECS", None)
        if not isinstance(tables, list):
            raise KspecTypeError(f"target: module {target.__name__!r} is not a module generated by kspec generate "
                                 "(it has no _SPECS list of spec tables)")
        return [parse_spec(dict(table)) for table in tables]
    if isinstance(target, (str, os.PathLike)):
        paths = [target]
    elif isinstance(target, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in target):
        paths = list(target)
    else:
        raise KspecTypeError("target: expected a spec file or directory (str or os.PathLike), several of them, or a "
                             f"generated module, got {type(target).__name__}")
    library = load_library(paths)
    return [library[name] for name in library]


def check_archs(arch: str | Sequence[str], *, param: str = "arch") -> list[str]:
    """``arch``: one target or several (``sm_90``, ``host``), checked, each once, in order."""
    from ..compiler import check_arch

    items = [arch] if isinstance(arch, str) else list(arch) if isinstance(arch, (list, tuple)) else None
    if not items:
        raise KspecValueError(f"{param}: expected an arch such as 'sm_90' or 'host', or a list of them, got {arch!r}")
    checked: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise KspecTypeError(f"{param}: expected arch strings such as 'sm_90' or 'host', got {item!r}")
        found: str = check_arch(item, param=param)
        if found not in checked:
            checked.append(found)
    return checked
