"""``kspec tune`` for elementwise and reduction kernels: the planner's knobs timed on the spec's ``tune.cases``.

For each case (kspec/_plan_tuning.py: every input as a layout or a number, outputs optional, a reduction's
axis): fresh random arrays of those layouts; the call's layout label (``kernel.plan_label``); every knob
combination of the kernel's kind planned for the case (``kernel.with_knobs(...).plan_launch``), one candidate
per distinct launch (entry points, grids and blocks), the planner's own choice first. Each candidate runs once
and its outputs are compared with the rules' (exactly for elementwise kernels; reductions to a tolerance of
their type, as a different split sums in another order), then is timed (kspec/tune/_timing.py). The winner is
the fastest, unless the rules are within NOISE of it: then the rules (knobs ``{}``), so that a record only
moves a layout where the gain is clear.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._named_tuple import NamedTuple
from .._errors import KspecError, KspecValueError
from .._plan_tuning import KNOBS, PLANNER_KEY, knob_label, parse_layout
from ..kernels import ArraySpec
from ..runtime import asarray, empty, get_device
from ._timing import Timer

NOISE = 0.01  # a candidate must beat the rules by more than this share (and their spread) to win
_RTOL = {2: 2e-2, 4: 1e-4, 8: 1e-10}  # reductions: relative tolerance by the outputs' item size


def tune_planner(kernel: Any, table: Mapping[str, Any], deadline: float, options: Any,
                 timer: Timer | None = None) -> dict[str, Any]:  # fmt: skip
    """The record entry of one elementwise or reduction kernel (``kernel``: its object from the spec file,
    ``table``: its spec's data)."""
    timer = timer or Timer()
    cases = list(table["tune"]["cases"])
    buckets: dict[str, Any] = {}
    complete = True
    for k, case in enumerate(cases):
        arguments = _case_arguments(kernel, case)
        label = kernel.plan_label(*arguments.specs, **arguments.plan_kwargs)
        if label is None:
            raise KspecValueError(f"kspec tune: kernel '{kernel.name}': tune.cases[{k}] launches nothing (size 0)")
        if label in buckets:
            options.progress(f"{kernel.name}: tune.cases[{k}] has the layout of an earlier case ({label}): skipped")
            continue
        candidates = _candidates(kernel, arguments.specs, arguments.plan_kwargs)
        results, skipped = _time_candidates(kernel, candidates, arguments, timer, options, deadline)
        complete = complete and not any(s["reason"] == "budget" for s in skipped)
        if not results or results[0][2] != {}:
            raise KspecValueError(f"kspec tune: kernel '{kernel.name}' [{label}]: the planner's own launch failed: "
                                  f"{skipped[0]['reason'] if skipped else 'not timed'}")  # fmt: skip
        rules = results[0]
        ranked = sorted(results, key=lambda r: (r[0], knob_label(r[2])))
        best = ranked[0]
        if best[0] >= rules[0] * (1 - max(NOISE, rules[1])):  # not clearly faster: the rules stay
            best = rules
        runner_up = next((r for r in ranked if r is not best), None)
        data: dict[str, Any] = {"case": dict(case), "candidates": len(candidates), "skipped": skipped,
                                "winner": _timed(best), "default": _timed(rules)}  # fmt: skip
        if runner_up is not None:
            data["runner_up"] = _timed(runner_up)
        buckets[label] = data
        options.progress(f"{kernel.name} [{label}]: {knob_label(best[2])} {best[0]:.4f} ms (rules {rules[0]:.4f} ms, "
                         f"{len(results)} of {len(candidates)} timed)")  # fmt: skip
    return {"key": list(PLANNER_KEY), "default": {}, "cases": cases, "buckets": buckets, "complete": complete}


def _candidates(kernel: Any, specs: Sequence[Any], kwargs: Mapping[str, Any]) -> list[dict[str, int]]:
    """The rules' knobs ({}) and one knob combination per other distinct launch, in the knobs' order."""
    space = KNOBS[kernel.KIND]

    def launches(knobs: dict[str, int]) -> tuple[Any, ...]:
        plan = kernel.with_knobs(knobs).plan_launch(*specs, **kwargs)
        return tuple((step.function, step.grid, step.block, step.params) for step in plan.steps)

    seen = {launches({})}
    found: list[dict[str, int]] = [{}]
    for values in itertools.product(*space.values()):
        knobs = dict(zip(space, values))
        signature = launches(knobs)
        if signature not in seen:
            seen.add(signature)
            for knob in list(knobs):  # only the knobs that make this launch (a record that reads clearly)
                fewer = {k: v for k, v in knobs.items() if k != knob}
                if launches(fewer) == signature:
                    knobs = fewer
            found.append(knobs)
    return found


def _time_candidates(kernel: Any, candidates: Sequence[dict[str, int]], case: "_Case", timer: Timer, options: Any,
                     deadline: float) -> tuple[list[tuple[float, float, dict[str, int]]], list[dict[str, Any]]]:  # fmt: skip
    """Each candidate's (median ms, spread, knobs), the rules' first, and the candidates skipped with why. Before
    a candidate's checked launch its outputs are poisoned (all bits set: NaN for floats), so an element it leaves
    unwritten differs from the rules' results."""
    results: list[tuple[float, float, dict[str, int]]] = []
    skipped: list[dict[str, Any]] = []
    reference: list[Any] | None = None
    rtol = 0.0 if kernel.KIND == "elementwise" else _RTOL.get(max(b.dtype.itemsize for b in case.out_bases), 1e-4)
    for knobs in candidates:
        if time.perf_counter() > deadline and knobs:
            skipped.append({"config": knobs, "reason": "budget"})
            continue
        twin = kernel.with_knobs(knobs)

        def launch(stream: Any, twin: Any = twin) -> None:
            twin(*case.args, stream=stream, **case.kwargs)

        try:
            for base in case.out_bases:
                timer.poison(base)
            launch(timer.stream)
            timer.synchronize()
        except KspecError as exc:
            skipped.append({"config": knobs, "reason": f"launch: {str(exc).splitlines()[0][:300]}"})
            continue
        if reference is None:
            reference = [base.copy(stream=timer.stream) for base in case.out_bases]
        elif any(_mismatches(base, want, rtol, timer.stream) for base, want in zip(case.out_bases, reference)):
            skipped.append({"config": knobs, "reason": "results differ from the rules' launch"})
            continue
        ms, spread, _ = timer.time(launch, options.warmup, options.reps)
        results.append((ms, spread, knobs))
    return results, skipped


_COUNT: list[Any] = []  # the mismatch counter (a kspec reduction), made on first use


def _mismatches(got: Any, want: Any, rtol: float, stream: Any) -> int:
    """Elements of ``got`` that differ from ``want`` (NaN equal to NaN; reductions within ``rtol``), counted on
    the device: outputs are GBs."""
    if not _COUNT:
        from ..kernels import ReductionKernel

        _COUNT.append(ReductionKernel(
            "T got, T want, float64 rtol", "int64 n",
            "(got == want || (got != got && want != want) || abs((double)got - (double)want) <= rtol * abs((double)want)) ? 0 : 1",
            "a + b", "n = a", "0", "kspec_tune_mismatches"))  # fmt: skip
    return int(_COUNT[0](got, want, rtol, stream=stream).get()[()])


class _Case(NamedTuple):
    args: list[Any]  # inputs, then every output (given: allocated here as the call would)
    kwargs: dict[str, Any]
    specs: list[Any]  # the arguments as ArraySpecs (numbers as they are): what plan_label and plan_launch take
    plan_kwargs: dict[str, Any]  # the keywords, a reduction's ``out`` as an ArraySpec
    out_bases: list[Any]  # the outputs' C-contiguous memory (a permuted output's base)


def _case_arguments(kernel: Any, case: Mapping[str, Any]) -> _Case:
    """One case's arguments: random arrays of its layouts on the current device, numbers as given, and its
    outputs, allocated C-contiguous where it does not give them (so that a check sees every element written)."""
    spec = kernel.spec
    given = case["args"]
    outs = [p.name for p in spec.out_params]
    if any(n in given for n in outs) and not all(n in given for n in outs):
        missing = [n for n in outs if n not in given]
        raise KspecValueError(f"kspec tune: kernel '{kernel.name}': a case that gives outputs gives all of them ({', '.join(missing)} missing)")
    rng = np.random.default_rng()
    device_id = get_device().id
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in case.items() if k != "args"}
    values: dict[str, tuple[Any, Any, Any]] = {}  # name -> (argument, ArraySpec or number, base)
    for name in [p.name for p in spec.in_params] + [n for n in outs if n in given]:
        value = given[name]
        if not isinstance(value, str):
            values[name] = (value, value, None)
            continue
        layout = parse_layout(value, f"tune.cases.args.{name}")
        dtype = np.dtype(layout.dtype)
        if dtype.kind in "fc":
            host = rng.standard_normal(layout.shape).astype(dtype)
        else:
            host = rng.integers(0, 2 if dtype.kind == "b" else 100, layout.shape).astype(dtype)
        base = asarray(host)
        array = base if layout.perm is None else asarray(_View(base, layout.perm))
        values[name] = (array, ArraySpec(array.shape, layout.dtype, device_id=device_id, strides=array.strides), base)
    inputs = [p.name for p in spec.in_params]
    specs = [values[n][1] for n in inputs]
    if not all(n in values for n in outs):  # allocated as the call would: C-contiguous, the call's shape
        for n, out in zip(outs, kernel.output_specs(*specs, **kwargs)):
            base = empty(out.shape, out.dtype)
            values[n] = (base, out, base)
    args = [values[n][0] for n in inputs]
    plan_kwargs = dict(kwargs)
    if kernel.KIND == "elementwise":
        args += [values[n][0] for n in outs]
        specs += [values[n][1] for n in outs]
    else:  # a reduction's output goes by keyword
        kwargs["out"], plan_kwargs["out"] = values[outs[0]][0], values[outs[0]][1]
    return _Case(args, kwargs, specs, plan_kwargs, [values[n][2] for n in outs])


class _View:
    """A permuted view of a device array, as ``__cuda_array_interface__`` (kspec arrays do no views)."""

    def __init__(self, base: Any, perm: Sequence[int]) -> None:
        self._base = base
        self.__cuda_array_interface__ = {
            "shape": tuple(base.shape[p] for p in perm), "strides": tuple(base.strides[p] for p in perm),
            "typestr": base.dtype.str, "data": (int(base.ptr), False), "version": 3,
        }  # fmt: skip


def _timed(result: tuple[float, float, dict[str, int]]) -> dict[str, Any]:
    ms, spread, knobs = result
    return {"config": knobs, "ms": round(ms, 5), "spread": round(spread, 4)}
