"""Building examples/deploy for the tests (test_hatch_hook.py on the CPU, test_deploy_gpu.py on the GPU).

Builds run ``python -m build --no-isolation``: the PEP 517 path a user takes, with the backend in this
environment and kspec from this checkout on PYTHONPATH (build's dependency check passes: hatchling and
kspec[nvrtc] are installed here). Every build works on a copy of the example, never in the repository.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

from helpers.child_env import child_path

ROOT = Path(__file__).resolve().parents[2]
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
    carries exactly the entry points pyproject.toml declares, in a distribution of its own name.) Where kspec is
    not installed at all (the checkout on PYTHONPATH, as on the GPU machine), the shim is kspec's own metadata,
    its version and extras: ``build`` checks an example's ``kspec[nvrtc]`` build requirement against it."""
    if any(ep.name == "kspec" and ep.value == "kspec.hatch._plugin"
           for ep in importlib.metadata.entry_points(group="hatch")):  # fmt: skip
        return None
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entry_points = "[hatch]\n" + "".join(f"{k} = {v}\n" for k, v in project["entry-points"]["hatch"].items())
    try:
        importlib.metadata.distribution("kspec")
    except importlib.metadata.PackageNotFoundError:
        from kspec import __version__

        info = directory / f"kspec-{__version__}.dist-info"
        extras = "".join(f"Provides-Extra: {extra}\n" for extra in project.get("optional-dependencies", {}))
        metadata = f"Metadata-Version: 2.1\nName: kspec\nVersion: {__version__}\n{extras}"
    else:
        info = directory / "kspec_hatch_entry_point-0.dist-info"
        metadata = "Metadata-Version: 2.1\nName: kspec-hatch-entry-point\nVersion: 0\n"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(metadata)
    (info / "entry_points.txt").write_text(entry_points)
    return directory


def build_env(shim: Path | None, **extra: str) -> dict[str, str]:
    """This environment with kspec from the checkout importable, without a stray KSPEC_SKIP_COMPILE."""
    first = [shim, ROOT] if shim is not None else [ROOT]
    env = {k: v for k, v in os.environ.items() if k != "KSPEC_SKIP_COMPILE"}
    return {**env, "PYTHONPATH": child_path(*first), **extra}


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


def make_venv(path: Path) -> Path:
    """A venv that sees this environment's packages (kspec's dependencies, hatchling, pip) and installs into
    itself, and nothing of the interpreter it is based on: no ``--system-site-packages``, which would let it
    borrow what that interpreter happens to have (on a machine prepared by hand, NVIDIA's wheels) and pass
    where a user's venv fails. A ``.pth`` file adds this environment's site directories after the new venv's
    own (so what it installs wins). That is enough for imports, not for NVIDIA's wheels: cuda.pathfinder
    finds libnvrtc and the CUDA headers by file path under the interpreter's own site directories
    (``site.getsitepackages()``), never through sys.path, so the venv gets them as an install would put
    them, as links to this environment's copies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    assert python.exists()
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    outer = [d for d in (*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else []))
             if Path(d).is_dir()]  # fmt: skip
    (own / "_outer_environment.pth").write_text("".join(f"{d}\n" for d in outer))
    _link_nvidia_wheels(outer, own)
    return python


def _link_nvidia_wheels(outer: list[str], own: Path) -> None:
    """Links ``own/nvidia/<part>`` to each ``nvidia/<part>`` of the outer site directories (the first one wins,
    as on sys.path): the layout that installing the nvrtc extra's wheels into the venv would give. Nothing
    when this environment has none (NVRTC then comes from the system, for the venv as for this process)."""
    for directory in outer:
        for part in sorted(Path(directory, "nvidia").glob("*")):
            link = own / "nvidia" / part.name
            if part.name != "__pycache__" and not link.exists():
                link.parent.mkdir(exist_ok=True)
                link.symlink_to(part, target_is_directory=part.is_dir())


def pip_install(python: Path, env: dict[str, str], *args: str) -> None:
    proc = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "install", "--no-deps", *args],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


EXAMPLE_ARCHS = ("sm_80", "sm_90")  # examples/deploy/pyproject.toml


def served_by_example(device_arch: str) -> bool:
    """Whether a shipped CUBIN runs on the device: same major arch, minor not above the device's."""
    digits = device_arch.removeprefix("sm_")
    major, minor = int(digits[:-1]), int(digits[-1])
    return any(int(a[3:-1]) == major and int(a[-1]) <= minor for a in EXAMPLE_ARCHS)
