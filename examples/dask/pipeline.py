"""kspec kernels inside Dask: a pipeline over a Dask array of CuPy chunks on a dask.distributed cluster.

Three kinds of kspec kernel take part, each travelling to the workers as data (pickled specs, or a module the
workers import): spec-file kernels from a module that ``kspec generate`` wrote, with the binaries that
``kspec build`` compiled next to it (workers load those and need no NVRTC); an ``ElementwiseKernel`` made by
a constructor call; and a ``ReductionKernel`` done as a tree (per-chunk kernel, then combine):

    z = axpy(scaled_diff(x, y, 0.5), x, 2.0)        elementwise, chunk by chunk (map_blocks)
    norm = sqrt(sum_of_squares(z))                   dask.array.reduction: kernel per chunk, sums combined

``python examples/dask/pipeline.py [--gpus N] [--gib G]`` runs it on a cluster of one worker process per GPU
(``CUDA_VISIBLE_DEVICES`` set per worker, as dask-cuda does) and prints the throughput; ``--cupy`` runs the
same pipeline with CuPy's ElementwiseKernel/ReductionKernel for comparison.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

import gpu_cluster
import scheduling

HERE = Path(__file__).resolve().parent
SPECS = HERE / "specs.toml"
MODULE = "dask_kernels"  # the generated package prepare() writes: dask_kernels/specs.py + _binaries/

AXPY = ("T x, T y, float32 a", "T z", "z = T(a * float(x) + float(y))", "axpy")


def prepare(directory: str | os.PathLike[str], archs: str | None = None) -> Path:
    """Generate the typed module of specs.toml into ``directory``/dask_kernels and compile its kernels next to
    it (``_binaries/``). Returns ``directory``: put it on the workers' ``PYTHONPATH``."""
    root = Path(directory)
    package = root / MODULE
    cmd = [sys.executable, "-m", "kspec"]
    subprocess.run([*cmd, "generate", str(SPECS), "-o", str(package)], check=True, capture_output=True)
    build = [*cmd, "build", str(SPECS), "-o", str(package / "_binaries")]
    subprocess.run(build + (["--arch", archs] if archs else []), check=True, capture_output=True)
    return root


def largest_chunk_mib() -> int:
    """The chunk size the examples' 1 TiB runs take on this process's GPU: 8 GiB where it has 120 GiB of memory
    or more (an H200), 4 GiB on smaller ones (an 80 GB H100: a pipeline task holds four chunks' worth, two more
    queued). Fewer, larger tasks: on four H200s the pipeline ran 3.60-3.66x one GPU in 8 GiB chunks against
    3.50-3.61x in 4 GiB ones, the stencil 3.63-3.68x against 3.31-3.44x (README.md, run J)."""
    import cupy as cp

    return 8192 if cp.cuda.Device().mem_info[1] >= 120 * 2**30 else 4096


def typed_kernels() -> Any:
    """The generated module, from the directory ``prepare`` wrote (named by ``DASK_KERNELS_DIR`` on workers)."""
    directory = os.environ.get("DASK_KERNELS_DIR")
    if directory and directory not in sys.path:
        sys.path.insert(0, directory)
    return importlib.import_module(f"{MODULE}.specs")


def axpy_kernel(cupy: bool = False) -> Any:
    if cupy:
        import cupy as cp

        return cp.ElementwiseKernel(*AXPY)
    import kspec

    return kspec.ElementwiseKernel(*AXPY)


def on_device(block: Any) -> Any:
    """A chunk on the worker's device: CuPy chunks as they are, NumPy ones copied (kspec's own array)."""
    if isinstance(block, np.ndarray):
        import kspec

        return kspec.asarray(block)
    return block


# -- the tasks (module-level functions: they pickle by reference) -----------------------------------------


def step_kspec(x: Any, y: Any, axpy: Any) -> Any:
    x, y = on_device(x), on_device(y)
    d = typed_kernels().scaled_diff(x, y, 0.5)
    return axpy(d, x, 2.0)


