"""Every kernel CuPy's own code builds, compiled by kspec: a check and a timing.

The corpus is recorded on the GPU machine by ``benchmarks/helpers/_corpus_recorder.py`` (a pytest plugin) while CuPy runs
its own test suites, any of ``../shared/peer``'s five groups (``benchmarks/clients/peer_groups.sh cupy ...`` with
``KSPEC_CORPUS=DIR``: core, fusejit, client = cupyx.scipy ndimage / interpolate / signal, cupyx = sparse, fft,
linalg, spatial, stats, cupyx.signal, and cupy = CuPy's whole library): one JSON line per kernel constructor call
(kind, arguments) and per distinct call signature of it (argument dtypes and ndims, Python scalar types) or
RawModule function name. Kernel sources stay outside the repository (they are CuPy's code).

    python3 benchmarks/clients/cupy_corpus.py check CORPUS [--arch sm_90] [--jobs 2]   # no GPU: what fails, grouped by error
    python3 benchmarks/clients/cupy_corpus.py time CORPUS [--arch sm_90] [--jobs N]    # cold and warm build of the corpus

``check`` is the quick way to see which of CuPy's real kernels kspec cannot compile (the first NVRTC error line of
each, counted). ``time`` builds the whole corpus with an empty kspec cache and again warm, and, where CuPy is
installed, the raw kernels with CuPy's NVRTC path with an empty CuPy cache (CuPy compiles elementwise kernels only
when launched: their cold time comes from the suite run, ``_corpus_recorder.py`` records CuPy's NVRTC seconds).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np


def read_corpus(path: str) -> tuple[dict[str, dict], dict[str, list], dict[str, list]]:
    """(constructors by id, call signatures by kernel id, RawModule function names by module id)."""
    opener = gzip.open if path.endswith(".gz") else open
    ctors: dict[str, dict] = {}
    calls: dict[str, list] = collections.defaultdict(list)
    fns: dict[str, list] = collections.defaultdict(list)
    seen_calls: set[str] = set()
    with opener(path, "rt") as f:
        for line in f:
            rec = json.loads(line)
            if "kind" in rec:
                ctors[rec["id"]] = rec
            elif "call" in rec:
                sig = json.dumps([_type_of(a) for a in rec["args"]] + sorted((k, json.dumps(_type_of(v))) for k, v in rec["kwargs"].items()))
                if (rec["call"], sig) not in seen_calls:
                    seen_calls.add((rec["call"], sig))
                    calls[rec["call"]].append(rec)
            elif "fn" in rec:
                if rec["name"] not in fns[rec["fn"]]:
                    fns[rec["fn"]].append(rec["name"])
    return ctors, calls, fns


def _type_of(desc: dict) -> Any:
    """What of an argument decides the specialization: array dtype and ndim, scalar type."""
    if "a" in desc or "n" in desc:
        return ["array", desc.get("a") or desc.get("n"), desc["nd"]]
    if "s" in desc:
        return ["npscalar", desc["s"]]
    if "p" in desc:
        return ["py", desc["p"]]
    return [next(iter(desc))]


def _stand_in(desc: dict) -> Any:
    if "a" in desc or "n" in desc:
        return np.empty((1,) * desc["nd"], dtype=desc.get("a") or desc.get("n"))
    if "s" in desc:
        return np.dtype(desc["s"]).type(eval(desc["v"], {"inf": np.inf, "nan": np.nan}))  # noqa: S307 (our own repr)
    if "p" in desc:
        return eval(desc["v"], {"inf": float("inf"), "nan": float("nan")})  # noqa: S307
    if "none" in desc:
        return None
    if desc.get("o") in ("TextureObject", "SurfaceObject"):  # passed by value as its 64-bit handle: the type decides
        return _HANDLE_TYPES[desc["o"]](0)
    raise ValueError(f"cannot stand in for {desc}")


class _Handle:
    """A texture or surface object as a compile sees it: kspec takes any ``TextureObject`` / ``SurfaceObject`` of
    kspec's or CuPy's with an int ``ptr`` (kspec/runtime/_interop.py), and compiling needs no device."""

    __module__ = "kspec.corpus"

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


_HANDLE_TYPES = {name: type(name, (_Handle,), {"__module__": "kspec.corpus"}) for name in ("TextureObject", "SurfaceObject")}


def _tuple_args(rec: dict) -> tuple[list, dict]:
    args = [tuple(a) if isinstance(a, list) else a for a in rec["args"]]
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in rec["kwargs"].items()}
    return args, kwargs


def compile_one(job: tuple[dict, list, list, str]) -> list[tuple[str, str, float]]:
    """Compile one constructor's kernels for ``arch``: [(what, error or "", seconds)]."""
    import kspec

    ctor, calls, fns, arch = job
    args, kwargs = _tuple_args(ctor)
    out = []
    t0 = time.perf_counter()
    try:
        if ctor["kind"] in ("elementwise", "reduction"):
            cls = kspec.ElementwiseKernel if ctor["kind"] == "elementwise" else kspec.ReductionKernel
            kernel = cls(*args, **kwargs)
            for call in calls:
                what = f"{kernel.name}({', '.join(json.dumps(_type_of(a)) for a in call['args'])})"
                t1 = time.perf_counter()
                try:
                    kernel.compile(*[_stand_in(a) for a in call["args"]], arch=arch)
                    out.append((what, "", time.perf_counter() - t1))
                except Exception as exc:  # noqa: BLE001 (a report of every failure is the point)
                    out.append((what, _first_error(exc), time.perf_counter() - t1))
        elif ctor["kind"] == "rawkernel":
            kernel = kspec.RawKernel(*args, **kwargs)
            kernel.compile(arch=arch)
            out.append((f"RawKernel {kernel.name}", "", time.perf_counter() - t0))
        else:
            module = kspec.RawModule(*args, **kwargs)
            module.compile(arch=arch)
            out.append((f"RawModule {sorted(fns)[:2]}", "", time.perf_counter() - t0))
    except Exception as exc:  # noqa: BLE001
        out.append((f"{ctor['kind']} {ctor['id']}", _first_error(exc), time.perf_counter() - t0))
    return out


