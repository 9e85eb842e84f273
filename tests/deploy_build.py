"""Building examples/deploy for the tests (test_hatch_hook.py on the CPU, test_deploy_gpu.py on the GPU).

Builds run ``python -m build --no-isolation``: the PEP 517 path a user takes, with the backend in this
environment and kspec from this checkout on PYTHONPATH (build's dependency check passes: hatchling and
kspec[nvrtc] are installed here). Every build works on a copy of the example, never in the repository.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "deploy"

# Blocks NVRTC in a subprocess: prepended to a script, any import of the binding or its wheel fails.
NO_NVRTC = r'''
import importlib.abc, sys

class _NoNvrtc(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "cuda.bindings.nvrtc" or name.startswith("nvidia.cuda_nvrtc"):
            raise ImportError(f"{name} is blocked: this process must not compile")
        return None

sys.meta_path.insert(0, _NoNvrtc())
'''


def entry_point_shim(directory: Path) -> Path | None:
    """A directory to put on PYTHONPATH so that hatchling finds the hook, or None when kspec's installed
    metadata already declares it. (A checkout installed before the entry point existed lacks it; the shim
    carries exactly the entry points pyproject.toml declares, in a distribution of its own name.)"""
    if any(ep.name == "kspec" and ep.value == "kspec.hatch._plugin"
           for ep in importlib.metadata.entry_points(group="hatch")):  # fmt: skip
        return None
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["hatch"]
    info = directory / "kspec_hatch_entry_point-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kspec-hatch-entry-point\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[hatch]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    return directory


def build_env(shim: Path | None, **extra: str) -> dict[str, str]:
    """This environment with kspec from the checkout importable, without a stray KSPEC_SKIP_COMPILE."""
    paths = [str(shim)] if shim is not None else []
    paths += [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {k: v for k, v in os.environ.items() if k != "KSPEC_SKIP_COMPILE"}
    return {**env, "PYTHONPATH": os.pathsep.join(paths), **extra}


def copy_example(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("dist", "kernels", "__pycache__", "*.egg-info")
    shutil.copytree(EXAMPLE, dest, ignore=ignore)
    return dest


def build(project: Path, outdir: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m build --no-isolation`` (add ``--wheel`` / ``--sdist``; neither: an sdist, then a wheel from it)."""
    cmd = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), *args, str(project)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def one(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, found
    return found[0]