def step_cupy(x: Any, y: Any, axpy: Any) -> Any:
    import cupy as cp

    d = cp.ElementwiseKernel("T x, T y, float32 scale", "T z", "z = T(scale * (float(x) - float(y)))", "scaled_diff")(x, y, 0.5)
    return axpy(d, x, 2.0)


def partial_kspec(block: Any, axis: Any, keepdims: bool) -> Any:
    return _to_host(block, typed_kernels().sum_of_squares(on_device(block), axis=axis, keepdims=keepdims))


def partial_cupy(block: Any, axis: Any, keepdims: bool) -> Any:
    import cupy as cp

    ssq = cp.ReductionKernel("T x", "float32 y", "float(x) * float(x)", "a + b", "y = a", "0", "sum_of_squares", reduce_type="float")
    return _to_host(block, ssq(block, axis=axis, keepdims=keepdims))


def _to_host(block: Any, partial: Any) -> Any:
    """A chunk's partial sum on its way to the host (:class:`HostCopy`), once the chunk before last is done
    (:func:`throttled`); for an empty block, Dask's probe of what a task returns, the device array itself."""
    return partial if block.size == 0 else throttled(HostCopy(partial))


class HostCopy:
    """A device array with a host copy on its way: made in pinned memory right behind the kernels queued so far,
    with an event after the copy. On this worker the device array serves (:func:`on_this_device`) or the host
    value (:meth:`value`, the combine of partial sums); pickled for another worker it waits for that event alone,
    not for everything its GPU was given since, and travels as NumPy.

    As CuPy arrays, the partial sums reached the combine's worker as device-to-host copies made when Dask sent
    them, each queued behind everything its GPU had been given since: on 4 H200s the one worker running the
    combine spent 0.117 s of a 0.39 s run receiving the other three's 64 partials each (README.md)."""

    def __init__(self, device_value: Any) -> None:
        import cupy as cp
        import cupyx

        self.device = device_value
        self.host = cupyx.empty_pinned(device_value.shape, device_value.dtype)
        device_value.get(out=self.host, blocking=False)
        self.copied = cp.cuda.Event(disable_timing=True)
        self.copied.record()

    def value(self) -> Any:
        self.copied.synchronize()
        return self.host

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return np.array, (self.value(),)  # a plain copy: the receiver needs NumPy only


def on_this_device(value: Any) -> Any:
    """What a task received from :class:`HostCopy` as a device array: the original where it was made here, a copy
    of the NumPy value another worker sent."""
    if isinstance(value, np.ndarray):
        import cupy as cp

        return cp.asarray(value)
    return value.device if hasattr(value, "copied") else value


HOST_META = np.empty((), dtype="float32")  # what a reduction's total is: a host value
IN_FLIGHT = 2  # chunks a worker thread may have queued on its GPU


def throttled(result: Any) -> Any:
    """``result`` once at most ``IN_FLIGHT`` of this thread's chunks are still queued on the GPU.

    Kernel calls return as soon as they are queued, so without this a chunk's task takes a millisecond
    whatever its GPU time, and Dask, which balances workers by how long their tasks take, handed one GPU
    10% more chunks than the other (2 H200s: 35 against 31). Waiting for the chunk before last keeps the
    queue from draining (the next chunk is launched while this one runs) and makes task time GPU time."""
    import cupy as cp

    thread = threading.current_thread()  # per-thread state kept on the thread (one worker runs several)
    events = getattr(thread, "kspec_example_events", None)
    if events is None:
        events = thread.kspec_example_events = collections.deque()  # type: ignore[attr-defined]
    event = cp.cuda.Event(disable_timing=True)
    event.record()
    events.append(event)
    while len(events) > IN_FLIGHT:
        events.popleft().synchronize()
    return result


