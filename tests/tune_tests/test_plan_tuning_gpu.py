"""`kspec tune` on elementwise and reduction kernels, on the GPU (issue [AT]): the planner's knobs timed on each
case, the record written, calls and a build's served kernels following it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import kspec
from kspec._plan_tuning import KNOBS
from kspec._tuning import BUILD_RECORD, read_record, record_path

pytestmark = pytest.mark.gpu

SPEC = '''schema = 1

[[kernel]]
kind = "elementwise"
name = "sqd"
in_params = "T x, T y"
out_params = "T z"
operation = "z = (x - y) * (x - y)"
instantiations = [{ T = "float32" }, { T = "float16" }]

[kernel.tune]
cases = [
  { args = { x = "float32[1024, 768]", y = "float32[768, 1024].T" } },
  { args = { x = "float16[64, 32, 8]", y = "float16[64, 1, 8]" } },
  { args = { x = "float32[2000, 500]", y = "float32[2000, 500]", z = "float32[500, 2000].T" } },
]

[[kernel]]
kind = "reduction"
name = "l2"
in_params = "T x"
out_params = "T y"
map_expr = "x * x"
reduce_expr = "a + b"
post_map_expr = "y = sqrt(a)"
identity = "0"
instantiations = [{ T = "float32" }]

[kernel.tune]
cases = [
  { args = { x = "float32[256, 4096]" }, axis = [0] },
  { args = { x = "float32[16, 64, 32, 16]" }, axis = [0, 1, 3] },
]
'''


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    from kspec.tune import TuneOptions, tune_files

    path = tmp_path_factory.mktemp("planned") / "planned.toml"
    path.write_text(SPEC)
    lines: list[str] = []
    report = tune_files([path], TuneOptions(budget=300, reps=5, progress=lines.append))
    return path, report, lines


def test_tune_writes_a_planner_entry_per_case(tuned):
    path, report, lines = tuned
    assert report.kernels == {"sqd": "tuned", "l2": "tuned"}, lines
    arch = kspec.runtime.get_device().arch
    kernels = read_record(record_path(path))["archs"][arch]["kernels"]
    lib = kspec.load(path)
    for name, count in (("sqd", 3), ("l2", 2)):
        entry = kernels[name]
        assert entry["key"] == ["layout"] and entry["complete"] and len(entry["buckets"]) == count
        for label, data in entry["buckets"].items():
            space = KNOBS[lib[name].KIND]
            assert all(v in space[k] for k, v in data["winner"]["config"].items()), label
            assert data["default"]["config"] == {} and data["candidates"] >= 1
            assert data["winner"]["ms"] <= data["default"]["ms"]
    labels = set(kernels["sqd"]["buckets"])
    assert "tiled 4B 1024x1024" in labels and "dense 2B 64x32x8" in labels, labels
    again = tune_files_quiet(path)
    assert again.kernels == {"sqd": "up to date", "l2": "up to date"} and not again.written


def tune_files_quiet(path, **options):
    from kspec.tune import TuneOptions, tune_files

    return tune_files([path], TuneOptions(budget=120, reps=5, progress=lambda _: None, **options))


def test_calls_follow_the_record_and_compute_the_same(tuned):
    path, _, _ = tuned
    import cupy as cp

    lib = kspec.load(path)
    rng = np.random.default_rng(3)
    x = cp.asarray(rng.standard_normal((1024, 768)).astype(np.float32))
    y = cp.asarray(rng.standard_normal((768, 1024)).astype(np.float32)).T
    cp.testing.assert_array_equal(lib.sqd(x, y), (x - y) ** 2)
    arch, label, knobs, source = lib.sqd.choices()[0]
    assert (label, source) == ("tiled 4B 1024x1024", "record")
    entry = read_record(record_path(path))["archs"][arch]["kernels"]["sqd"]
    assert (knobs or {}) == entry["buckets"][label]["winner"]["config"]
    # a layout near a tuned one takes its winner
    x2 = cp.asarray(rng.standard_normal((900, 700)).astype(np.float32))
    y2 = cp.asarray(rng.standard_normal((700, 900)).astype(np.float32)).T
    cp.testing.assert_array_equal(lib.sqd(x2, y2), (x2 - y2) ** 2)
    assert lib.sqd.choices()[-1][3] == "record"  # (1024, 1024) after rounding: the same label
    a = cp.asarray(rng.standard_normal((16, 64, 32, 16)).astype(np.float32))
    cp.testing.assert_allclose(lib.l2(a, axis=(0, 1, 3)), cp.sqrt((a * a).sum(axis=(0, 1, 3))), rtol=1e-5)
    assert lib.l2.choices()[0][3] == "record"


def test_every_knob_computes_the_same(tuned):
    """Each distinct launch the knobs give a case (what kspec tune times) writes every element right."""
    import cupy as cp

    k = kspec.ElementwiseKernel("T x, T y", "T z", "z = (x - y) * (x - y)", "sqd_every_knob")
    rng = np.random.default_rng(4)
    for shape in ((37, 1000), (513, 257)):
        x = cp.asarray(rng.standard_normal(shape).astype(np.float32))
        y = cp.asarray(rng.standard_normal(shape[::-1]).astype(np.float32)).T
        for tile in KNOBS["elementwise"]["tile"]:
            for block in KNOBS["elementwise"]["block"]:
                got = k.with_knobs({"tile": tile, "block": block, "per_sm": 4})(x, y)
                cp.testing.assert_array_equal(got, (x - y) ** 2, err_msg=f"{shape} tile {tile} block {block}")
    r = kspec.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "ssq_every_knob")
    h = cp.asarray(rng.standard_normal((64, 48, 16)).astype(np.float32))
    for axis in (0, (0, 2), 1):
        want = (h * h).sum(axis=axis)
        for block in KNOBS["reduction"]["block"]:
            for per_sm in KNOBS["reduction"]["per_sm"]:
                for cols in (0, 1):
                    got = r.with_knobs({"block": block, "per_sm": per_sm, "cols": cols, "slab": cols})(h, axis=axis)
                    cp.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"axis {axis} {block} {per_sm} {cols}")


def test_a_build_serves_the_planner_record_under_compile_never(tuned, tmp_path):
    path, _, _ = tuned
    arch = kspec.runtime.get_device().arch
    from kspec.cli import main

    out = tmp_path / "out"
    assert main(["build", str(path), "--arch", arch, "-o", str(out)]) == 0
    assert set(read_record(out / BUILD_RECORD)["archs"][arch]["kernels"]) == {"sqd", "l2"}
    code = (
        "import cupy as cp, kspec\n"
        f"k = kspec.load({str(path)!r}, binaries={str(out)!r}).sqd\n"
        "x = cp.random.rand(1024, 768, dtype=cp.float32); y = cp.random.rand(768, 1024, dtype=cp.float32).T\n"
        "assert (k(x, y) == (x - y) ** 2).all()\n"
        "print(k.choices()[0][3], [e.source for e in kspec.compile_log()])\n"
    )
    env = {**os.environ, "KSPEC_COMPILE": "never", "KSPEC_CACHE_DIR": str(tmp_path / "empty-cache")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("record") and "compiled" not in done.stdout