def _first_error(exc: BaseException) -> str:
    text = str(exc)
    for line in text.splitlines():
        m = re.search(r"(?:catastrophic )?error: (.*)", line)
        if m:
            return "NVRTC: " + m.group(1).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:200]


def _jobs(path: str, arch: str, kinds: set[str] | None) -> list[tuple[dict, list, list, str]]:
    ctors, calls, fns = read_corpus(path)
    return [(c, calls.get(i, []), fns.get(i, []), arch) for i, c in ctors.items() if kinds is None or c["kind"] in kinds]


def check(args: argparse.Namespace) -> int:
    jobs = _jobs(args.corpus, args.arch, set(args.kinds.split(",")) if args.kinds else None)
    failures: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    total = ok = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for results in pool.map(compile_one, jobs, chunksize=4):
            for what, error, _seconds in results:
                total += 1
                if error:
                    key = re.sub(r"\d+", "N", error)[:160]
                    failures[key] += 1
                    example.setdefault(key, what)
                else:
                    ok += 1
    print(f"{ok} of {total} kernels compiled ({len(jobs)} constructors, arch {args.arch})")
    for key, n in failures.most_common(args.top):
        print(f"{n:6d}  {key}\n        e.g. {example[key][:150]}")
    return 0 if ok == total else 1


def timing(args: argparse.Namespace) -> int:
    jobs = _jobs(args.corpus, args.arch, None)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["KSPEC_CACHE_DIR"] = cache
        rows = []
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            n = bad = 0
            with ProcessPoolExecutor(args.jobs) as pool:
                for results in pool.map(compile_one, jobs, chunksize=4):
                    n += len(results)
                    bad += sum(1 for r in results if r[1])
            rows.append((f"kspec {label}", n, bad, time.perf_counter() - t0))
    print(f"| build of the corpus ({len(jobs)} constructors, arch {args.arch}, {args.jobs} processes) | kernels | failed | seconds |")
    print("|---|---|---|---|")
    for label, n, bad, seconds in rows:
        print(f"| {label} | {n} | {bad} | {seconds:.1f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("check", "time"):
        p = sub.add_parser(name)
        p.add_argument("corpus")
        p.add_argument("--arch", default="sm_90")
        p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
        p.add_argument("--kinds", default="", help="comma-separated: elementwise,reduction,rawkernel,rawmodule")
        p.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    return check(args) if args.command == "check" else timing(args)


if __name__ == "__main__":
    sys.exit(main())
