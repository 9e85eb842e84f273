"""The package as users get it: one version, a licence, the typing marker, a CLI that behaves in a pipe."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import kspec

REPO = Path(__file__).resolve().parents[2]


def test_version_has_one_source():
    import importlib.metadata
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("kspec") == kspec.__version__


def test_cli_version():
    done = subprocess.run([sys.executable, "-m", "kspec", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"kspec {kspec.__version__}"


def test_cli_output_into_a_closed_pipe_exits_quietly():
    # `kspec show saxpy | head -c 0`: the reader is gone before kspec writes; no BrokenPipeError traceback.
    proc = subprocess.Popen([sys.executable, "-m", "kspec", "show", "saxpy", "--specs", str(REPO / "specs")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the child is still importing: its first write meets a pipe with no reader
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_wheel_ships_licence_typing_marker_and_templates(tmp_path):
    pytest.importorskip("build")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(tmp_path), str(REPO)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = tmp_path.glob("kspec-*.whl")
    assert wheel.name.startswith(f"kspec-{kspec.__version__}-py3-none-any")
    names = zipfile.ZipFile(wheel).namelist()
    assert "kspec/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "kspec/_templates/include/kspec/ufunc.cuh" in names
    assert "kspec/_templates/reduction/_macros.cu.j2" in names  # the reduction template's entries and macros
    assert "kspec/jax/_handler.cc" in names  # kspec.jax builds its XLA FFI handler from it at run time
    assert "kspec/_fastcall_c/90_module.cc" in names  # the compiled call path, built from its files at run time
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata
