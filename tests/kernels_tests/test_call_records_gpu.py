"""Call records on a GPU (kspec/kernels/records/_call_store.py): a process plans and records calls on CuPy, PyTorch and
kspec arrays; the next finds them, plans nothing and computes the same (outputs allocated and given, scalars,
split reductions, a stream). The CPU device's tests: tests/kernels_tests/test_call_records.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from helpers.child_env import child_env

SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import kspec
    from kspec.kernels.planning import _planner, _reduction_planner
    first = sys.argv[1] == "first"
    rng = np.random.default_rng(5)
    host = rng.standard_normal((300, 517), dtype=np.float32)
    libs = {"kspec": (kspec.asarray, lambda a: a.get())}
    try:
        import cupy
        libs["cupy"] = (cupy.asarray, cupy.asnumpy)
    except ImportError:
        pass
    try:
        import torch
        libs["torch"] = (lambda a: torch.as_tensor(a, device="cuda"), lambda t: t.cpu().numpy())
    except ImportError:
        pass
    kspec.asarray(host).get()  # the driver is up before the constructors, as in a serving process
    if not first:
        def refuse(*a, **k):
            raise AssertionError("planned a recorded call")
        _planner.prepare_elementwise = _reduction_planner.prepare_reduction = refuse
    axpy = kspec.ElementwiseKernel("float32 x, float32 y, float32 a", "float32 z", "z = a * x + y", "rec_gpu_axpy")
    rows = kspec.ReductionKernel("float32 x", "float32 y", "x * x", "a + b", "y = sqrt(a)", "0", "rec_gpu_norm")
    assert ("_spec" not in axpy.__dict__) != first
    stream = kspec.Stream(non_blocking=True)
    for name, (to, back) in libs.items():
        x, y = to(host), to(host[::-1].copy())
        z = back(axpy(x, y, 1.5))
        assert np.allclose(z, 1.5 * host + host[::-1], atol=1e-5), name
        out = to(np.zeros_like(host))
        if name == "kspec":  # outputs given
            axpy(x, y, np.float32(2.0), out)
        else:  # transposed views, outputs given
            axpy(x.T, y.T, np.float32(2.0), out.T)
        assert np.allclose(back(out), 2 * host + host[::-1], atol=1e-5), name
        assert np.allclose(back(rows(x, axis=1)), np.sqrt((host.astype(np.float64) ** 2).sum(1)), rtol=1e-4), name
        assert np.allclose(back(rows(x)), np.sqrt((host.astype(np.float64) ** 2).sum()), rtol=1e-4), name
        if name == "kspec":
            z = axpy(x, y, 1.0, stream=stream)
            stream.synchronize()
            assert np.allclose(back(z), host + host[::-1], atol=1e-5), name
    print("ok", sys.argv[1], sorted(libs))
''')


@pytest.mark.gpu
def test_calls_recorded_in_one_process_are_served_in_the_next(tmp_path):
    env = child_env(KSPEC_MEMO_DIR=str(tmp_path / "memo"))
    for name in ("KSPEC_CALL_RECORDS", "KSPEC_DEVICE", "KSPEC_TUNING"):
        env.pop(name, None)
    # records serve one-device processes: on a machine with several GPUs the two processes see the first
    env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    for which in ("first", "second"):
        done = subprocess.run([sys.executable, "-c", SCRIPT, which], env=env, capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split()[:2] == ["ok", which], done.stdout
    assert len(list((tmp_path / "memo" / "calls").rglob("*.kcr"))) == 2
