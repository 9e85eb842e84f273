"""Tuned raw kernels on the GPU (issue [AT]): every config's results, `kspec tune` end to end, a build's
binaries served under KSPEC_COMPILE=never."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec._tuning import BUILD_RECORD, config_label, configs, read_record, record_path

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
TUNED = REPO / "specs" / "tuned.toml"


def stencil_reference(src):
    padded = np.pad(src, 1, mode="edge")
    return (0.2 * (src + padded[1:-1, :-2] + padded[1:-1, 2:] + padded[:-2, 1:-1] + padded[2:, 1:-1])).astype(np.float32)


@pytest.mark.parametrize("n, m", [(37, 1000), (1000, 37), (513, 257)])
def test_every_transpose_config_transposes(n, m):
    kernel = kspec.load(TUNED).transpose_tiled
    src = np.random.default_rng(0).standard_normal((n, m)).astype(np.float32)
    for config in configs(kernel.space):
        dst = kspec.zeros((m, n), np.float32)
        grid, block, shared = kernel.launch_config(config, (n, m))
        kernel.kernel_for(config)(grid, block, (kspec.asarray(src), dst, np.int32(n), np.int32(m)), shared_mem=shared)
        np.testing.assert_array_equal(dst.get(), src.T, err_msg=config_label(config))


@pytest.mark.parametrize("ny, nx", [(67, 129), (5, 300)])
def test_every_stencil_config_averages(ny, nx):
    kernel = kspec.load(TUNED).stencil5
    src = np.random.default_rng(1).standard_normal((ny, nx)).astype(np.float32)
    want = stencil_reference(src)
    for config in configs(kernel.space):
        dst = kspec.zeros((ny, nx), np.float32)
        grid, block, shared = kernel.launch_config(config, (ny, nx))
        kernel.kernel_for(config)(grid, block, (kspec.asarray(src), dst, np.int32(ny), np.int32(nx)), shared_mem=shared)
        np.testing.assert_allclose(dst.get(), want, rtol=1e-6, atol=1e-6, err_msg=config_label(config))


def test_tune_writes_a_record_that_calls_follow(tmp_path):
    from kspec.tune import TuneOptions, tune_files

    spec_file = tmp_path / "tuned.toml"
    shutil.copy(TUNED, spec_file)
    shapes = [{"n": 1024, "m": 512}, {"ny": 512, "nx": 1024}]
    report = tune_files([spec_file], TuneOptions(shapes=shapes, budget=120, reps=5, progress=lambda _: None))
    assert report.kernels == {"transpose_tiled": "tuned", "stencil5": "tuned"}
    record = read_record(record_path(spec_file))
    arch = kspec.runtime.get_device().arch
    entry = record["archs"][arch]["kernels"]["transpose_tiled"]
    data = entry["buckets"]["n=1024,m=512"]
    assert entry["complete"] and data["winner"]["ms"] <= data["default"]["ms"]
    assert data["winner"]["ms"] <= data["runner_up"]["ms"]
    assert data["candidates"] == len(configs(kspec.load(spec_file).transpose_tiled.space))
    # a call of that bucket runs the winner, and computes the transpose
    kernel = kspec.load(spec_file).transpose_tiled
    src = np.random.default_rng(2).standard_normal((1000, 500)).astype(np.float32)
    dst = kspec.zeros((500, 1000), np.float32)
    kernel(kspec.asarray(src), dst, np.int32(1000), np.int32(500))
    np.testing.assert_array_equal(dst.get(), src.T)
    assert kernel.choices() == [(arch, "n=1024,m=512", data["winner"]["config"], "record")]
    # unchanged: nothing re-tuned; forced: tuned again
    again = tune_files([spec_file], TuneOptions(shapes=shapes, budget=60, reps=5, progress=lambda _: None))
    assert again.kernels == {"transpose_tiled": "up to date", "stencil5": "up to date"} and not again.written
    forced = tune_files([spec_file], TuneOptions(shapes=shapes[:1], budget=60, reps=5, force=True, progress=lambda _: None))
    assert forced.kernels["transpose_tiled"] == "tuned"


def test_a_build_with_a_record_serves_the_winner_under_compile_never(tmp_path):
    from kspec.tune import TuneOptions, tune_files

    spec_file = tmp_path / "tuned.toml"
    shutil.copy(TUNED, spec_file)
    tune_files([spec_file], TuneOptions(shapes=[{"n": 2048, "m": 256}], budget=60, reps=5, progress=lambda _: None))
    arch = kspec.runtime.get_device().arch
    out = tmp_path / "out"
    from kspec.cli import main

    assert main(["build", str(spec_file), "--arch", arch, "-o", str(out)]) == 0
    assert "transpose_tiled" in read_record(out / BUILD_RECORD)["archs"][arch]["kernels"]
    code = (
        "import numpy as np, kspec\n"
        f"k = kspec.load({str(spec_file)!r}, binaries={str(out)!r}).transpose_tiled\n"
        "src = np.arange(2000 * 200, dtype=np.float32).reshape(2000, 200)\n"
        "dst = kspec.zeros((200, 2000), np.float32)\n"
        "k(kspec.asarray(src), dst, np.int32(2000), np.int32(200))\n"
        "assert (dst.get() == src.T).all()\n"
        "print(k.choices()[0][3], [e.source for e in kspec.compile_log()])\n"
    )
    env = {**os.environ, "KSPEC_COMPILE": "never", "KSPEC_CACHE_DIR": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("record") and "compiled" not in done.stdout