def combine(partials: Any, axis: Any, keepdims: bool, root: bool = False) -> Any:
    """The partial sums of several chunks summed on the host: Dask hands them over as a (nested) list
    (``dask.array.reduction(..., concatenate=False)``), each a :class:`HostCopy` made on this worker or a
    NumPy array that came from another, or an earlier combine's result. ``root``: the graph's last combine,
    which returns the norm, the sum's square root (a task of its own was one more pair of scheduler round
    trips at the end of every run)."""
    values = []
    pending = [partials]
    while pending:
        item = pending.pop()
        if isinstance(item, (list, tuple)):
            pending.extend(item)
        else:  # a HostCopy made on this worker (duck-typed: the CPU tests' copies are other classes)
            values.append(np.asarray(item.value() if hasattr(item, "copied") else item))
    ndim = values[0].ndim if values else 0
    total = sum(float(v.sum(dtype=np.float64)) for v in values)
    total = np.float32(math.sqrt(total) if root else total)
    return np.full((1,) * ndim, total, dtype=np.float32) if keepdims else total


def random_chunk(block_info: Any = None, seed: int = 0, dtype: str = "float32") -> Any:
    """A chunk of uniform random numbers made on the worker's device (no host-to-device copy)."""
    import cupy as cp

    info = block_info[None]
    rng = cp.random.default_rng(seed + info["chunk-location"][0])
    return rng.random(info["chunk-shape"], dtype=dtype)


def pipeline(x: Any, y: Any, use_cupy: bool = False, split_every: int | None = None) -> Any:
    """The Dask graph: elementwise steps with map_blocks, then a tree reduction. Returns a 0-d Dask array.

    ``split_every``: partial sums combined per tree node; by default all of them in one combine. A partial
    that moves to another worker is copied to the host, which waits for everything queued on its GPU: Dask's
    default tree (combines of 32, while other chunks are still queued) drained each GPU's queue at every
    combine, and its worker stopped launching meanwhile (measured on 2 H200s, examples/dask/README.md)."""
    import dask.array as da

    axpy = axpy_kernel(use_cupy)
    # meta= says what the chunks are (CuPy or NumPy arrays), so Dask never calls the tasks on empty stand-ins
    z = da.map_blocks(step_cupy if use_cupy else step_kspec, x, y, axpy, dtype=x.dtype, meta=x._meta)
    return norm(z, partial_cupy if use_cupy else partial_kspec, split_every)


def norm(array: Any, partial: Any, split_every: int | None = None) -> Any:
    """The square root of the sum of squares of ``array`` as a 0-d Dask array: ``partial`` per chunk, then
    :func:`combine` of ``split_every`` partials a node (default: all of them in one, see :func:`pipeline`), the
    root taking the square root."""
    import dask.array as da

    return da.reduction(array, partial, functools.partial(combine, root=True), combine=combine, dtype="float32",
                        meta=HOST_META, split_every=split_every or max(2, array.npartitions), concatenate=False)


