"""Host cost per launch: kspec's RawKernel against cuda.core's ``launch()`` and CuPy's RawKernel.

Same kernel (three arguments: two pointers and an int), same device, same run. Each variant launches
``--calls`` times in a tight loop on the legacy default stream (or the library's current stream, which is
that one) and the time per call is taken before synchronising, so it is the host's cost (the GPU runs
these tiny kernels faster than any host submits them). Variants take turns; the median of ``--repeat``
loops each is reported.

    python benchmarks/host/launch_overhead.py [--calls 20000] [--repeat 15] [--components]

Rows marked "floor" launch the same kernel with parameters packed once, with no argument handling at all:
the bare cuda.bindings ``cuLaunchKernel`` (the floor for any Python launcher built on the bindings, kspec's
included) and libcuda's ``cuLaunchKernel`` loaded by this script through ctypes (what a launcher calling the
driver through ctypes could reach at best).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SOURCE = r"""
extern "C" __global__ void copy3(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""
N = 32


def measure(loops: dict[str, Callable[[int], None]], sync: Callable[[], None], calls: int, repeat: int) -> dict[str, float]:
    """Median host microseconds per call of each ``loop(calls)``.

    The variants take turns (round robin), so drift of the machine over the run (clock, other tenants)
    lands on all of them alike and the ratios stay fair; measured spread between runs was about 0.2 us.
    """
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for loop in loops.values():
        loop(min(calls, 2000))  # warm up: compile, load, build packers
    sync()
    for _ in range(repeat):
        for name, loop in loops.items():
            start = time.perf_counter()
            loop(calls)
            elapsed = time.perf_counter() - start
            sync()
            samples[name].append(elapsed / calls * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


# Each loop is made by a factory that binds its objects as arguments: closures over main()'s local names
# would read them when the (interleaved) measurement runs, after later sections rebound them.


def launch_loop(kernel: Callable[..., object], args: tuple, **kwargs: object) -> Callable[[int], None]:
    """``kernel((1,), (N,), args, **kwargs)``: CuPy's and kspec's RawKernel calling convention."""

    def loop(calls: int) -> None:
        k, a = kernel, args
        if kwargs:
            for _ in range(calls):
                k((1,), (N,), a, **kwargs)
        else:
            for _ in range(calls):
                k((1,), (N,), a)

    return loop


def core_loop(launch: Callable[..., None], stream: object, config: object, kernel: object, args: tuple) -> Callable[[int], None]:
    def loop(calls: int) -> None:
        for _ in range(calls):
            launch(stream, config, kernel, *args)

    return loop


def floor_loop(launch: Callable[..., tuple], fn: object, stream: object, params: int) -> Callable[[int], None]:
    def loop(calls: int) -> None:
        for _ in range(calls):
            launch(fn, 1, 1, 1, N, 1, 1, 0, stream, params, 0)

    return loop


def ctypes_floor_loop(function: object, params: int) -> Callable[[int], None]:
    """libcuda's ``cuLaunchKernel``, loaded here through ctypes, launching ``function`` (a CUfunction) on the
    legacy default stream (the NULL handle) with the ``void*[]`` at address ``params``. One launch is made
    and checked first: the loop ignores the status, as the bindings' floor does."""
    launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    launch.restype = ctypes.c_int
    fn, stream, c_params = ctypes.c_void_p(int(function)), ctypes.c_void_p(0), ctypes.c_void_p(params)
    status = launch(fn, 1, 1, 1, N, 1, 1, 0, stream, c_params, None)
    if status:
        raise RuntimeError(f"cuLaunchKernel through ctypes returned CUresult {status}")

    def loop(calls: int) -> None:
        for _ in range(calls):
            launch(fn, 1, 1, 1, N, 1, 1, 0, stream, c_params, None)

    return loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--components", action="store_true", help="also time the pieces of a launch")
    opts = parser.parse_args()

    import kspec

    loops: dict[str, Callable[[int], None]] = {}
    notes: dict[str, str] = {}

    def add(name: str, loop: Callable[[int], None] | None, sync: Callable[[], None], note: str = "") -> None:
        if loop is None:
            notes[name] = note
            return
        try:
            loop(10)  # builds kspec's packer now; a failing variant is noted
            sync()
        except Exception as exc:
            notes[name] = f"failed: {type(exc).__name__}: {exc}"
            return
        loops[name] = loop

    n32 = np.int32(N)
    device = kspec.get_device()
    kspec_sync = device.synchronize
    kx = kspec.asarray(np.arange(N, dtype=np.float32))
    ky = kspec.zeros(N, np.float32)

    # -- CuPy ----------------------------------------------------------------------------------------------
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        cx = cupy.arange(N, dtype=cupy.float32)
        cy = cupy.zeros(N, dtype=cupy.float32)
        add("CuPy RawKernel (CuPy arrays)", launch_loop(cupy.RawKernel(SOURCE, "copy3"), (cx, cy, n32)), kspec_sync)

    # -- cuda.core -----------------------------------------------------------------------------------------
    try:
        try:
            from cuda.core import Device as CoreDevice, LaunchConfig, ObjectCode, launch
        except ImportError:
            from cuda.core.experimental import Device as CoreDevice, LaunchConfig, ObjectCode, launch
        from kspec.compiler import CompileOptions, compile_cached

        program, _ = compile_cached(SOURCE, name="copy3", options=CompileOptions(arch=device.arch))
        core_device = CoreDevice(device.id)
        core_device.set_current()
        core_kernel = ObjectCode.from_cubin(program.binary).get_kernel("copy3")
        config = LaunchConfig(grid=1, block=N)
        # kx and ky stay alive to the end of main(): cuda.core only gets their addresses
        add(
            "cuda.core launch()",
            core_loop(launch, core_device.default_stream, config, core_kernel, (kx.ptr, ky.ptr, n32)),
            kspec_sync,
        )
    except Exception as exc:
        add("cuda.core launch()", None, kspec_sync, f"unavailable: {type(exc).__name__}: {exc}")

    # -- kspec -------------------------------------------------------------------------------------------
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tx = torch.arange(N, dtype=torch.float32, device="cuda")
        ty = torch.zeros(N, dtype=torch.float32, device="cuda")
    add("kspec RawKernel (kspec arrays)", launch_loop(kspec.RawKernel(SOURCE, "copy3"), (kx, ky, n32)), kspec_sync)
    if cupy is not None:
        add("kspec RawKernel (CuPy arrays)", launch_loop(kspec.RawKernel(SOURCE, "copy3"), (cx, cy, n32)), kspec_sync)
    if torch is not None:
        add("kspec RawKernel (PyTorch tensors)", launch_loop(kspec.RawKernel(SOURCE, "copy3"), (tx, ty, n32)), kspec_sync)

    if cupy is not None:
        explicit = cupy.cuda.Stream(non_blocking=True)
        add(
            "kspec RawKernel (CuPy arrays, stream=cupy Stream)",
            launch_loop(kspec.RawKernel(SOURCE, "copy3"), (cx, cy, n32), stream=explicit),
            kspec_sync,
        )

    # -- the floor: the driver's cuLaunchKernel with parameters packed once ----------------------------------
    from cuda.bindings import driver as cu

    floor_kernel = kspec.RawKernel(SOURCE, "copy3")
    floor_kernel((1,), (N,), (kx, ky, n32))  # packs kx, ky, n into its parameter buffer, once
    (packer,) = floor_kernel._launcher.packers().values()
    floor_function = floor_kernel._launcher.function(device.id)
    params = packer.__globals__["_params"]  # the int address of the packer's void*[] (kept alive by the kernel)
    add(
        "cuda.bindings cuLaunchKernel, pre-packed [variant: floor]",
        floor_loop(cu.cuLaunchKernel, floor_function, cu.CUstream(0), params),
        kspec_sync,
    )
    ctypes_row = "libcuda cuLaunchKernel via ctypes, pre-packed [variant: floor]"
    try:
        add(ctypes_row, ctypes_floor_loop(floor_function, params), kspec_sync)
    except (OSError, RuntimeError) as exc:
        add(ctypes_row, None, kspec_sync, f"unavailable: {exc}")

    # -- what the pieces of a launch cost (with --components) ---------------------------------------------
    if opts.components:
        import timeit

        pieces: dict[str, Callable[[], object]] = {"tuple(map(type, args)) of 3": lambda: tuple(map(type, (kx, ky, n32)))}
        if cupy is not None:
            pieces["cupy.cuda.get_current_stream(0).ptr"] = lambda: cupy.cuda.get_current_stream(0).ptr
            pieces["cupy array .data.ptr"] = lambda: cx.data.ptr
        if torch is not None:
            raw = torch._C._cuda_getCurrentRawStream
            pieces["torch._C._cuda_getCurrentRawStream(0)"] = lambda: raw(0)
            pieces["torch tensor .data_ptr() + .is_cuda"] = lambda: (tx.data_ptr(), tx.is_cuda)
        base = min(timeit.repeat(lambda: None, number=100_000, repeat=5)) / 100_000
        print("\ncomponents (us per call, minus an empty lambda call)")
        for label, piece in pieces.items():
            t = min(timeit.repeat(piece, number=100_000, repeat=5)) / 100_000
            print(f"  {label:48s} {(t - base) * 1e6:6.3f}")

    # -- table -------------------------------------------------------------------------------------------
    results = measure(loops, kspec_sync, opts.calls, opts.repeat)
    rows = [(name, results.get(name), notes.get(name, "")) for name in [*loops, *(n for n in notes if n not in loops)]]
    reference = {name: value for name, value, _ in rows}
    core = reference.get("cuda.core launch()")
    cupy_time = reference.get("CuPy RawKernel (CuPy arrays)")
    print(f"\nhost cost per launch, {device.name} ({device.arch}), median of {opts.repeat} x {opts.calls} calls")
    header = f"{'variant':62s} {'us/call':>8s} {'/cuda.core':>10s} {'/CuPy':>7s}"
    print(header)
    print("-" * len(header))
    for name, value, note in rows:
        if value is None:
            print(f"{name:62s} {'-':>8s}  {note}")
            continue
        vs_core = f"{value / core:.2f}x" if core else "-"
        vs_cupy = f"{value / cupy_time:.2f}x" if cupy_time else "-"
        print(f"{name:62s} {value:8.2f} {vs_core:>10s} {vs_cupy:>7s}" + (f"  {note}" if note else ""))


if __name__ == "__main__":
    main()
