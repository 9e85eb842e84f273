"""Start-up: from a fresh interpreter to the first kernel result, kspec next to CuPy (issue 14).

Every number is the median over ``--runs`` fresh processes, timed inside the child from its first line
(interpreter start-up itself is the same for both and left out). The processes of all rows run in rounds,
one of each row per round, so the host's drift over the run weighs on every row alike. Every module runs from bytecode, as from
an installed package: children write their ``.pyc`` files under one ``PYTHONPYCACHEPREFIX`` and each
timed series starts with one untimed process (a machine with ``PYTHONDONTWRITEBYTECODE`` set, or packages
installed without bytecode, would otherwise recompile numpy, Jinja, ... in every process and time that):

* floor: ``import numpy, cuda.bindings.driver`` -- what any process launching kernels pays;
* a generated module's import (NVRTC blocked, as in a deployed wheel), then its first call served from
  the module's ``_binaries`` (synchronised). Since session 41 the import loads no call machinery and not the
  driver bindings (it never did: making the first arrays does, untimed between the two), so it can come in
  under the floor; "import, two arrays, first call" times all of it, where a module the import no longer loads
  may load while the arrays are made;
* ``import kspec`` + the first ``ElementwiseKernel(...)(x, y)`` with a warm disk cache, next to
  ``import cupy`` + the same CuPy call from CuPy's warm cache;
* the same with an empty cache (NVRTC compiles), for both;
* a generated module of benchmarks/tuning/bench_kernels.toml built with its tuning record (issue [AT]: the build's
  ``tuning.json``) and without, ``KSPEC_COMPILE=never``: import, then the first float16 ``sqd`` call, whose
  layout the tuned build takes from the record (the nearest bucket) and the untuned one from the rules.

``--root DIR`` (repeatable, ``label=DIR``) runs the kspec rows against other checkouts too (e.g. HEAD in a
git worktree), so before and after share one run. Then the modules the generated module's import loads
after numpy, by self time (lazily imported ones included, which ``python -X importtime`` does not see). Usage::

    python benchmarks/host/startup.py [--runs 7] [--root before=.device/head]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parents[2]
N = 1 << 20

_PRE = "import time\n_t0 = time.perf_counter()\n"
_OUT = "import json\nprint(json.dumps({k: v * 1e3 for k, v in _r.items()}))\n"

FLOOR = _PRE + """
import numpy, cuda.bindings.driver
_r = {"import": time.perf_counter() - _t0}
""" + _OUT

# A deployed package: import a generated module (NVRTC blocked, as in a wheel), then its first call from its
# binaries; ``check``: a line run after it
DEPLOYED = _PRE + """
import sys
sys.modules["cuda.bindings.nvrtc"] = None  # a deployed wheel: NVRTC is not installed
import numpy as np
import %(module)s as m
_t1 = time.perf_counter()
import kspec
x = kspec.asarray(np.ones(%(n)d, np.%(dtype)s)); y = kspec.asarray(np.ones(%(n)d, np.%(dtype)s))
kspec.get_device().synchronize()
_t2 = time.perf_counter()
z = m.%(function)s(x, y)
kspec.get_device().synchronize()
_t3 = time.perf_counter()
%(check)s
_r = {"import": _t1 - _t0, "first_call": _t3 - _t2, "total": _t3 - _t0 - (_t2 - _t1), "whole": _t3 - _t0}
""" + _OUT
GENERATED = DEPLOYED % {"module": "startup_pkg.elementwise", "function": "squared_diff", "dtype": "float32",
                        "check": "", "n": N}
# the bench kernels' module: the first float16 sqd call takes its knobs from the record exactly when built with it
BENCH = DEPLOYED % {"module": "startup_bench.bench_kernels", "function": "sqd", "dtype": "float16", "n": N,
                    "check": "_c = m._KERNELS['sqd'].choices()\n"
                             "assert bool(_c and _c[-1][3].startswith('record')) == %(tuned)s, _c"}

KSPEC_EW = _PRE + """
import numpy as np
import kspec
x = kspec.asarray(np.ones(%(n)d, np.float32)); y = kspec.asarray(np.ones(%(n)d, np.float32))
kspec.get_device().synchronize()
_t1 = time.perf_counter()
k = kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y) + %(salt)s", "startup_sqd")
z = k(x, y)
kspec.get_device().synchronize()
_t2 = time.perf_counter()
_r = {"first_call": _t2 - _t1}
""" + _OUT

CUPY_EW = _PRE + """
import numpy as np
import cupy
x = cupy.ones(%(n)d, cupy.float32); y = cupy.ones(%(n)d, cupy.float32)
cupy.cuda.Device().synchronize()
_t1 = time.perf_counter()
k = cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y) + %(salt)s", "startup_sqd")
z = k(x, y)
cupy.cuda.Device().synchronize()
_t2 = time.perf_counter()
_r = {"first_call": _t2 - _t1}
""" + _OUT

IMPORT_KSPEC = _PRE + "import kspec.kernels\n_r = {'import': time.perf_counter() - _t0}\n" + _OUT
IMPORT_CUPY = _PRE + "import cupy\n_r = {'import': time.perf_counter() - _t0}\n" + _OUT


def child(code: str, env: dict[str, str], cwd: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


class Series(NamedTuple):
    """One timed row: a child script and where it runs; ``fresh``: env vars given a new empty directory per
    process (an empty cache)."""

    code: str
    env: dict[str, str]
    cwd: Path
    fresh: tuple[str, ...] = ()


def interleaved(series: dict[str, Series], runs: int) -> dict[str, dict[str, float]]:
    """Median of each timing of each series over ``runs`` fresh processes, taken in rounds (one process of
    every series per round), so that the host's drift during the run touches every series alike. Every
    series first runs once untimed (it writes any bytecode still missing, and warms what a warm row needs)."""
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in series}
    for round_ in range(runs + 1):
        for name, one in series.items():
            env = dict(one.env)
            for var in one.fresh:
                env[var] = tempfile.mkdtemp(prefix="startup-cold-")
            result = child(one.code, env, one.cwd)
            if round_:
                samples[name].append(result)
    return {name: {k: statistics.median(s[k] for s in got) for k in got[0]} for name, got in samples.items()}


def prepare(root: Path, work: Path, label: str, base_env: dict[str, str]) -> tuple[dict[str, str], Path]:
    """A generated package with binaries for this device, built by the kspec at ``root``."""
    pkg_parent = work / label
    pkg = pkg_parent / "startup_pkg"
    env = {**base_env, "PYTHONPATH": os.pathsep.join(filter(None, [str(pkg_parent), str(root), os.environ.get("PYTHONPATH")])), "KSPEC_CACHE_DIR": str(work / f"{label}-cache"),
           "KSPEC_MEMO_DIR": str(work / f"{label}-memo"), "CUPY_CACHE_DIR": str(work / "cupy-cache")}
    generate_and_build(REPO / "specs" / "elementwise.toml", pkg, env, work)
    # kspec's compiled call path in the warm cache, as `kspec warm` puts it there for a deploy (a cold cache has a
    # child process build it: the "empty cache" rows)
    subprocess.run([sys.executable, "-c", "from kspec.compiler import build_call_path; build_call_path()"], env=env,
                   cwd=work, check=True)  # fmt: skip
    return env, pkg_parent


def generate_and_build(spec: Path, pkg: Path, env: dict[str, str], work: Path) -> None:
    """``kspec generate`` of ``spec`` into ``pkg``, and ``kspec build`` of it into ``pkg/_binaries`` for this
    device's arch, each by the kspec ``env`` puts on the path."""
    subprocess.run([sys.executable, "-m", "kspec", "generate", str(spec), "-o", str(pkg)], check=True, env=env, cwd=work,
                   capture_output=True)
    probe = subprocess.run([sys.executable, "-c", "import kspec; print(kspec.get_device().arch)"], env=env, cwd=work,
                           capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "kspec", "build", str(spec), "-o", str(pkg / "_binaries"), "--arch", probe],
                   check=True, env=env, cwd=work, capture_output=True)


