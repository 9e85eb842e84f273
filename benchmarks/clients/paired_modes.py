"""kspec's and CuPy's kernels timed side by side in one process, for ``cupyx_scipy.py --paired`` (and the timing
of a call both that script's processes use).

The modes switch every few calls (``kspec.cupy.enable()`` / ``disable()``, each clearing CuPy's memo of built
kernels, so that CuPy's routines build theirs anew with the constructors now in place). cupyx's Python modules are
imported once under each mode and the two copies swapped in with it: some of cupyx.scipy's build kernels when
imported (``lfilter``'s ``IIR_MODULE``, ``resample_poly``'s ``UPFIRDN_MODULE``), and those must be the mode's own.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from types import ModuleType
from typing import Any, Callable

MODES = ("kspec", "cupy")


def _scipy_modules() -> dict[str, ModuleType]:
    """cupyx's Python modules but cupyx.jit's (kspec.cupy swaps its names itself): cupyx.scipy's, and those that
    hold its classes (``cupyx.cusparse`` checks a matrix against the ``csr_matrix`` it imported)."""
    return {n: m for n, m in sys.modules.items() if n.startswith("cupyx.") and not n.startswith("cupyx.jit")
            and str(getattr(m, "__file__", "")).endswith(".py")}


def _install(modules: dict[str, ModuleType]) -> None:
    for name in _scipy_modules():
        del sys.modules[name]
    sys.modules.update(modules)
    package = sys.modules["cupyx"]
    for name, module in modules.items():  # `cupyx.scipy.sparse...` looked up through the package finds this copy
        parent, _, child = name.rpartition(".")
        if parent == "cupyx":
            setattr(package, child, module)


def _switch(mode: str, modules: dict[str, ModuleType]) -> None:
    import kspec.cupy

    _install(modules)
    if mode == "kspec":
        kspec.cupy.enable()
    else:
        kspec.cupy.disable()


def timed_calls(cp: Any, fn: Callable[[Any], Any], inputs: list[Any], reps: int) -> tuple[list[float], list[float]]:
    """(device seconds, host seconds) of ``reps`` calls over the rotating ``inputs``, each from an idle GPU."""
    device, host = [], []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for r in range(reps):
        start.record()
        t0 = time.perf_counter()
        fn(inputs[r % len(inputs)])
        host.append(time.perf_counter() - t0)
        end.record()
        end.synchronize()
        device.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return device, host


def error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"


def paired_child(cases: Callable[[Any], dict[str, tuple[Callable[[Any], Any], Callable[[int], Any]]]],
                 reps: int, blocks: int, only: list[str], kspec_first: bool) -> None:
    """Print {mode: {name: {"device": [...], "host": [...]} or {"error": ...}}}: ``blocks`` blocks of ``reps`` calls of
    every function, the modes alternating, each block after two untimed calls."""
    import cupy as cp

    made, modules = {}, {}
    for mode in MODES:
        _switch(mode, {})  # cupyx.scipy imported afresh under this mode
        made[mode] = cases(cp)
        modules[mode] = _scipy_modules()
    results: dict[str, dict[str, Any]] = {mode: {} for mode in MODES}
    for name in made["kspec"]:
        if only and not any(o in name for o in only):
            continue
        inputs = [made["kspec"][name][1](k) for k in range(3)]
        got: dict[str, tuple[list[float], list[float]]] = {mode: ([], []) for mode in MODES}
        try:
            for block in range(blocks):
                mode = "kspec" if (block % 2 == 0) == kspec_first else "cupy"
                _switch(mode, modules[mode])
                fn = made[mode][name][0]
                for k in range(2):  # the switch cleared CuPy's memo: its kernels are built (or loaded) again here
                    fn(inputs[k])
                device, host = timed_calls(cp, fn, inputs, reps)
                got[mode][0].extend(device)
                got[mode][1].extend(host)
            for mode, (device, host) in got.items():
                results[mode][name] = {"device": device, "host": host}
        except Exception as exc:  # noqa: BLE001 (the table says which failed, and why)
            for mode in MODES:
                results[mode][name] = {"error": error_text(exc)}
    _switch("cupy", modules["cupy"])
    print(json.dumps(results))


def warm_columns(both: list[dict[str, dict]], name: str) -> tuple[str, float]:
    """The warm cells of ``name`` from the processes of both modes (device ms | kspec | ratio | host ms | kspec |
    ratio: medians over all calls; each ratio the median over processes of the process's ratio of medians, with
    their range), and the device ratio (NaN where a process failed the function)."""
    got = [(b["cupy"].get(name, {}), b["kspec"].get(name, {})) for b in both]
    if not got or any("device" not in c or "device" not in k for c, k in got):
        error = next((r["error"] for pair in got for r in pair if "error" in r), "missing")
        return f"{error} | | | | |", float("nan")
    cells, device_ratio = [], float("nan")
    for kind in ("device", "host"):
        c = statistics.median(x for g, _ in got for x in g[kind]) * 1e3
        k = statistics.median(x for _, g in got for x in g[kind]) * 1e3
        each = sorted(statistics.median(kg[kind]) / statistics.median(cg[kind]) for cg, kg in got)
        ratio = statistics.median(each)
        if kind == "device":
            device_ratio = ratio
        spread = f" ({each[0]:.2f}-{each[-1]:.2f})" if len(each) > 1 else ""
        cells.append(f"{c:.3f} | {k:.3f} | {ratio:.2f}{spread}")
    return " | ".join(cells), device_ratio
