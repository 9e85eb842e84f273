"""Binaries linked from one PTX per module (``kspec build`` for several archs with nvJitLink: kspec/compiler/_link.py),
built on a process that sees no GPU and served on the GPU under ``KSPEC_COMPILE=never`` from an empty cache:
elementwise and reduction kernels give NumPy's results, every load from the build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]
SPECS = [REPO / "specs" / "elementwise.toml", REPO / "specs" / "reduction.toml"]
pytestmark = pytest.mark.gpu

_SCRIPT = """
import json
import numpy as np
import linked_pkg.elementwise as ew
import linked_pkg.reduction as red
import kspec
rng = np.random.default_rng(0)
x, y = rng.random(100_003, dtype=np.float32), rng.random(100_003, dtype=np.float32)
z = ew.squared_diff_generic(kspec.asarray(x), kspec.asarray(y)).get()
m = rng.random((300, 257)).astype(np.float64)
n = red.l2norm(kspec.asarray(m), axis=1).get()
print(json.dumps({
    "elementwise": bool(np.allclose(z, (x - y) ** 2, rtol=1e-6)),
    "reduction": bool(np.allclose(n, np.sqrt((m * m).sum(axis=1)), rtol=1e-10)),
    "sources": sorted({e.source for e in kspec.compile_log()}),
}))
"""


def test_linked_binaries_serve_on_the_gpu(tmp_path: Path) -> None:
    import kspec
    from kspec.compiler import link_available

    if not link_available():
        pytest.skip("nvJitLink is not installed here (kspec[nvrtc] brings it)")
    arch = kspec.get_device().arch
    archs = ",".join(sorted({"sm_80", arch} if arch != "sm_80" else {"sm_80", "sm_90"}))
    pkg = tmp_path / "linked_pkg"
    env = child_env(KSPEC_CACHE_DIR=str(tmp_path / "build-cache"), CUDA_VISIBLE_DEVICES="")
    subprocess.run([sys.executable, "-m", "kspec", "generate", *map(str, SPECS), "-o", str(pkg)], check=True, env=env)
    done = subprocess.run([sys.executable, "-m", "kspec", "build", *map(str, SPECS), "-o", str(pkg / "_binaries"),
                           "--arch", archs, "--json"], env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["modules_linked"] > 0 and report["modules_failed"] == 0
    served = child_env(tmp_path, REPO, KSPEC_CACHE_DIR=str(tmp_path / "empty-cache"), KSPEC_COMPILE="never")
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=served, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["elementwise"] and got["reduction"]
    assert got["sources"] == ["binary"], got
