"""Production mode on a GPU: a generated module with binaries for the device serves its declared
specializations under ``KSPEC_COMPILE=never`` and refuses the others; the compile log has one entry per load.

Each check runs in a fresh interpreter with an empty binary cache, so only the build's binaries can serve.
(The same behaviour on the CPU device, and everything that needs no GPU: tests/compiler_tests/test_production.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "specs" / "elementwise.toml"

_SCRIPT = """
import json
import numpy as np
import served_pkg.elementwise as ew
import kspec
x = np.arange(4096, dtype=np.float32)
y = np.ones(4096, dtype=np.float32)
z32 = ew.squared_diff_generic(kspec.asarray(x), kspec.asarray(y)).get()
z64 = ew.squared_diff_generic(kspec.asarray(x.astype(np.float64)), kspec.asarray(y.astype(np.float64))).get()
again = ew.squared_diff_generic(kspec.asarray(x), kspec.asarray(y)).get()  # loaded already: no new entry
try:
    ew.squared_diff_generic(kspec.asarray(x.astype(np.int16)), kspec.asarray(y.astype(np.int16)))
    refused = ""
except kspec.CompileForbiddenError as exc:
    refused = str(exc)
print(json.dumps({
    "ok": bool(np.allclose(z32, (x - 1) ** 2) and np.allclose(z64, (x - 1) ** 2) and np.allclose(again, z32)),
    "refused": refused,
    "log": [[e.kernel, e.what, e.source, e.arch, e.ms, e.reason] for e in kspec.compile_log()],
}))
"""


@pytest.fixture
def package(tmp_path: Path) -> tuple[Path, str]:
    """``kspec generate`` of specs/elementwise.toml with ``kspec build`` binaries for this device's arch."""
    import kspec

    arch = kspec.get_device().arch
    out = tmp_path / "served_pkg"
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "build-cache"))
    subprocess.run([sys.executable, "-m", "kspec", "generate", str(SPEC), "-o", str(out)], check=True, env=env, cwd=tmp_path)
    subprocess.run([sys.executable, "-m", "kspec", "build", str(SPEC), "-o", str(out / "_binaries"), "--arch", arch],
                   check=True, env=env, cwd=tmp_path, capture_output=True)  # fmt: skip
    return tmp_path, arch


def _run(root: Path, **extra: str) -> tuple[dict, str]:
    env = child_env(root, REPO, KSPEC_CACHE_DIR=str(root / "empty-cache"), **extra)
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.gpu
def test_never_runs_declared_specializations_from_binaries_and_refuses_the_others(package) -> None:
    root, arch = package
    result, stderr = _run(root, KSPEC_COMPILE="never", KSPEC_LOG="compile")
    assert result["ok"]
    refused = result["refused"]
    assert refused.startswith("kernel 'squared_diff_generic' (T=int16; variant ")
    assert f"for {arch} would compile at run time (new specialization" in refused
    assert "(KSPEC_COMPILE=never)" in refused
    assert 'add {T = "int16"} to its instantiations in its spec file' in refused
    # one entry per load: float32 and float64, each its whole module from the binaries
    assert [(k, w, s, a) for k, w, s, a, _ms, _r in result["log"]] == [
        ("squared_diff_generic", "T=float32; all variants", "binary", arch),
        ("squared_diff_generic", "T=float64; all variants", "binary", arch),
    ]
    assert all(ms > 0 for *_rest, ms, _r in result["log"])
    assert stderr.count("kspec compile: binary squared_diff_generic ") == 2


@pytest.mark.gpu
def test_allow_compiles_what_the_binaries_lack_and_logs_why(package) -> None:
    root, arch = package
    result, _stderr = _run(root, KSPEC_COMPILE="allow")
    assert result["ok"] and result["refused"] == ""
    sources = [(s, r) for _k, _w, s, _a, _ms, r in result["log"]]
    assert sources == [("binary", ""), ("binary", ""), ("compiled", "new specialization")]
    assert result["log"][-1][1].startswith("T=int16; variant ")


_WARMED = """
import json, sys
import numpy as np
import kspec
from kspec.build import plan_build
from kspec.compiler import compile_log
from kspec.spec import ElementwiseSpec, load_library

specs = load_library([sys.argv[1]])
kernels = kspec.load(sys.argv[1])
calls = 0
for unit in plan_build(specs.values(), [kspec.get_device().arch]).units:
    spec = unit.spec
    if spec.KIND == "raw":
        continue  # raw kernels are not warmed yet
    dtype = lambda p: unit.types.get(p.type, p.type)
    if "bfloat16" in [dtype(p) for p in (*spec.in_params, *spec.out_params)]:
        continue  # NumPy has no bfloat16 to make the arguments from
    for strided in (False, True):
        args = [np.dtype(dtype(p)).type(1).item() if p.name in unit.scalars else
                kspec.asarray(np.ones(64, dtype=dtype(p))[::2] if strided else np.ones(32, dtype=dtype(p)))
                for p in spec.in_params]
        # outputs given: a placeholder only an output has is bound by it (a full reduction's output is 0-d)
        out_shape = 32 if isinstance(spec, ElementwiseSpec) else ()
        args += [kspec.zeros(out_shape, dtype=dtype(p)) for p in spec.out_params]
        # the backward and gradient-sum kernels the specs imply are built too; they have no name in the library
        make = kspec.ElementwiseKernel if isinstance(spec, ElementwiseSpec) else kspec.ReductionKernel
        (kernels[spec.name] if spec.name in kernels else make.from_spec(spec))(*args)
        calls += 1
kspec.get_device().synchronize()
print(json.dumps({"calls": calls, "sources": sorted({e.source for e in compile_log()})}))
"""


@pytest.mark.gpu
def test_warm_for_the_device_then_never_runs_the_repositorys_kernels(tmp_path) -> None:
    """kspec.warm on specs/ for the device's arch (its default), then, in a fresh interpreter under
    KSPEC_COMPILE=never with the same cache, every declared elementwise and reduction specialization runs,
    each load a cache hit."""
    env = child_env(unset=("KSPEC_COMPILE",), KSPEC_CACHE_DIR=str(tmp_path / "cache"))
    warm = ("import json, sys, kspec; r = kspec.warm(sys.argv[1]); "
            "print(json.dumps({'archs': r.archs, 'compiled': r.compiled, 'cached': r.cached}))")
    done = subprocess.run([sys.executable, "-c", warm, str(REPO / "specs")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["archs"][0].startswith("sm_") and report["compiled"] > 0
    served = subprocess.run([sys.executable, "-c", _WARMED, str(REPO / "specs")], env={**env, "KSPEC_COMPILE": "never"},
                            capture_output=True, text=True)
    assert served.returncode == 0, served.stderr
    result = json.loads(served.stdout.strip().splitlines()[-1])
    assert result["calls"] > 20 and result["sources"] == ["cache"]
