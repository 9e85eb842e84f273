"""How GPU tests skip on a machine without a GPU (tests/conftest.py): kspec's reason once, one summary line.

A small suite with this conftest runs in a subprocess; on a machine with a GPU its tests would run, so there
is nothing to check there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kspec.runtime import why_no_device

from helpers.child_env import child_env

ROOT = Path(__file__).resolve().parents[2]

_SUITE = """
import pytest

@pytest.mark.gpu
def test_one(): pass

@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 2])
def test_two(n): pass

@pytest.mark.gpu
class TestThree:
    @pytest.fixture(scope="class")
    def device(self):
        raise AssertionError("a skipped GPU test's fixture was set up")

    def test_three(self, device): pass

def test_cpu(): pass
"""


@pytest.mark.skipif(why_no_device() is None, reason="a CUDA device is present: GPU tests run here")
def test_reason_printed_once_and_skips_folded_into_one_line(tmp_path: Path) -> None:
    reason = why_no_device()
    assert reason is not None
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_suite.py").write_text(_SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a CUDA device\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", "--strict-markers"],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[-1].startswith("1 passed, 4 skipped"), out
    assert out.count(reason) == 1 and "4 GPU tests skipped" in out, out
    (skipped,) = [line for line in lines if line.startswith("SKIPPED")]
    first_clause = reason.split("; ")[0].split(". ")[0]
    assert skipped.startswith("SKIPPED [4] conftest.py:") and f": {first_clause} (GPU test;" in skipped, skipped
    assert len(skipped) < 200, skipped