def prepare_bench(work: Path, tuned: bool, env: dict[str, str]) -> tuple[dict[str, str], Path]:
    """A generated package of benchmarks/tuning/bench_kernels.toml built for this device, with the spec's tuning record
    (``tuned``: the build carries it in ``tuning.json``) or without."""
    label = "tuned" if tuned else "untuned"
    source = work / f"{label}-spec"
    source.mkdir()
    spec = source / "bench_kernels.toml"
    shutil.copy(REPO / "benchmarks" / "tuning" / "bench_kernels.toml", spec)
    if tuned:
        shutil.copy(REPO / "benchmarks" / "tuning" / "bench_kernels.tune.json", source / "bench_kernels.tune.json")
    pkg = work / label / "startup_bench"
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(work / label), env.get("PYTHONPATH")])),
           "KSPEC_COMPILE": "never"}
    generate_and_build(spec, pkg, env, work)
    assert (pkg / "_binaries" / "tuning.json").exists() == tuned
    return env, work / label


# Times every module the generated module's import loads after numpy, lazily imported ones included
# (``python -X importtime`` logs only import statements, not ``importlib.import_module``, which kspec's
# lazy packages use). Wraps importlib's private _load_unlocked: a measurement, not something kspec does.
_IMPORT_PROFILE = """
import json, sys, time
import numpy
import importlib._bootstrap as bootstrap
load, stack, rows = bootstrap._load_unlocked, [], {}
def timed(spec):
    start = time.perf_counter()
    stack.append(0.0)
    try:
        return load(spec)
    finally:
        spent, nested = time.perf_counter() - start, stack.pop()
        rows[spec.name] = (spent, spent - nested)
        if stack:
            stack[-1] += spent
bootstrap._load_unlocked = timed
import startup_pkg.elementwise
print(json.dumps(rows))
"""


