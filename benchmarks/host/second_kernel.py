"""The first call of the 2nd..6th distinct kernels of a process, from a warm disk cache (issue [Y]).

A process has run one kernel already (imports, the device, the cache directory and the call path's
machinery are warm); each further kernel is a different ``ElementwiseKernel(...)`` / ``ReductionKernel(...)``
whose binary is already in the disk cache, and its first call (construction included, synchronised) is what
a service pays when a request reaches a kernel it has not called yet. CuPy's row does the same from CuPy's
warm cache, in the same run (when CuPy is importable).

Every number is the median over ``--runs`` fresh processes; before them one untimed process per row fills
the caches (kspec's binary cache and its memo directory, CuPy's kernel cache) and writes bytecode. Rows run
in rounds (one process of each row per round), so drift of the host weighs on all alike. ``KSPEC_DEVICE=cpu``
is passed through: on a machine without a GPU the script times kspec's CPU device and prints kspec only.
``--root label=DIR`` times another checkout too (e.g. ``before=/path/to/main``). ``--profile`` prints a
cProfile of the 2nd..6th first calls of one warm process instead. ``--served`` adds the row of a deployed process
([CAP]): the kernels captured (``kspec capture``) and built (``kspec build``) once, then served from that build with
``KSPEC_COMPILE=never``, NVRTC blocked and empty caches in every process (``--spans``/``--profile`` then time
that row). Usage::

    python benchmarks/host/second_kernel.py [--runs 7] [--root before=DIR] [--no-gc] [--profile] [--spans] [--served]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
N = 1 << 12

# (constructor, arguments, call): the same kernels for kspec and CuPy; the first one warms the process. With
# --fake-gpu the outputs are given (the fake driver allocates nothing): FAKE_CALLS replaces the calls.
KERNELS = [
    ("ElementwiseKernel", ("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "sk_sqdiff"), "(x, y)"),
    ("ElementwiseKernel", ("float32 x, float32 y", "float32 z", "z = x * 2 + y", "sk_axpy"), "(x, y)"),
    ("ReductionKernel", ("float32 x", "float32 y", "x", "a + b", "y = a", "0", "sk_sum"), "(x)"),
    ("ElementwiseKernel", ("float32 x", "float32 z", "z = x > 0 ? x : 0", "sk_relu"), "(x)"),
    ("ReductionKernel", ("float32 x", "float32 y", "x * x", "a + b", "y = sqrt(a)", "0", "sk_norm"), "(x)"),
    ("ElementwiseKernel", ("float32 x, float32 y", "float32 z, float32 w", "z = x + y; w = x - y", "sk_sumdiff"), "(x, y)"),
]

FAKE_CALLS = ["(x, y, z)", "(x, y, z)", "(x, s)", "(x, z)", "(x, s)", "(x, y, z, w)"]

_TIMED = """
{gc_off}_times = []
for _ctor, _args, _call in {kernels!r}:
    _t = time.perf_counter()
    _k = getattr(lib, _ctor)(*_args)
    _out = eval("_k" + _call)
    sync()
    _times.append((time.perf_counter() - _t) * 1e3)
