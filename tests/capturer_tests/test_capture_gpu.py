"""kspec capture on a GPU (issue [CAP]): kernels a program builds, captured, built for the device and served to a
fresh process by content with kspec's NVRTC blocked, KSPEC_COMPILE=never and an empty cache; and the same for
code written for CuPy (cupyx.scipy) under the kspec.cupy switch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.child_env import child_env
from test_capture import PROGRAM, SERVE

pytestmark = pytest.mark.gpu


def _arch() -> str:
    from kspec.runtime import get_device

    return str(get_device().arch)


def _env(**extra: str) -> dict[str, str]:
    return child_env(unset=("KSPEC_BINARIES", "KSPEC_DEVICE", "KSPEC_CUPY", "KSPEC_CAPTURE_DIR"), **extra)


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


def _capture_build_serve(tmp: Path, program: str, *, no_cupy: bool) -> tuple[str, str, str]:
    (tmp / "program.py").write_text(program)
    env = _env(KSPEC_CACHE_DIR=str(tmp / "capture-cache"))
    flags = ["--no-cupy"] if no_cupy else []
    captured = _run([sys.executable, "-m", "kspec", "capture", "-o", "specs", *flags, "--", sys.executable, "program.py"],
                    tmp, env)  # fmt: skip
    _run([sys.executable, "-m", "kspec", "build", "specs", "-o", "build", "--arch", _arch()], tmp, env)
    (tmp / "serve.py").write_text(SERVE)
    serve_env = _env(KSPEC_COMPILE="never", KSPEC_BINARIES=str(tmp / "build"), KSPEC_CACHE_DIR=str(tmp / "empty-cache"),
                     KSPEC_MEMO_DIR=str(tmp / "memo"))
    if not no_cupy:  # the switch as python -m kspec.cupy arms it, in the serving process too
        from kspec.cupy import launch_environment

        launch_environment(serve_env)
    served = _run([sys.executable, "serve.py"], tmp, serve_env)
    return captured, served, (tmp / "specs").as_posix()


def test_kspec_constructors_captured_and_served_on_the_gpu(tmp_path):
    captured, served, _ = _capture_build_serve(tmp_path, PROGRAM, no_cupy=True)
    expected = captured.splitlines()[0]
    lines = served.splitlines()
    assert lines[0] == expected
    log = eval(lines[1])  # noqa: S307 - our own program's printed list
    assert log and {source for _, source in log} == {"binary"}, log
    _no_call_path_compiled(tmp_path)


CUPYX_PROGRAM = '''
import cupy
import cupyx.scipy.ndimage as ndi
import numpy as np

rng = np.random.default_rng(3)
image = cupy.asarray(rng.random((64, 80), dtype=np.float32))
outs = [ndi.uniform_filter(image, 5), ndi.gaussian_filter(image, 2.0), ndi.median_filter(image, 3),
        ndi.zoom(image, 1.5, order=1), ndi.sobel(image)]
twice = cupy.ElementwiseKernel("T x", "T y", "y = x + x", "twice_cap")(image)
print([round(float(o.sum()), 3) for o in [*outs, twice]], type(twice).__name__)
'''


def test_cupyx_scipy_captured_and_served_without_compiler(tmp_path):
    pytest.importorskip("cupy")
    captured, served, specs = _capture_build_serve(tmp_path, CUPYX_PROGRAM, no_cupy=False)
    assert captured.splitlines()[0] == served.splitlines()[0]
    log = eval(served.splitlines()[1])  # noqa: S307
    assert log and {source for _, source in log} == {"binary"}, log
    files = sorted(p.name for p in Path(specs).iterdir())
    assert any(name.startswith("cupyx_scipy_ndimage") for name in files), files
    _no_call_path_compiled(tmp_path)


def _no_call_path_compiled(tmp: Path) -> None:
    """The served process compiled none of the call path's generated code: the capture kept its sources, the build
    compiled them, and the memo directory (where a process keeps code it compiled) got nothing."""
    assert "def launch_call(" in (tmp / "specs" / "call-path.txt").read_text()
    assert list((tmp / "build" / "callpath").glob("*.marshal"))
    assert not list((tmp / "memo").glob("callpath/*.marshal")), sorted((tmp / "memo").glob("callpath/*"))


FALLBACK_PROGRAM = '''
import cupy
from cupy.cuda.compiler import CompileException

x = cupy.arange(6, dtype=cupy.float32)
y = cupy.empty_like(x)
try:  # cuCIM's separable filters: a shared-memory kernel that may not compile, the elementwise one when it does not
    module = cupy.RawModule(code='extern "C" __global__ void fast(const float* x, float* y) { y[0] = missing(x); }')
    module.get_function("fast")((1,), (1,), (x, y))
    path = "fast"
except CompileException:
    path = "fallback"
    y = cupy.ElementwiseKernel("T x", "T y", "y = x + x", "twice_fallback")(x)
print(path, y.get().tolist())
'''


def test_a_module_that_failed_to_compile_is_cupys_compile_exception_where_served(tmp_path):
    pytest.importorskip("cupy")
    captured, served, specs = _capture_build_serve(tmp_path, FALLBACK_PROGRAM, no_cupy=False)
    assert captured.splitlines()[0] == "fallback [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]"
    assert served.splitlines()[0] == captured.splitlines()[0]
    log = eval(served.splitlines()[1])  # noqa: S307
    assert log == [("twice_fallback", "binary")], log
    assert "compile_fails = true" in (Path(specs) / "main.toml").read_text()
