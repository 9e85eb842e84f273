"""examples/deploy's wheel on the GPU: its kernels load from the CUBINs inside it, NVRTC is never imported.

``KSPEC_DEPLOY_WHEEL`` names a wheel built on a machine without a GPU (``python -m build examples/deploy``);
without it the test builds one itself (needs ``build`` and hatchling), in a subprocess that sees no GPU.
The wheel is pure, so installing it is extracting it: no pip. A fresh process with NVRTC blocked then
creates the CUDA context, times the first call of the typed API, and checks every kernel and
instantiation against NumPy.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers.child_env import child_env
from helpers.deploy_build import EXAMPLE_ARCHS, NO_NVRTC, ROOT, build, build_env, copy_example, entry_point_shim, one, served_by_example

pytestmark = pytest.mark.gpu



@pytest.fixture(scope="module")
def deploy_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("KSPEC_DEPLOY_WHEEL")
    if given:
        wheel = Path(given)
        assert wheel.is_file(), f"KSPEC_DEPLOY_WHEEL={given}: no such file"
        return wheel
    for module in ("build", "hatchling"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"KSPEC_DEPLOY_WHEEL is not set and {module!r} is not installed to build examples/deploy")
    base = tmp_path_factory.mktemp("deploy")
    env = build_env(entry_point_shim(base / "entry-point"), CUDA_VISIBLE_DEVICES="")
    build(copy_example(base / "deploy"), base / "dist", "--wheel", env=env)
    return one(base / "dist", "*.whl")


_RUN = NO_NVRTC + r'''
import time

import numpy as np

import kspec
import deploy_example
from deploy_example.kernels import ops

assert deploy_example.__file__.startswith(sys.argv[1]), deploy_example.__file__
device = kspec.get_device()
rng = np.random.default_rng(0)
n = 1 << 20
hx, hy = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
x, y = kspec.asarray(hx), kspec.asarray(hy)
device.synchronize()  # the context exists and the inputs are there: what remains is the kernel's first call

start = time.perf_counter()
z = ops.scaled_diff(x, y, 2.5)  # scale by value: the wheel ships that specialization too
device.synchronize()
first_ms = (time.perf_counter() - start) * 1e3
np.testing.assert_allclose(z.get(), np.float32(2.5) * (hx - hy), rtol=1e-6)
z = ops.scaled_diff(x, y, kspec.asarray(np.float32(3.0)))  # scale as a one-element device array
np.testing.assert_allclose(z.get(), np.float32(3.0) * (hx - hy), rtol=1e-6)

# float16, through the package's friendly function
hx16, hy16 = hx[:4099].astype(np.float16), hy[:4099].astype(np.float16)
z16 = deploy_example.scaled_diff(kspec.asarray(hx16), kspec.asarray(hy16), 0.5)
assert z16.dtype == np.float16, z16.dtype
expected16 = (np.float32(0.5) * (hx16.astype(np.float32) - hy16.astype(np.float32))).astype(np.float16)
np.testing.assert_allclose(z16.get().astype(np.float32), expected16.astype(np.float32), rtol=1e-3, atol=1e-3)

# float32 reduction: along an axis, and over everything
m = rng.standard_normal((64, 1000)).astype(np.float32)
np.testing.assert_allclose(ops.l2norm(kspec.asarray(m), axis=1).get(), np.linalg.norm(m, axis=1), rtol=1e-4)
np.testing.assert_allclose(deploy_example.l2norm(kspec.asarray(m)).get(), np.linalg.norm(m), rtol=1e-4)

import kspec.compiler._nvrtc as nvrtc_layer
assert nvrtc_layer._module is None, "NVRTC was loaded"
assert "cuda.bindings.nvrtc" not in sys.modules and not [m for m in sys.modules if m.startswith("nvidia.cuda_nvrtc")]
print(f"device={device.arch} first_call_ms={first_ms:.3f}")
'''


def test_wheel_kernels_run_without_nvrtc(deploy_wheel: Path, tmp_path: Path) -> None:
    from kspec.runtime import get_device

    arch = get_device().arch
    if not served_by_example(arch):
        pytest.skip(f"the example ships CUBINs for {', '.join(EXAMPLE_ARCHS)}; none runs on this {arch} device")
    site = tmp_path / "site"
    with zipfile.ZipFile(deploy_wheel) as wheel:  # a pure wheel installs by extraction
        wheel.extractall(site)
    assert (site / "deploy_example" / "kernels" / "_binaries" / "manifest.json").is_file()
    env = child_env(site, ROOT, KSPEC_CACHE_DIR=str(tmp_path / "empty-cache"))  # no cached binary can serve
    done = subprocess.run([sys.executable, "-c", _RUN, str(site)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    first_ms = float(done.stdout.strip().rpartition("first_call_ms=")[2])
    print(f"deploy_example {deploy_wheel.name}: first typed call from the wheel's CUBIN: {first_ms:.2f} ms")  # no timing assertion
