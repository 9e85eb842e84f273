"""Ahead-of-time compilation: every declared instantiation of every spec, for every arch.

Shared by ``kspec build`` and the hatchling hook. Needs NVRTC, never a GPU; never imports the runtime.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from typing import TypeVar

from .._errors import CompileError, InstantiationError, KspecError, SpecError
from ..compiler import (BinaryCache, CompiledProgram, CompileOptions, cache_key, compile_cached, default_cache,
                        failed_program, raw_source_key, register_counts, variant_program)
from ..render import RenderedModule, Specialization, VariantKey, module_variant, render, render_raw, specialize
from ..spec import AnySpec, RawSpec, layouts_of, variant_text, variants_of, with_backwards
from ._front_end import SharedFrontEnd, archs_by_module
from ._worker import STACK_BYTES
from ._workers import DEFAULT_COMPILE_TIMEOUT_S, ISOLATED, CompilePool


@dataclass(frozen=True)
class BuildUnit:
    """One module to compile: a spec, a placeholder binding, an arch."""

    spec: AnySpec
    types: Mapping[str, str]
    arch: str
    scalars: frozenset[str] = frozenset()  # inputs passed by value (a Python number at the call)
    # raw arrays' (ndim, C-contiguous), sorted by name: a spec's `specializations` entry fixes them as the
    # CuPy-style constructors' calls do (kspec/spec/_specializations.py); () for every layout
    raw_layouts: tuple[tuple[str, tuple[int, bool]], ...] = ()
    # a config of a tuned raw spec: (the tuned kernel's name, its record entry for this arch or None, the
    # record's facts of that arch: device, driver...), which the output's tuning.json carries
    tuning: tuple[str, Mapping[str, Any] | None, Mapping[str, Any]] | None = field(default=None, compare=False)
    # one launch variant (entry, index, ndim, vec) of a captured specialization's `variants`: compiled alone, as
    # a first call compiles it (kspec.compiler.variant_program); None: the whole module
    variant: tuple[str, str, int, int] | None = None

    @property
    def label(self) -> str:
        """The instantiation as text: ``T=float32,U=int64`` (``+scalars=a`` when inputs go by value), or
        ``-`` for a kernel with no placeholders and no scalars."""
        text = ",".join(f"{k}={v}" for k, v in self.types.items())
        if self.scalars:
            text += ("+" if text else "") + "scalars=" + "-".join(sorted(self.scalars))
        if self.raw_layouts:
            text += ("+" if text else "") + "raw=" + "-".join(f"{n}:{d}{'c' if c else 's'}" for n, (d, c) in self.raw_layouts)
        if self.variant is not None:
            text += ("+" if text else "") + "variant=" + "-".join(map(str, self.variant))
        return text or "-"

    @property
    def memo_key(self) -> tuple[Any, ...]:
        """What decides the unit's module, whatever the arch: render (and warm) once per such key."""
        return (id(self.spec), tuple(self.types.items()), self.scalars, self.raw_layouts)

    @property
    def program_key(self) -> tuple[Any, ...]:
        """What decides the unit's program, whatever the arch: its module, and its launch variant if one alone
        (the build's PTX is shared among the archs of one program)."""
        return (*self.memo_key, self.variant)


class UnitOutcome:
    """What ``kspec build`` and ``kspec warm`` report of one unit of work: its ``unit`` (a spec, an
    instantiation label, an arch) and the ``error`` it ended with, if any."""

    unit: Any
    error: KspecError | None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def what(self) -> str:
        """``kernel [instantiation] arch``, as the reports name a unit."""
        return f"{self.unit.spec.name} [{self.unit.label}] {self.unit.arch}"


@dataclass
class BuildResult(UnitOutcome):
    unit: BuildUnit
    program: CompiledProgram | None = None
    cache_hit: bool = False
    error: KspecError | None = None
    source_sha256: str = ""
    key: str = ""  # the specialization's content key (what a BinaryStore finds the binary by)
    registers: dict[str, int] = field(default_factory=dict)  # lowered name -> registers per thread
    linked: bool = False  # made by nvJitLink from the module's PTX, compiled once for every arch (_front_end.py)
    variant: str | None = None  # the launch variant built, for a captured one (``entry/index/ndim/vec``)

    @property
    def max_registers(self) -> int | None:
        return max(self.registers.values()) if self.registers else None