def import_profile(env: dict[str, str], cwd: Path, runs: int, top: int) -> list[tuple[float, float, str]]:
    """(cumulative ms, self ms, module) of the modules importing the generated module loads after numpy,
    median of ``runs`` processes, largest self time first."""
    samples: dict[str, list[tuple[float, float]]] = {}
    for _ in range(runs):
        profile: dict[str, Any] = child(_IMPORT_PROFILE, env, cwd)  # name -> [cumulative s, self s]
        for name, (cumulative, own) in profile.items():
            samples.setdefault(name, []).append((cumulative, own))
    rows = [(statistics.median(c for c, _ in got) * 1e3, statistics.median(s for _, s in got) * 1e3, name)
            for name, got in samples.items()]
    return sorted(rows, key=lambda row: -row[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--root", action="append", default=[], help="label=DIR: another kspec checkout to time")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    roots = [("this", REPO)] + [(r.split("=", 1)[0], Path(r.split("=", 1)[1]).resolve()) for r in args.root]
    try:
        import cupy  # noqa: F401

        have_cupy = True
    except ImportError:
        have_cupy = False
    work = Path(tempfile.mkdtemp(prefix="kspec-startup-"))
    rows: list[tuple[str, str, float | None, float | None]] = []
    try:
        base_env = {**os.environ, "CUPY_CACHE_DIR": str(work / "cupy-cache"), "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
        series = {"floor": Series(FLOOR, base_env, work)}
        importtimes: list[tuple[float, float, str]] | None = None
        if have_cupy:
            ew = CUPY_EW % {"n": N, "salt": "0"}
            series |= {"cupy import": Series(IMPORT_CUPY, base_env, work), "cupy warm": Series(ew, base_env, work),
                       "cupy cold": Series(ew, base_env, work, ("CUPY_CACHE_DIR",))}
        for label, root in roots:
            env, cwd = prepare(root, work, label, base_env)
            ew = KSPEC_EW % {"n": N, "salt": "0"}
            series |= {f"gen {label}": Series(GENERATED, env, cwd),
                       f"import {label}": Series(IMPORT_KSPEC, env, cwd), f"warm {label}": Series(ew, env, cwd),
                       f"cold {label}": Series(ew, env, cwd, ("KSPEC_CACHE_DIR",))}
            if importtimes is None:
                importtimes = import_profile(env, cwd, args.runs, args.top)
            if label == "this":
                for tuned in (True, False):
                    bench_env, bench_cwd = prepare_bench(work, tuned, env)
                    series[f"bench {tuned}"] = Series(BENCH % {"tuned": tuned}, bench_env, bench_cwd)
        got = interleaved(series, args.runs)
        floor = got["floor"]["import"]
        rows.append(("floor: import numpy, cuda.bindings.driver", "-", floor, None))
        cupy_import = got["cupy import"]["import"] if have_cupy else None
        cupy_warm = got["cupy warm"]["first_call"] if have_cupy else None
        cupy_cold = got["cupy cold"]["first_call"] if have_cupy else None
        for label, _root in roots:
            gen = got[f"gen {label}"]
            rows.append((f"generated module import (NVRTC blocked) [{label}]", label, gen["import"], None))
            rows.append((f"  then its first call from its binaries [{label}]", label, gen["first_call"], None))
            rows.append((f"  import + first call, / floor [{label}]", label, gen["total"] / floor, None))
            # the arrays' making between the two (untimed above) loads what a first call would if the import did not
            rows.append((f"  import, two arrays, first call (all timed) [{label}]", label, gen["whole"], None))
            imp = got[f"import {label}"]["import"]
            rows.append((f"import kspec.kernels [{label}] | import cupy", label, imp, cupy_import))
            warm = got[f"warm {label}"]["first_call"]
            rows.append((f"first ElementwiseKernel call, warm cache [{label}] | CuPy", label, warm, cupy_warm))
            if cupy_import is not None and cupy_warm is not None:
                rows.append((f"  import + first call (warm), kspec / CuPy [{label}]", label, (imp + warm) / (cupy_import + cupy_warm), None))
            cold = got[f"cold {label}"]["first_call"]
            rows.append((f"first ElementwiseKernel call, empty cache [{label}] | CuPy", label, cold, cupy_cold))
        tuned, untuned = got["bench True"], got["bench False"]
        for what, key in (("import", "import"), ("first float16 sqd call", "first_call"), ("import + first call", "total")):
            rows.append((f"bench_kernels module, tuned build | untuned: {what}", "this", tuned[key], untuned[key]))
        print(f"start-up, median of {args.runs} fresh processes (ms; rows marked / are ratios)")
        print(f"{'what':72} {'kspec':>10} {'CuPy':>10}")
        for what, _label, ours, theirs in rows:
            print(f"{what:72} {ours:10.2f} {'' if theirs is None else f'{theirs:10.2f}':>10}")
        print(f"\nimport startup_pkg.elementwise after numpy [{roots[0][0]}], median of {args.runs}: the {args.top} "
              "modules with the largest self time (ms; loading the bytecode included)")
        print(f"{'cumulative':>10} {'self':>7}  module")
        for cumulative, self_ms, name in importtimes or []:
            print(f"{cumulative:10.2f} {self_ms:7.2f}  {name}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
