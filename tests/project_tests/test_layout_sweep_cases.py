"""benchmarks/kernels/layout_sweep.py's cases (issue [P4]): drawn afresh each run unless a seed is given, the seed
printed to repeat a run, and the middle-axis class (per-channel statistics of NCHW and NHWC tensors) on 4-d shapes.
``--list`` needs no GPU."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels" / "layout_sweep.py"


def _list(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--list", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_the_middle_class_reduces_nchw_and_nhwc_per_channel_on_4d_shapes() -> None:
    lines = _list("--classes", "middle", "--dtypes", "float32", "--cases", "6", "--seed", "11")
    rows = [line for line in lines if line.startswith("middle")]
    assert len(rows) == 6 and lines[-1] == "6 cases"
    axes = [row.split("axes ")[1] for row in rows]
    assert axes == ["(0, 2, 3)", "(1,)", "(0, 1, 2)"] * 2
    shapes = [ast.literal_eval(row.split("float32")[1].split("axes")[0].strip()) for row in rows]
    assert all(len(s) == 4 and 2**24 <= math.prod(s) <= 2**27 for s in shapes)


def test_shapes_are_fresh_each_run_and_a_printed_seed_repeats_them() -> None:
    first, second = _list("--cases", "4"), _list("--cases", "4")
    seed = first[0].split()[1]
    assert first[0] == f"seed {seed} (--seed {seed} repeats these cases)"
    assert first[1:] != second[1:]  # two fresh draws (the chance of equal draws is nil)
    assert _list("--cases", "4", "--seed", seed)[1:] == first[1:]


def test_the_narrow_class_permutes_short_last_axes_away_from_innermost() -> None:
    rows = [line for line in _list("--classes", "narrow", "--dtypes", "float16", "--cases", "5", "--seed", "3")
            if line.startswith("narrow")]
    assert len(rows) == 10  # 5 cases of each rank
    for row in rows:
        shape = ast.literal_eval(row.split("float16")[1].split("perm")[0].strip())
        perm = ast.literal_eval(row.split("perm ")[1])
        assert shape[-1] in (2, 3, 4, 6, 8) and perm[-1] != len(shape) - 1 and sorted(perm) == list(range(len(shape)))