@dataclass
class BuildPlan:
    """What a build will do: the units, and the kernels it leaves to a lazy compile (and why)."""

    units: list[BuildUnit]
    skipped: list[tuple[AnySpec, str]]


def plan_build(specs: Iterable[AnySpec], archs: Sequence[str]) -> BuildPlan:
    units: list[BuildUnit] = []
    skipped: list[tuple[AnySpec, str]] = []
    for spec in with_backwards(specs):  # a spec with gradients: its backward kernel too
        if isinstance(spec, RawSpec):
            if spec.is_binary:
                skipped.append((spec, f"precompiled binary {spec.path}"))
                continue
            if spec.tune is not None:  # its default and its record's winners, per arch
                units.extend(tuned_units(spec, archs))
                continue
            bindings: tuple[Mapping[str, str], ...] = ({},)
        else:
            # captured exact specializations only, where a spec lists them and declares no instantiations
            bindings = () if spec.specializations and not spec.instantiations else spec.declared_instantiations()
            if not bindings and not spec.specializations:
                skipped.append((spec, "no instantiations declared: compiled on first call"))
                continue
        tuning = planner_tuning(spec, archs) if not isinstance(spec, RawSpec) and spec.tune is not None else {}
        units.extend(
            BuildUnit(spec, dict(types), arch, scalars, tuning=tuning.get(arch))
            for types in bindings for scalars in scalar_sets(spec) for arch in archs
        )  # fmt: skip
        if not isinstance(spec, RawSpec):
            units.extend(
                BuildUnit(spec, dict(entry.get("types", {})), arch, frozenset(entry.get("scalars", ())),
                          layouts_of(entry), tuning.get(arch), variant)
                for entry in spec.specializations for variant in (variants_of(entry) or (None,)) for arch in archs
            )  # fmt: skip
    return BuildPlan(units, skipped)


def tuned_units(spec: RawSpec, archs: Sequence[str]) -> list[BuildUnit]:
    """A tuned raw spec's configs to compile for each arch: the space's default and the winners of the record
    beside its spec file (kspec/_tuning.py)."""
    from .._tuning import winners

    units: list[BuildUnit] = []
    for arch, entry, facts in _record_sections(spec, archs):
        chosen = [dict(spec.tune["default"])] + [c for c in winners(entry) if c != spec.tune["default"]]
        units.extend(BuildUnit(spec.config_spec(c), {}, arch, frozenset(), tuning=(spec.name, entry, facts)) for c in chosen)
    return units


