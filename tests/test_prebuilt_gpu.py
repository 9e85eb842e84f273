"""Binaries that `kspec build` wrote on a machine without a GPU, loaded and launched on the GPU.

``KSPEC_PREBUILT_DIR`` points at such a build (the device runs carry one made on the CPU machine); without
it the test builds one itself, in a subprocess that sees no GPU (``CUDA_VISIBLE_DEVICES=""``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.build import read_manifest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory) -> tuple[Path, dict]:
    arch = kspec.get_device().arch
    given = os.environ.get("KSPEC_PREBUILT_DIR")
    if given:
        out = Path(given)
    else:
        out = tmp_path_factory.mktemp("prebuilt")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", KSPEC_CACHE_DIR=str(out / "cache"))
        cmd = [sys.executable, "-m", "kspec", "build", str(REPO / "specs" / "raw.toml"), "--arch", arch, "-o", str(out)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    manifest = read_manifest(out)
    assert manifest is not None, f"no manifest in {out}"
    return out, manifest


def _entry(manifest: dict, kernel: str, arch: str) -> dict:
    for e in manifest["entries"]:
        if e["kernel"] == kernel and e["arch"] == arch:
            return e
    raise AssertionError(f"{kernel} for {arch} is not in the build (archs: {sorted({e['arch'] for e in manifest['entries']})})")


def test_extern_c_kernel_from_build_output(prebuilt):
    out, manifest = prebuilt
    entry = _entry(manifest, "my_add", kspec.get_device().arch)
    module = kspec.RawModule(path=str(out / entry["file"]))
    add = module.get_function("my_add")
    rng = np.random.default_rng(1)
    a, b = rng.random(1000, dtype=np.float32) + 0.5, rng.random(1000, dtype=np.float32) + 0.5
    x1, x2, y = kspec.asarray(a), kspec.asarray(b), kspec.zeros(1000, dtype=np.float32)
    add((4,), (250,), (x1, x2, y))
    np.testing.assert_allclose(y.get(), a + b, rtol=1e-6)


def test_template_kernel_from_build_output_by_lowered_name(prebuilt):
    out, manifest = prebuilt
    entry = _entry(manifest, "fx3", kspec.get_device().arch)
    module = kspec.RawModule(path=str(out / entry["file"]))
    for expr, dtype in (("fx3<float>", np.float32), ("fx3<double>", np.float64)):
        kernel = module.get_function(entry["lowered_names"][expr])  # the manifest keeps the lowered names
        host = np.random.default_rng(2).random(37).astype(dtype) + 1
        arr = kspec.asarray(host)
        kernel((1,), (64,), (arr, np.int32(37)))
        np.testing.assert_allclose(arr.get(), host * 3, rtol=1e-6)
