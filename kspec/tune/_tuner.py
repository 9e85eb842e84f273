"""``kspec tune``: time every config of each tuned raw spec per key bucket (elementwise and reduction specs with
``tune.cases``: kspec/tune/_planner.py), and write the record.

For each spec file: its tuned raw specs (a ``tune`` table); for each, every config its constraints allow,
compiled in parallel (a config that fails to compile is skipped with the compiler's reason); for each shape
(the spec's ``shapes`` or ``--shapes``), fresh random inputs, each config launched once on a copy of them and
its arrays compared with the default's (a config whose results differ, or that fails to launch — too many
threads, too much shared memory — is skipped with the reason), then timed (kspec/tune/_timing.py). The record
(kspec/_tuning.py) keeps per bucket the winner, the runner-up and the default with their times, beside the
spec file, written atomically. An entry whose digest (code, options, space) and buckets are already there for
this arch is kept as it is unless ``force``. ``budget`` (seconds, the whole run) stops timing where it runs
out: the configs left are recorded as skipped ("budget"), the entry as incomplete.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import write_atomic
from .._errors import KspecError, KspecValueError
from .._plan_tuning import plan_digest
from .._tuning import (
    RECORD_FORMAT,
    bucket_label,
    config_label,
    configs,
    dumps,
    kernel_entry,
    parse_arg,
    read_record,
    record_path,
    space_digest,
)
from ..kernels import TunedKernel
from ..runtime import asarray, driver_description, get_device
from ._planner import tune_planner
from ._timing import Timer


@dataclass
class TuneOptions:
    """What ``kspec tune`` does: ``shapes`` (key values each, used for the kernels whose keys they give; the
    others take their spec's ``shapes``), ``budget`` seconds for the
    whole run, ``force`` (re-tune entries already up to date), ``warmup`` / ``reps`` per config, ``jobs``
    (parallel compiles)."""

    shapes: Sequence[Mapping[str, int]] | None = None
    budget: float = 300.0
    force: bool = False
    warmup: int = 3
    reps: int = 15
    jobs: int = 8
    arch: str | None = None  # checked against the GPU's: a record is made on a GPU of its arch
    progress: Callable[[str], None] = print


@dataclass
class TuneReport:
    """What one run did: per kernel, "tuned", "up to date" or "incomplete"; the records written."""

    kernels: dict[str, str] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def tune_files(paths: Iterable[str | Path], options: TuneOptions | None = None) -> TuneReport:
    """Tune every tuned raw spec of these spec files on the current GPU; write each file's record."""
    from ..kernels import load

    options = options or TuneOptions()
    start = time.perf_counter()
    deadline = start + options.budget
    report = TuneReport()
    arch = get_device().arch
    if options.arch is not None and options.arch != arch:
        raise KspecValueError(f"--arch {options.arch}: this GPU is {arch}; a record is made on a GPU of its arch")
    for path in paths:
        path = Path(path)
        kernels = load(path)
        tuned = [kernels.spec(name) for name in kernels if getattr(kernels.spec(name), "tune", None) is not None]
        if not tuned:
            continue
        target = record_path(path)
        record = read_record(target) or {"format": RECORD_FORMAT, "archs": {}}
        section = record["archs"].setdefault(arch, {"kernels": {}})
        changed = False
        for spec in tuned:
            table = spec.to_data()
            old = kernel_entry(record, arch, spec.name)
            if spec.KIND != "raw":  # elementwise and reduction kernels: the planner's knobs on tune.cases
                digest = plan_digest(table)
                current = old is not None and old.get("cases") == table["tune"]["cases"]
            else:
                digest = space_digest(table)
                shapes = _raw_shapes(spec, options)
                labels = [bucket_label(spec.tune["key"], [s[k] for k in spec.tune["key"]]) for s in shapes]
                current = old is not None and all(label in old.get("buckets", {}) for label in labels)
            if current and not options.force and old.get("digest") == digest and old.get("complete"):  # type: ignore[union-attr]
                report.kernels[spec.name] = "up to date"
                options.progress(f"{spec.name}: up to date for {arch}")
                continue
            if spec.KIND != "raw":
                entry = tune_planner(kernels[spec.name], table, deadline, options)
            else:
                entry = _tune_kernel(kernels[spec.name], spec.tune, shapes, deadline, options)
            entry["digest"] = digest
            if old is not None and old.get("digest") == digest:  # buckets tuned before and not now stay
                entry["buckets"] = {**old.get("buckets", {}), **entry["buckets"]}
            section["kernels"][spec.name] = entry
            report.kernels[spec.name] = "tuned" if entry["complete"] else "incomplete"
            changed = True
        if changed:
            section.update(device=get_device().name, driver=driver_description() or "unknown", kspec=_version(),
                           tuned=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))  # fmt: skip
            write_atomic(target, dumps(record).encode())
            report.written.append(target)
    report.seconds = time.perf_counter() - start
    return report


def _raw_shapes(spec: Any, options: TuneOptions) -> list[dict[str, int]]:
    """The key values a tuned raw spec is timed for: the --shapes that give its keys, else its spec's shapes."""
    key = set(spec.tune["key"])
    given = [dict(s) for s in options.shapes or () if set(s) == key]
    shapes = given or [dict(s) for s in spec.tune.get("shapes") or ()]
    if not shapes:
        raise KspecValueError(f"kspec tune: kernel '{spec.name}' has no shapes: give tune.shapes in its spec or --shapes")
    return shapes