def planner_tuning(spec: AnySpec, archs: Sequence[str]) -> dict[str, tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """Per arch, the planner entry of an elementwise or reduction spec's record (kspec/_plan_tuning.py) for the
    output's tuning.json: its knobs choose among entries every module holds, so they add no binary. An entry
    tuned for other code (its digest) is left out."""
    from .._plan_tuning import plan_digest

    digest = plan_digest(spec.to_data())
    return {arch: (spec.name, entry, facts) for arch, entry, facts in _record_sections(spec, archs)
            if entry is not None and entry.get("digest") == digest}  # fmt: skip


def _record_sections(spec: AnySpec, archs: Sequence[str]) -> list[tuple[str, dict[str, Any] | None, dict[str, Any]]]:
    """Per arch: the spec's entry in the record beside its spec file (None: none) and the record's facts of that
    arch (device, driver...); a damaged record is a SpecError naming it."""
    from .._tuning import TuningError, kernel_entry, read_record, record_path

    try:
        record = read_record(record_path(spec.origin)) if spec.origin is not None else None
    except TuningError as exc:
        raise SpecError(str(exc), kernel=spec.name, field="tune") from None
    sections = (record or {}).get("archs", {})
    return [(arch, kernel_entry(record, arch, spec.name),
             {k: v for k, v in (sections.get(arch) or {}).items() if k != "kernels"}) for arch in archs]  # fmt: skip


def scalar_sets(spec: AnySpec) -> tuple[frozenset[str], ...]:
    """The scalar choices a build compiles per instantiation: every input an array, and, when the kernel
    mixes placeholder inputs with inputs of a fixed dtype (``T x, T y, float32 scale``), the fixed ones
    passed by value, which is how such kernels are called (``k(x, y, 2.0)``). A kernel whose inputs all have
    fixed dtypes gives no hint of which are scalars, unless its ``scalars`` field names them (kspec.fuse's
    specs do); other calls with a number compile on first use."""
    if isinstance(spec, RawSpec):
        return (frozenset(),)
    if spec.scalars:
        return (frozenset(spec.scalars),)
    inputs = [p for p in spec.in_params if not p.raw]
    fixed = frozenset(p.name for p in inputs if not p.is_placeholder)
    if fixed and len(fixed) < len(inputs):
        return (frozenset(), fixed)
    return (frozenset(),)


def precompile(
    units: Sequence[BuildUnit],
    *,
    jobs: int | None = None,
    cache: BinaryCache | None = None,
    on_result: Callable[[BuildResult], None] | None = None,
    timeout: float | None = DEFAULT_COMPILE_TIMEOUT_S,
    isolate: bool | None = None,
) -> list[BuildResult]:
    """Compile every unit; failures are recorded, not raised.

    Cache hits are served here; each compile runs in a worker process (``isolate``, the default where
    the platform allows it, see :mod:`._workers`), so a kernel that crashes NVRTC or runs past ``timeout``
    seconds (None or 0: no limit) fails alone and the others are kept.
    """
    rendered: dict[tuple[Any, ...], _Rendered | KspecError] = {}
    for unit in units:  # render once per (spec, binding, scalars, raw layouts), whatever the number of archs
        k = unit.memo_key
        if k not in rendered:
            try:
                rendered[k] = _render(unit)
            except KspecError as exc:
                rendered[k] = exc
    store = cache if cache is not None else default_cache()
    front_end = SharedFrontEnd(archs_by_module(units))  # a module's PTX once, linked per arch where it may

    def build(unit: BuildUnit, pool: CompilePool | None) -> BuildResult:
        result = BuildResult(unit)
        entry = rendered[unit.memo_key]
        if isinstance(entry, KspecError):
            result.error = entry
        else:
            module, key, nvrtc_options, specialization, source_key = entry
            result.key = key
            result.source_sha256 = hashlib.sha256(module.source.encode()).hexdigest()
            try:
                if unit.variant is not None:
                    built, program, hit, linked = _variant_compile(unit, module, specialization, store, pool, front_end)
                    result.variant = built.text
                else:
                    program, hit, linked = front_end.compile(
                        cached_compile, store, pool, unit.program_key, unit.arch, name=unit.spec.name,
                        source=module.source, extra=tuple(nvrtc_options), name_expressions=tuple(module.name_expressions),
                        needs=tuple(module.needs), source_key=source_key,
                    )
            except KspecError as exc:
                if fails_as_declared(unit.spec, exc):  # stored, to fail again where it is served
                    result.program = failed_program(exc, unit.arch)
                else:
                    result.error = exc
            else:
                result.program, result.cache_hit, result.linked = program, hit, linked
                result.registers = register_counts(program.binary)
        if on_result is not None:
            on_result(result)
        return result

    # arch by arch: a module's units then run apart, so that its first unit's PTX compile (which the others
    # wait for) overlaps other modules' compiles rather than idling a worker; results in the units' order
    order = sorted(range(len(units)), key=lambda i: (units[i].arch, i))
    results = run_parallel([units[i] for i in order], build, jobs=jobs, timeout=timeout, isolate=isolate)
    by_position = dict(zip(order, results))
    return [by_position[i] for i in range(len(units))]


def fails_as_declared(spec: AnySpec, error: KspecError) -> bool:
    """Whether ``error`` is the compile failure a captured raw spec declares (``compile_fails``): then what the
    build keeps of it is the failure, not an error of the build."""
    return isinstance(spec, RawSpec) and spec.compile_fails and isinstance(error, CompileError)


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def run_parallel(items: Sequence[_Item], work: Callable[[_Item, CompilePool | None], _Result], *, jobs: int | None,
                 timeout: float | None, isolate: bool | None) -> list[_Result]:
    """``work(item, pool)`` for every item on ``jobs`` threads (default: the CPU count, at most 32), the
    results in the items' order. ``pool``: the worker processes the compiles run in (``isolate``, the
    default where the platform allows it), or None to compile in-process on threads with a large stack."""
    workers = jobs or min(32, (os.cpu_count() or 1))
    use_pool = ISOLATED if isolate is None else isolate
    pool = CompilePool(workers, timeout) if use_pool else None
    if workers <= 1 and pool is not None:
        try:
            return [work(item, pool) for item in items]
        finally:
            pool.close()
    previous = threading.stack_size(STACK_BYTES) if pool is None else None  # in-process NVRTC recursion
    executor = ThreadPoolExecutor(max_workers=workers)
    try:
        return list(executor.map(lambda item: work(item, pool), items))
    finally:
        # Workers first: on an interrupt (SIGTERM, Ctrl-C) the threads waiting on them return at once.
        if pool is not None:
            pool.close()
        executor.shutdown(wait=True, cancel_futures=True)
        if previous is not None:
            threading.stack_size(previous)


def cached_compile(cache: BinaryCache, pool: CompilePool | None, *, name: str, source: str | Callable[[], str],
                   options: CompileOptions, name_expressions: tuple[str, ...], needs: tuple[str, ...],
                   source_key: str | None = None) -> tuple[CompiledProgram, bool]:
    """The program behind ``cache`` and whether it was a hit; a miss compiles in ``pool`` (a worker
    process) when given. ``source`` may be a function making it, with the ``source_key`` that determines it
    (see ``compile_cached``): made only on a miss."""
    if pool is None:
        result: tuple[CompiledProgram, bool] = compile_cached(
            source, name=name, options=options, name_expressions=name_expressions, needs=needs, cache=cache,
            source_key=source_key,
        )
        return result
    key = cache_key(None if callable(source) else source, options=options, name_expressions=name_expressions,
                    needs=needs, source_key=source_key)
    program = cache.get(key)
    if program is not None:
        return program, True
    text = source() if callable(source) else source
    program = pool.compile(source=text, name=name, options=options, name_expressions=name_expressions, needs=needs)
    cache.put(key, program, kernel=name)
    return program, False


# A unit's rendered module, its specialization key, the NVRTC options it compiles with, its specialization (None
# for a raw module) and, for a raw module, the key its program is cached under instead of the source text.
_Rendered = tuple[RenderedModule, str, tuple[str, ...], "Specialization | None", "str | None"]


def _render(unit: BuildUnit) -> _Rendered:
    if isinstance(unit.spec, RawSpec):
        module = render_raw(unit.spec)
        # keyed as its kernel object's first call keys its program (raw_program): by what determines its source,
        # so that neither renders on a cache hit
        source_key = raw_source_key(unit.spec.read_source(), unit.spec.translate_cucomplex)
        return module, module.key, tuple(unit.spec.options), None, source_key
    specialization = specialize(unit.spec, unit.types, scalars=unit.scalars, raw_layouts=dict(unit.raw_layouts))
    # the options a lazily compiled call would use (Specialization.nvrtc_options), so both build alike
    return render(specialization), specialization.key, specialization.nvrtc_options, specialization, None


def _variant_compile(unit: BuildUnit, module: RenderedModule, specialization: Specialization | None, cache: BinaryCache,
                     pool: CompilePool | None, front_end: SharedFrontEnd) -> tuple[VariantKey, CompiledProgram, bool, bool]:  # fmt: skip
    """One captured launch variant compiled as a first call compiles it: the program of
    ``kspec.compiler.variant_program``, under its binary-cache key (a build after a capture finds it cached); for
    several archs, its PTX once and a link per arch where the module allows (as for whole modules). Returns the
    variant built too (:func:`built_variant`)."""
    assert unit.variant is not None and specialization is not None
    variant = built_variant(unit, specialization)
    program = variant_program(specialization, unit.arch, (specialization.name_expression(variant),))
    compiled = front_end.compile(cached_compile, cache, pool, unit.program_key, unit.arch, name=program.name,
                                 source=module.source, extra=program.options.extra,
                                 name_expressions=program.name_expressions, needs=program.needs,
                                 source_key=program.source_key)
    return (variant, *compiled)


def built_variant(unit: BuildUnit, specialization: Specialization) -> VariantKey:
    """The module's launch variant a unit's captured variant names (kspec.render.module_variant: another vector
    width where the module now has one), or InstantiationError naming the spec field."""
    assert unit.variant is not None
    variant = module_variant(specialization.variants, VariantKey(*unit.variant))
    if variant is None:
        known = ", ".join(v.text for v in specialization.variants)
        raise InstantiationError(f"{variant_text(unit.variant)} is not a launch variant of this specialization's "
                                 f"module (it has: {known})", file=unit.spec.origin, kernel=unit.spec.name,
                                 field="specializations.variants")
    return variant