def run(
    gpus: int, gib: float, chunk_mib: int, workdir: Path, use_cupy: bool = False, repeats: int = 3, threads: int = 1,
    split_every: int | None = None, served: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Start a cluster of ``gpus`` workers and time the pipeline on it (:func:`run_on`); ``loads``: each
    worker's kernel loads (:func:`kernel_loads`)."""
    from distributed import Client

    with gpu_cluster.cluster(gpus, workdir, threads, served) as c, Client(c) as client:
        gpu_cluster.start_workers(client, gpus)
        result = run_on(client, gib, chunk_mib, use_cupy, repeats, split_every)
        result["loads"] = client.run(gpu_cluster.kernel_loads)
    return result


def run_on(client: Any, gib: float, chunk_mib: int, use_cupy: bool = False, repeats: int = 3,
           split_every: int | None = None) -> dict[str, Any]:
    """Time the pipeline over ``gib`` GiB of float32 (x and y together) on a running cluster: the median of
    ``repeats`` runs after a warm-up; checks the result. ``workers``: the last run's task stream by worker."""
    import cupy as cp
    import dask.array as da

    n = int(gib * 2**30 / 4 / 2)
    chunk = chunk_mib * 2**20 // 4
    n -= n % chunk
    meta = cp.empty((0,), dtype="float32")
    x = da.map_blocks(random_chunk, chunks=((chunk,) * (n // chunk),), dtype="float32", meta=meta, seed=1)
    y = da.map_blocks(random_chunk, chunks=((chunk,) * (n // chunk),), dtype="float32", meta=meta, seed=2)
    graph = pipeline(x, y, use_cupy, split_every)
    # optimised once, as a program that runs a pipeline again and again keeps it: Dask's optimisation of this graph
    # took 12-20 ms of every run's client time (4 H200s: 0.403 s a run optimising, 0.387-0.391 s optimised once);
    # and placed, a slab of chunks per worker
    workers = sorted(client.scheduler_info()["workers"])
    graph = scheduling.placed(graph, n // chunk, workers)
    ntasks = scheduling.task_count(graph, optimize=False)
    ahead = scheduling.slab_heads(graph, n // chunk, workers)
    value, seconds, stream, window = scheduling.timed(client, graph, repeats, optimize=False, ahead=ahead)
    # the same numbers in NumPy: chunks are reproducible from their seeds (checked on one chunk's worth)
    expected = _expected_norm(n, chunk)
    assert math.isclose(value, expected, rel_tol=1e-3), (value, expected)
    # bytes through device memory per element pair: x, y written (random), read; d written, read; z written, read
    moved = 9 * n * 4
    return {"seconds": seconds, "gbps": moved / seconds / 1e9, "tasks": ntasks, "norm": value,
            "us_per_task": seconds / ntasks * 1e6, "workers": scheduling.task_stream_summary(stream, window)}


@functools.lru_cache(maxsize=8)
def _expected_norm(n: int, chunk: int) -> float:
    """The norm recomputed chunk by chunk on this process's GPU in float64 (once per size: a run of several
    cluster sizes checks each against it), in slices so that the check's memory stays a few chunks' worth."""
    import cupy as cp

    total = 0.0
    step = 2**27
    for k in range(n // chunk):
        x32 = cp.random.default_rng(1 + k).random(chunk, dtype="float32")
        y32 = cp.random.default_rng(2 + k).random(chunk, dtype="float32")
        for at in range(0, chunk, step):
            x, y = x32[at : at + step].astype("float64"), y32[at : at + step].astype("float64")
            z = 2.0 * (0.5 * (x - y)) + x
            total += float((z * z).sum())
        del x32, y32
    cp.get_default_memory_pool().free_all_blocks()  # the workers on this GPU need it
    return math.sqrt(total)


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--gib", type=float, default=16.0, help="GiB of float32 input (x and y together)")
    parser.add_argument("--chunk-mib", type=int, default=256)
    parser.add_argument("--cupy", action="store_true", help="CuPy's kernels instead of kspec's")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of the graph (the median is shown)")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker process")
    parser.add_argument("--split-every", type=int, default=None, help="partials combined per reduction tree node (default: all in one)")
    parser.add_argument("--served", default=None, help="a kspec build output: workers load every kernel from it "
                        "and the typed module's binaries, with KSPEC_COMPILE=never and kspec's NVRTC blocked")
    args = parser.parse_args()
    import kspec

    with tempfile.TemporaryDirectory() as tmp:
        workdir = prepare(tmp, archs=kspec.get_device().arch)  # this machine's GPUs only: a quicker build
        os.environ["DASK_KERNELS_DIR"] = str(workdir)
        result = run(args.gpus, args.gib, args.chunk_mib, workdir, args.cupy, args.repeats, args.threads, args.split_every,
                     args.served)
    # with tiny chunks (--gib 0.0625 --chunk-mib 1) the device work is negligible: seconds per task is then
    # Dask's and the kernel call's overhead per task
    print(f"{'cupy' if args.cupy else 'kspec'} on {args.gpus} GPU(s): {args.gib:g} GiB in {result['seconds']:.3f} s, "
          f"{result['gbps']:.0f} GB/s, {result['tasks']} tasks ({result['us_per_task']:.0f} us per task), "
          f"norm {result['norm']:.6g}")
    gpu_cluster.print_workers(result["workers"], result["loads"])


if __name__ == "__main__":
    # run as the module `pipeline` (its directory is sys.path[0]): tasks then name pipeline's functions, which the
    # workers import, where __main__'s would travel by value with every task (cluster)
    import pipeline

    pipeline.main()