print(json.dumps(_times))
"""

KSPEC = """
import json, time
import numpy as np
import kspec as lib
sync = lambda: lib.get_device().synchronize()
x = lib.asarray(np.linspace(-1, 1, {n}, dtype=np.float32)); y = lib.asarray(np.ones({n}, np.float32))
sync()
""" + _TIMED

# --fake-gpu: kspec's GPU path (sm_90 binaries: NVRTC fills the cache in the untimed round) up to a fake
# libcuda (tests/helpers/fake_driver.py, which accepts any module and launch): a CPU machine's view of a GPU load
FAKE_GPU = """
import json, sys, time
import numpy as np
import kspec as lib
sys.path.insert(0, {tests!r})
from fake_driver import FakeDriver, fake_array
from kspec.runtime import _driver
_drv = FakeDriver({{}})
_drv.any_kernel = True
_driver._driver, _driver._failure, _driver._device_count = _drv, None, 1
sync = lambda: None
x, y, z, w = (fake_array(0x100000 * (i + 1), shape=({n},)) for i in range(4))
s = fake_array(0x500000, shape=())
"""

# --served: a deployed process's start (no NVRTC, empty caches of its own), before the row's code
SERVED = """
import os, sys, tempfile
sys.modules["cuda.bindings.nvrtc"] = None
os.environ["KSPEC_CACHE_DIR"], os.environ["KSPEC_MEMO_DIR"] = tempfile.mkdtemp(dir={work!r}), tempfile.mkdtemp(dir={work!r})
"""

CUPY = """
import json, time
import numpy as np
import cupy as lib
sync = lambda: lib.cuda.Device().synchronize()
x = lib.asarray(np.linspace(-1, 1, {n}, dtype=np.float32)); y = lib.ones({n}, lib.float32)
sync()
""" + _TIMED

PROFILE = """
import cProfile, pstats
{prelude}
kernels = {kernels!r}
def run(which):
    for _ctor, _args, _call in which:
        _k = getattr(lib, _ctor)(*_args)
        eval("_k" + _call)
        sync()
run(kernels[:1])
profile = cProfile.Profile()
profile.enable()
run(kernels[1:])
profile.disable()
pstats.Stats(profile).sort_stats("cumulative").print_stats({top})
pstats.Stats(profile).sort_stats("tottime").print_stats({top})
"""


# Inclusive time of the pieces of a first call (perf_counter spans around module functions), summed over the
# 2nd..6th kernels' first calls of one warm process and divided by their number: where a first call goes.
SPANS = """
import importlib
{prelude}
kernels = {kernels!r}
spans = {{}}
def wrap(module, attr, label):
    owner = importlib.import_module(module) if isinstance(module, str) else module
    if "." in attr:
        cls, attr = attr.split(".")
        owner = getattr(owner, cls)
    inner = getattr(owner, attr)
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spans[label] = spans.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, attr, timed)
import kspec.kernels._spec_kernel, kspec.kernels._reduction, kspec.kernels._elementwise, kspec.kernels.records._call_restore
import kspec.kernels.records._kernel_records
for module, attr, label in {targets!r}:
    wrap(module, attr, label)
def run(which):
    for _ctor, _args, _call in which:
        t = time.perf_counter()
        _k = getattr(lib, _ctor)(*_args)
        spans["construct"] = spans.get("construct", 0.0) + time.perf_counter() - t
        eval("_k" + _call)
        sync()
        spans["total"] = spans.get("total", 0.0) + time.perf_counter() - t
