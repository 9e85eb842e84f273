"""examples/cupy-library's loop on the CPU device (issue [CAP]): a program's constructor calls captured, a wheel of
the captured specs built by the hatch hook (``archs = ["host"]``), installed into a fresh venv, and the program run
there with NVRTC blocked, KSPEC_COMPILE=never, an empty cache and no KSPEC_BINARIES: the installed wheel's
registration alone serves every kernel. (The example itself runs cupyx.scipy on a GPU: run.sh.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("hatchling", reason="building the wheel needs hatchling (the test extra)")

from helpers.deploy_build import NO_NVRTC, ROOT, build, build_env, entry_point_shim, make_venv, one, pip_install  # noqa: E402
from test_capture import PROGRAM  # noqa: E402

EXAMPLE = ROOT / "examples" / "cupy-library"


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_captured_wheel_serves_a_fresh_venv(tmp_path: Path) -> None:
    project = tmp_path / "cupy-library"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("captured", "dist", "venv", "kernels", "__pycache__"))
    (project / "program.py").write_text(PROGRAM)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('archs = ["sm_80", "sm_90"]', 'archs = ["host"]'))
    env = build_env(entry_point_shim(tmp_path / "shim"), KSPEC_DEVICE="cpu")
    env.pop("KSPEC_BINARIES", None)
    expected = _run([sys.executable, "-m", "kspec", "capture", "-o", "captured", "--", sys.executable, "program.py"],
                    project, env).splitlines()[0]  # fmt: skip
    build(project, tmp_path / "dist", "--wheel", env=env)
    wheel = one(tmp_path / "dist", "*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "cupyx_kernels-0.1.0.data/data/share/kspec/binaries/cupyx_kernels.json" in names
    assert any(n.startswith("cupyx_kernels/kernels/_binaries/") and n.endswith(".so") for n in names), names

    python = make_venv(tmp_path / "venv")
    pip_install(python, env, "--no-index", str(wheel))
    serve = NO_NVRTC + (project / "program.py").read_text() + (
        "\nimport kspec\nprint(sorted({(e.kernel, e.source) for e in kspec.compile_log()}))\n"
        "print([str(s.directory) for s in kspec.registered_binaries()])\n")
    (tmp_path / "serve.py").write_text(serve)
    served_env = {**env, "KSPEC_COMPILE": "never", "KSPEC_CACHE_DIR": str(tmp_path / "cache"),
                  "KSPEC_MEMO_DIR": str(tmp_path / "memo")}
    out = _run([str(python), str(tmp_path / "serve.py")], tmp_path, served_env).splitlines()
    assert out[0] == expected
    loads = eval(out[1])  # noqa: S307 - our own program's printed list
    assert {source for _, source in loads} == {"binary"}, loads
    assert {kernel for kernel, _ in loads} == {"combine", "total", "scale", "raw_module"}
    stores = eval(out[2])  # noqa: S307
    assert len(stores) == 1 and stores[0].startswith(str(tmp_path / "venv")), stores
