"""The compiled call path on the GPU (issue [Q]): calls launch from C through the driver's ``cuLaunchKernel``
and compute what the Python path computes, for CuPy, PyTorch and kspec arrays, scalars, allocated outputs,
split reductions (a workspace, two launches), explicit streams and ``with kspec.Stream`` blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kspec
from kspec.runtime import direct_launch_address, fastcall_module, reset_call_path

pytestmark = pytest.mark.gpu


def _kernels(path: str) -> dict[str, Any]:
    """Kernels of their own per path (the same constructor call gives the same kernel object back)."""
    return {
        "sqd": kspec.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", f"sqd_{path}"),
        "axpb": kspec.ElementwiseKernel("T x, T a, int64 b", "T z, T w", "z = a * x + b; w = z - x", f"axpb_{path}"),
        "total": kspec.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", f"sum_{path}"),
    }


def _calls(xp: Any, make: Callable[[Any], Any], path: str) -> list[Any]:
    import cupy as cp

    k = _kernels(path)
    rng = np.random.default_rng(11)
    x, y = (make(rng.standard_normal((96, 257)).astype(np.float32)) for _ in range(2))
    z = xp.empty_like(x)
    out = [k["sqd"](x, y, z), k["sqd"](x, y), *k["axpb"](x, 2.0, 3), *k["axpb"](x.T, 0.5, -(2**40)),
           k["total"](x), k["total"](x, axis=0), k["total"](x[:, ::2], axis=1)]  # fmt: skip
    big = make(np.ones((4096, 8192), np.float32))
    out.append(k["total"](big))  # a split reduction: workspace and a second launch
    for _ in range(3):  # repeated: the prepared calls' path
        out.append(k["sqd"](x, y).copy() if xp is cp else k["sqd"](x, y).clone())
    s = cp.cuda.Stream(non_blocking=True)
    if xp is cp:
        out.append(k["sqd"](x, y, stream=s))
        with kspec.Stream(non_blocking=True) as ks:
            out.append(k["total"](x, axis=1))
            ks.synchronize()
    s.synchronize()
    return [np.asarray(o.get() if hasattr(o, "get") else o.cpu().numpy()) for o in out]


@pytest.fixture
def python_path(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    def switch() -> None:
        monkeypatch.setenv("KSPEC_CALL_PATH", "python")
        reset_call_path()

    yield switch
    monkeypatch.undo()
    reset_call_path()


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_compiled_path_computes_what_the_python_path_computes(library: str, python_path: Callable[[], None]) -> None:
    fastcall = fastcall_module(wait=True)
    from cuda.bindings import driver

    assert fastcall is not None and direct_launch_address(driver.cuLaunchKernel) != 0
    if library == "cupy":
        import cupy as xp

        make: Callable[[Any], Any] = xp.asarray
    else:
        xp = pytest.importorskip("torch")
        make = lambda a: xp.from_numpy(a).cuda()  # noqa: E731
    compiled = _calls(xp, make, f"c_{library}")
    kernels = _kernels(f"c_{library}")
    assert type(kernels["sqd"]._calls.call) is fastcall.Dispatch
    for k in kernels.values():
        assert {type(p.launch) for p in k._calls.prepared_calls()} == {fastcall.FastLaunch}
    python_path()
    reference = _calls(xp, make, f"py_{library}")
    for k in _kernels(f"py_{library}").values():
        assert not {type(p.launch) for p in k._calls.prepared_calls()} & {fastcall.FastLaunch}
    assert len(compiled) == len(reference)
    for got, want in zip(compiled, reference):
        np.testing.assert_array_equal(got, want)


def test_compiled_path_on_kspec_arrays_and_out_of_range_scalars() -> None:
    assert fastcall_module(wait=True) is not None
    k = _kernels("c_kspec")
    x = kspec.asarray(np.arange(1000, dtype=np.float32))
    z = kspec.empty((1000,), np.float32)
    for _ in range(2):
        k["sqd"](x, x, z)
        np.testing.assert_array_equal(z.get(), np.zeros(1000, np.float32))
    with pytest.raises((TypeError, ValueError, OverflowError), match="b"):
        k["axpb"](x, 1.0, 2**70)  # past int64: the packer's error, nothing launched


RAW = r"""
extern "C" __global__ void axpy(const float* x, float* y, float a, long long n, unsigned char flag) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = flag ? a * x[i] + y[i] : y[i];
}
"""


def test_raw_kernel_calls_from_c() -> None:
    """A RawKernel's __call__ in C (kspec_fastcall.RawCall) for CuPy, PyTorch and kspec arrays, NumPy and
    Python scalars, streams; what it does not cover goes to the Python packer, which raises as before."""
    import cupy as cp

    if kspec.runtime.device_count() > 1:  # a process that sees several GPUs reads each array's device in Python
        pytest.skip("the C call path of a RawKernel serves one-device processes (kspec/runtime/_packer.py)")

    fastcall = fastcall_module(wait=True)
    assert fastcall is not None
    k = kspec.RawKernel(RAW, "axpy")
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    y = cp.ones(n, dtype=cp.float32)
    k((4,), (256,), (x, y, np.float32(2.0), n, np.uint8(1)))
    k((4,), (256,), (x, y, np.float32(2.0), np.int64(n), True))  # another signature: the packer of the last one is installed
    assert type(type(k).__dict__["__call__"]) is fastcall.RawCall
    s = cp.cuda.Stream(non_blocking=True)
    s.wait_event(cp.cuda.get_current_stream().record())  # a non-blocking stream does not wait for the default one
    k(4, 256, (x, y, np.float32(-1.0), n, np.uint8(1)), stream=s)
    s.synchronize()
    np.testing.assert_allclose(y.get(), 1 + 3 * np.arange(n, dtype=np.float32), rtol=1e-6)
    with pytest.raises(Exception, match="grid"):
        k((1.5,), (256,), (x, y, np.float32(2.0), np.int64(n), True))  # the packer's error, from the Python body
    torch = pytest.importorskip("torch")
    tx = torch.arange(n, dtype=torch.float32, device="cuda")
    ty = torch.zeros(n, dtype=torch.float32, device="cuda")
    for _ in range(2):
        k((4,), (256,), (tx, ty, np.float32(1.0), n, np.uint8(1)))
    torch.cuda.synchronize()
    assert type(type(k).__dict__["__call__"]) is fastcall.RawCall
    np.testing.assert_allclose(ty.cpu().numpy(), 2 * np.arange(n, dtype=np.float32))
    kx = kspec.asarray(np.arange(n, dtype=np.float32))
    ky = kspec.zeros((n,), np.float32)
    for _ in range(2):
        k((4,), (256,), (kx, ky, np.float32(1.0), n, np.uint8(1)))
    np.testing.assert_allclose(ky.get(), 2 * np.arange(n, dtype=np.float32))
