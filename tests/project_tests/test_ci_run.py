""".ci/run refuses to make its venv from a Python that has NVIDIA or CUDA packages (a venv made from one can
borrow them, and CI would pass where a user's fresh venv fails). Run on a copy of the script next to a README
whose commands could not succeed, so that a guard that let the run through fails fast, and visibly."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_README = """\
```bash
python3 -m pip install --no-index "kspec-ci-guard-test-no-such-package[nvrtc]" && kspec build specs/ -o build/kernels
python3 -m pip install --no-index "kspec-ci-guard-test-no-such-package[nvrtc,test,docs]" && python3 -m pytest -q
```
"""


def _run_ci(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "README.md").write_text(_README)
    environ = {**os.environ, "TMPDIR": str(tmp_path), **env}
    return subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=environ, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_refuses_a_base_python_with_cuda_packages(tmp_path: Path) -> None:
    assert importlib.util.find_spec("cuda") is not None  # kspec depends on cuda-bindings: this Python has them
    proc = _run_ci(tmp_path, KSPEC_CI_PYTHON=sys.executable)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"the interpreter the venv is made from ({sys.executable}) can import" in proc.stderr, proc.stderr
    assert "cuda (" in proc.stderr and "set KSPEC_CI_PYTHON to a Python without them" in proc.stderr, proc.stderr
    assert "fresh venv" not in proc.stdout and not list(tmp_path.glob("kspec-ci.*")), proc.stdout


def test_a_clean_python_passes_and_pythonpath_is_not_borrowed(tmp_path: Path) -> None:
    """A Python without site-packages (``-S``) is clean; PYTHONPATH is cleared, so a package put there by hand
    is not borrowed either: the run gets past the guard and fails only at the README's (impossible) install."""
    clean = tmp_path / "clean-python"
    clean.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    clean.chmod(0o755)
    (tmp_path / "by-hand" / "nvidia").mkdir(parents=True)
    proc = _run_ci(tmp_path, KSPEC_CI_PYTHON=str(clean), PYTHONPATH=str(tmp_path / "by-hand"))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "can import" not in out, out
    assert "+ (fresh venv " in proc.stdout, out
    assert "kspec-ci-guard-test-no-such-package" in out, out  # it reached the README's first command
