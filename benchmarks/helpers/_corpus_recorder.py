"""pytest plugin for the GPU machine: what CuPy's cupyx.scipy suites build, and what compiling it costs.

Loaded next to ``../shared/peer/kspec_alias.py`` when the ``client`` suites run (``benchmarks/clients/client_suites.sh``):

* ``KSPEC_CORPUS=DIR`` with CuPy itself running (no ``KSPEC_PEER``): every ElementwiseKernel, ReductionKernel,
  RawKernel and RawModule that CuPy's library code constructs, and each distinct call signature (argument dtypes
  and ndims, scalar types) or RawModule function name, one JSON line each, to ``DIR/corpus-<pid>.jsonl`` --
  the corpus that ``benchmarks/clients/cupy_corpus.py`` compiles with kspec.
* ``KSPEC_COMPILE_STATS=DIR`` in either mode: after each test, the compiles its process has run so far and their
  seconds (CuPy: its NVRTC calls; kspec: the compile log's 'compiled' loads) to ``DIR/compile-<mode>-<pid>.json``
  (rewritten after every test, so a run cut at its time limit still leaves its figures);
  ``python3 benchmarks/helpers/_corpus_recorder.py DIR`` sums them per mode.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import numpy

_KSPEC = os.environ.get("KSPEC_PEER") == "1"
_CORPUS = os.environ.get("KSPEC_CORPUS")
_STATS = os.environ.get("KSPEC_COMPILE_STATS")
_cupy_compiles = [0, 0.0]  # count, seconds


def _install_cupy_compile_timer() -> None:
    import cupy.cuda.compiler as compiler

    real = compiler._NVRTCProgram.compile  # every NVRTC compile CuPy runs (its cache misses)

    def timed(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            _cupy_compiles[0] += 1
            _cupy_compiles[1] += time.perf_counter() - t0

    compiler._NVRTCProgram.compile = timed


def _write_stats() -> None:
    if _KSPEC:
        import kspec

        loads = [e for e in kspec.compile_log() if e.source == "compiled"]
        stats = {"mode": "kspec", "compiles": len(loads), "seconds": sum(e.ms for e in loads) / 1e3}
    else:
        stats = {"mode": "cupy", "compiles": _cupy_compiles[0], "seconds": _cupy_compiles[1]}
    os.makedirs(_STATS, exist_ok=True)
    path = os.path.join(_STATS, f"compile-{stats['mode']}-{os.getpid()}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(stats, f)
    os.replace(path + ".tmp", path)  # a process killed mid-write leaves the last whole figures


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:  # noqa: ARG001 (pytest's hook signature)
    if _STATS:
        _write_stats()


def pytest_sessionfinish(session: Any) -> None:  # noqa: ARG001
    if _STATS:
        _write_stats()


def summarize(directory: str) -> dict[str, tuple[int, int, float]]:
    """mode -> (processes, compiles, seconds) over the ``compile-*.json`` files of ``directory``."""
    totals: dict[str, list] = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("compile-") and name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                stats = json.load(f)
            row = totals.setdefault(stats["mode"], [0, 0, 0.0])
            row[0] += 1
            row[1] += stats["compiles"]
            row[2] += stats["seconds"]
    return {mode: (n, c, s) for mode, (n, c, s) in totals.items()}


class _Recorder:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.out: Any = None
        self.seen: set[str] = set()

    def emit(self, rec: dict) -> None:
        line = json.dumps(rec, sort_keys=True, default=repr)
        if line in self.seen:
            return
        self.seen.add(line)
        if self.out is None:
            os.makedirs(self.directory, exist_ok=True)
            self.out = open(os.path.join(self.directory, f"corpus-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
        self.out.write(line + "\n")
        self.out.flush()

    def constructor(self, kind: str, args: tuple, kwargs: dict) -> str:
        rec = {"kind": kind, "args": [list(a) if isinstance(a, tuple) else a for a in args],
               "kwargs": {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}}
        rec["id"] = hashlib.sha1(json.dumps(rec, sort_keys=True, default=repr).encode()).hexdigest()[:16]
        self.emit(rec)
        return rec["id"]


def _describe(a: Any) -> dict:
    import cupy

    if isinstance(a, cupy.ndarray):
        return {"a": str(a.dtype), "nd": a.ndim, "c": bool(a.flags.c_contiguous)}
    if isinstance(a, numpy.ndarray):
        return {"n": str(a.dtype), "nd": a.ndim}
    if isinstance(a, numpy.generic):
        return {"s": str(a.dtype), "v": repr(a.item())}
    if isinstance(a, (bool, int, float, complex)):
        return {"p": type(a).__name__, "v": repr(a)}
    if a is None:
        return {"none": True}
    return {"o": type(a).__name__}


def _install_recorder(directory: str) -> None:
    """Replace CuPy's constructors (as cupy.X and cupy._core.X, where cupyx.scipy looks them up) by recording
    proxies around the real ones."""
    import cupy
    import cupy._core as core

    rec = _Recorder(directory)

    class _Proxy:
        kind = ""
        real: Any = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            object.__setattr__(self, "_kernel", type(self).real(*args, **kwargs))
            object.__setattr__(self, "_id", rec.constructor(self.kind, args, kwargs))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._kernel, name)

    class ElementwiseKernel(_Proxy):
        kind, real = "elementwise", core.ElementwiseKernel

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            rec.emit({"call": self._id, "args": [_describe(a) for a in args],
                      "kwargs": {k: _describe(v) for k, v in kwargs.items() if k != "stream"}})
            return self._kernel(*args, **kwargs)

    class ReductionKernel(ElementwiseKernel):
        kind, real = "reduction", core.ReductionKernel

    class RawKernel(_Proxy):
        kind, real = "rawkernel", core.RawKernel

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self._kernel(*args, **kwargs)

    class RawModule(_Proxy):
        kind, real = "rawmodule", core.RawModule

        def get_function(self, name: str) -> Any:
            rec.emit({"fn": self._id, "name": name})
            return self._kernel.get_function(name)

    for cls in (ElementwiseKernel, ReductionKernel, RawKernel, RawModule):
        setattr(cupy, cls.__name__, cls)
        setattr(core, cls.__name__, cls)


if __name__ == "__main__":
    import sys

    print("| mode | processes | compiles | seconds | seconds per compile |\n|---|---|---|---|---|")
    for mode, (n, c, sec) in summarize(sys.argv[1]).items():
        print(f"| {mode} | {n} | {c} | {sec:.1f} | {sec / max(c, 1):.3f} |")
elif not _KSPEC:
    if _STATS:
        _install_cupy_compile_timer()
    if _CORPUS:
        _install_recorder(_CORPUS)