run(kernels[:1])
spans.clear()
run(kernels[1:])
print(json.dumps({{k: v * 1e3 / (len(kernels) - 1) for k, v in spans.items()}}))
"""
# (module, attribute, label): the pieces SPANS times
SPAN_TARGETS = [
    ("kspec.kernels._spec_kernel", "specialization_of", "specialize"),
    ("kspec.kernels.binaries._loaded", "interface_of", "launch interface"),
    ("kspec.kernels.binaries._loaded", "loaded_kernel", "loaded_kernel (interface, device)"),
    ("kspec.kernels.binaries._loaded", "compile_program", "variant lookup (compile_program)"),
    ("kspec.compiler._compile", "cache_key", "  cache key"),
    ("kspec.compiler.cache._store", "BinaryCache.get", "  cache get (read + verify)"),
    ("kspec.kernels.binaries._loaded", "LoadedModule", "module load"),
    ("kspec.kernels.planning._planner", "bind", "bind"),
    ("kspec.kernels.planning._reduction_planner", "bind", "bind"),
    ("kspec.kernels.planning._planner", "plan_elementwise", "plan"),
    ("kspec.kernels.planning._reduction_planner", "plan_reduction", "plan"),
    ("kspec.kernels.callpath._prepared", "make_launch", "launch code"),
    ("kspec.kernels.callpath._prepared", "native_launch", "launch code (compiled)"),
    ("kspec.runtime._fastcall", "fastcall_module", "compiled call path lookup"),
    ("kspec.kernels.callpath._call_path", "make_dispatcher", "dispatcher code"),
    ("kspec.kernels.callpath._launch_code", "compiled", "  generated code (compiled)"),
    ("kspec.kernels.callpath._signature", "compiled", "  generated code (compiled)"),
    ("kspec.kernels.planning._planner", "PreparedCall", "prepared call (launch code incl.)"),
    ("kspec.kernels.planning._planner", "Frame", "frame"),
    ("kspec.kernels.planning._reduction_planner", "Frame", "frame"),
    ("kspec.runtime.host._module", "HostFunction.launch", "execute (CPU device)"),
    ("kspec.kernels.records._call_store", "CallRecords.arity_of", "construct: call records (file read)"),
    ("kspec.kernels._spec_kernel", "SpecKernel._recall", "call record lookup (recall)"),
    ("kspec.kernels.records._kernel_records", "restore", "  restore (prepared call from a record)"),
    ("kspec.kernels.binaries._loaded", "cached_function", "    function (module load)"),
    ("kspec.kernels.records._call_restore", "PreparedCall", "    prepared call"),
    ("kspec.kernels.callpath._call_path", "CallPath._dispatcher", "dispatcher"),
    ("kspec.kernels.callpath._call_path", "CallPath.miss", "call (miss: plan + launch)"),
]


def _run(code: str, env: dict[str, str]) -> str:
    """A child's output; it runs in a scratch directory, so ``-c``'s first sys.path entry (the working
    directory) cannot put another kspec checkout before the one PYTHONPATH names."""
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return done.stdout


def child(code: str, env: dict[str, str]) -> list[float]:
    return [float(v) for v in json.loads(_run(code, env).strip().splitlines()[-1])]


def child_spans(code: str, env: dict[str, str]) -> dict[str, float]:
    return dict(json.loads(_run(code, env).strip().splitlines()[-1]))


def _served_row(code: str, env: dict[str, str], work: Path, fake_gpu: bool) -> tuple[str, dict[str, str]]:
    """The served row of a checkout: its kernels captured from one run of ``code`` and built for the device
    (sm_90 under --fake-gpu), then ``code`` with NVRTC blocked and fresh caches, served from that build."""
    work.mkdir(parents=True, exist_ok=True)
    captured, build = work / "captured", work / "build"
    run = functools.partial(subprocess.run, env=env, capture_output=True, text=True, timeout=600, check=True,
                            cwd=tempfile.gettempdir())
    run([sys.executable, "-m", "kspec", "capture", "--no-cupy", "-o", str(captured), "--", sys.executable, "-c", code])
    arch = "sm_90" if fake_gpu else _run("import kspec; print(kspec.get_device().arch)", env).strip()
    run([sys.executable, "-m", "kspec", "build", str(captured), "-o", str(build), "--arch", arch, "-q"])
    served = {**env, "KSPEC_BINARIES": str(build), "KSPEC_COMPILE": "never"}
    return SERVED.format(work=str(work)) + code, served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--root", action="append", default=[], help="label=DIR: another kspec checkout to time")
    parser.add_argument("--profile", action="store_true", help="cProfile the 2nd..6th first calls of one process")
    parser.add_argument("--spans", action="store_true", help="time the pieces of the 2nd..6th first calls")
    parser.add_argument("--fake-gpu", action="store_true", help="kspec's sm_90 path up to a fake driver (no GPU needed)")
    parser.add_argument("--no-gc", action="store_true",
                        help="every row's timed loop runs with the garbage collector off: the calls' own work, without a "
                             "young-generation pause that lands in one call or another by allocation count")
    parser.add_argument("--served", action="store_true", help="add a row served from a captured build (see above)")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    gc_off = "import gc; gc.disable()\n" if args.no_gc else ""
    roots = [("this", REPO)] + [(r.split("=", 1)[0], Path(r.split("=", 1)[1]).resolve()) for r in args.root]
    on_cpu = os.environ.get("KSPEC_DEVICE", "").strip().lower() == "cpu"
    have_cupy = False
    if not on_cpu:
        try:
            import cupy  # noqa: F401

            have_cupy = True
        except ImportError:
            pass
    work = Path(tempfile.mkdtemp(prefix="kspec-second-"))
    try:
        base = {**os.environ, "PYTHONPYCACHEPREFIX": str(work / "pycache"), "CUPY_CACHE_DIR": str(work / "cupy-cache")}
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        rows: dict[str, tuple[str, dict[str, str]]] = {}
        prelude = FAKE_GPU.format(n=N, tests=str(REPO / "tests" / "helpers")) if args.fake_gpu else None
        kernels = [(c, a, f) for (c, a, _), f in zip(KERNELS, FAKE_CALLS)] if args.fake_gpu else KERNELS
        for label, root in roots:
            env = {**base, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
                   "KSPEC_CACHE_DIR": str(work / f"{label}-cache"), "KSPEC_MEMO_DIR": str(work / f"{label}-memo")}
            code = KSPEC.format(n=N, kernels=KERNELS, gc_off=gc_off)
            # kspec's compiled call path, built into this cache as `kspec warm` builds it for a deploy (a cold
            # cache would have a child process build it during the first timed run)
            _run("from kspec.compiler import build_call_path; build_call_path()", env)
            if prelude is not None:
                code = prelude + _TIMED.format(kernels=kernels, gc_off=gc_off)
                env.pop("KSPEC_DEVICE", None)
            rows[f"kspec [{label}]"] = (code, env)
            if args.served:
                rows[f"served [{label}]"] = _served_row(code, env, work / label, args.fake_gpu)
        if have_cupy and not args.fake_gpu:
            rows["CuPy"] = (CUPY.format(n=N, kernels=KERNELS, gc_off=gc_off), base)
        timed = f"{'served' if args.served else 'kspec'} [{roots[0][0]}]"  # the row --spans/--profile time
        # that row's code up to its timed loop: its imports and arrays
        head = (SERVED.format(work=str(work / roots[0][0])) if args.served else "") + (
            prelude or KSPEC.split("sync()")[0].format(n=N))
        if args.spans:
            code, env = rows[timed]
            child(code, env)  # warms the caches
            spans = SPANS.format(prelude=head, kernels=kernels, targets=SPAN_TARGETS)
            got = [child_spans(spans, env) for _ in range(args.runs)]
            print(f"spans of the 2nd..6th first calls, ms per kernel (inclusive; median of {args.runs} processes)")
            for label in got[0]:
                print(f"{label:40} {statistics.median(g.get(label, 0.0) for g in got):8.3f}")
            return
        if args.profile:
            code, env = rows[timed]
            child(code, env)  # warms the caches
            code = PROFILE.format(prelude=head, kernels=kernels, top=args.top)
            print(_run(code, env))
            return
        samples: dict[str, list[list[float]]] = {name: [] for name in rows}
        for round_ in range(args.runs + 1):
            for name, (code, env) in rows.items():
                times = child(code, env)
                if round_:  # round 0 fills the caches and writes bytecode
                    samples[name].append(times)
        device = "CPU device (KSPEC_DEVICE=cpu)" if on_cpu else "GPU"
        print(f"first call of each distinct kernel in one process, warm disk cache, {device}; median of {args.runs} "
              "fresh processes (ms, construction + call + synchronise)")
        names = [k[1][-1] for k in KERNELS]
        print(f"{'row':18} " + " ".join(f"{n:>10}" for n in names) + f" {'2nd..6th':>10}")
        medians: dict[str, float] = {}
        for name, got in samples.items():
            per_kernel = [statistics.median(run[i] for run in got) for i in range(len(KERNELS))]
            medians[name] = statistics.median(statistics.mean(run[1:]) for run in got)
            print(f"{name:18} " + " ".join(f"{v:10.3f}" for v in per_kernel) + f" {medians[name]:10.3f}")
        if have_cupy:
            for label, _root in roots:
                print(f"2nd..6th, kspec [{label}] / CuPy: {medians[f'kspec [{label}]'] / medians['CuPy']:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