def _tune_kernel(kernel: TunedKernel, tune: Mapping[str, Any], shapes: list[dict[str, int]], deadline: float,
                 options: TuneOptions) -> dict[str, Any]:  # fmt: skip
    default = dict(tune["default"])
    candidates = [default] + [c for c in configs(tune) if c != default]
    skipped: dict[str, str] = {}

    def build(config: dict[str, int]) -> None:
        try:
            kernel.kernel_for(config).compile()
        except KspecError as exc:
            skipped[config_label(config)] = f"compile: {str(exc).splitlines()[0][:300]}"

    compile_start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        list(pool.map(build, candidates))
    options.progress(f"{kernel.name}: {len(candidates)} configs compiled in {time.perf_counter() - compile_start:.1f} s"
                     f" ({len(skipped)} failed)")  # fmt: skip
    if config_label(default) in skipped:
        raise KspecValueError(f"kspec tune: kernel '{kernel.name}': the default config does not compile: "
                              f"{skipped[config_label(default)]}")  # fmt: skip
    timer = Timer()
    buckets: dict[str, Any] = {}
    complete = True
    for shape in shapes:
        key_values = [shape[k] for k in tune["key"]]
        label = bucket_label(tune["key"], key_values)
        results, shape_skipped = time_shape(kernel, shape, candidates, skipped, timer, options, deadline)
        complete = complete and not any(s["reason"] == "budget" for s in shape_skipped)
        ranked = sorted(results, key=lambda r: (r[0], config_label(r[2])))
        default_ms = next((r for r in results if r[2] == default), None)
        data: dict[str, Any] = {"shape": dict(shape), "candidates": len(candidates), "skipped": shape_skipped}
        if ranked:
            data["winner"] = _timed(ranked[0])
            if len(ranked) > 1:
                data["runner_up"] = _timed(ranked[1])
        if default_ms is not None:
            data["default"] = _timed(default_ms)
        if ranked:
            buckets[label] = data
            best = data["winner"]
            options.progress(f"{kernel.name} [{label}]: {config_label(best['config'])} {best['ms']:.4f} ms "
                             f"(default {data.get('default', {}).get('ms', float('nan')):.4f} ms, {len(results)} timed)")  # fmt: skip
    return {"key": list(tune["key"]), "default": default, "buckets": buckets, "complete": complete}


def time_shape(kernel: TunedKernel, shape: Mapping[str, int], candidates: Sequence[dict[str, int]],
               skipped: Mapping[str, str], timer: Timer, options: TuneOptions,
               deadline: float = float("inf")) -> tuple[list[tuple[float, float, dict[str, int]]], list[dict[str, Any]]]:  # fmt: skip
    """Each candidate's (median ms, spread, config) on fresh random arguments of one shape, and the candidates
    skipped with their reasons (``skipped``: those that did not compile; then a failed launch, results other
    than the first candidate's, or the ``deadline`` passed)."""
    tune = kernel.space
    key_values = [shape[k] for k in tune["key"]]
    pristine = _arguments(tune["args"], shape)
    reference: list[np.ndarray] | None = None
    results: list[tuple[float, float, dict[str, int]]] = []
    out_skipped = [{"config": c, "reason": r} for c in candidates if (r := skipped.get(config_label(c)))]
    for config in candidates:
        if config_label(config) in skipped:
            continue
        if time.perf_counter() > deadline:
            out_skipped.append({"config": config, "reason": "budget"})
            continue
        args = [a.copy() if hasattr(a, "copy") else a for a in pristine]
        grid, block, shared = kernel.launch_config(config, key_values)
        raw = kernel.kernel_for(config)

        def launch(stream: Any, raw: Any = raw, args: list[Any] = args, grid: Any = grid, block: Any = block,
                   shared: int = shared) -> None:  # fmt: skip
            raw(grid, block, args, shared_mem=shared, stream=stream)

        try:
            launch(timer.stream)
            timer.synchronize()
        except KspecError as exc:
            out_skipped.append({"config": config, "reason": f"launch: {str(exc).splitlines()[0][:300]}"})
            continue
        got = [a.get() for a in args if hasattr(a, "get")]
        if reference is None:
            reference = got
        elif not all(np.array_equal(g, r, equal_nan=True) for g, r in zip(got, reference)):
            out_skipped.append({"config": config, "reason": "results differ from the default config's"})
            continue
        ms, spread, _ = timer.time(launch, options.warmup, options.reps)
        results.append((ms, spread, config))
    return results, out_skipped


def _timed(result: tuple[float, float, dict[str, int]]) -> dict[str, Any]:
    ms, spread, config = result
    return {"config": config, "ms": round(ms, 5), "spread": round(spread, 4)}


def _arguments(args: Sequence[str], shape: Mapping[str, int]) -> list[Any]:
    """Fresh arguments for one shape: random arrays of the declared dtypes and dims, the keys' ints."""
    rng = np.random.default_rng()
    out: list[Any] = []
    for k, text in enumerate(args):
        name, dtype, dims = parse_arg(text, k)
        if dims is None:
            out.append(getattr(np, dtype)(shape[name]))
            continue
        extents = tuple(d if isinstance(d, int) else shape[d] for d in dims)
        if np.dtype(dtype).kind == "f":
            host = rng.standard_normal(extents).astype(dtype)
        else:
            host = rng.integers(0, 100, extents).astype(dtype)
        out.append(asarray(host))
    return out


def _version() -> str:
    from .._version import __version__

    return __version__
