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
import time
from pathlib import Path
from typing import Any

import numpy as np

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


def chunk_of(key: Any) -> int | None:
    """The chunk a task key ``(name, k, ...)`` of a graph over chunks along one axis belongs to; None for the
    graph's other keys (a combine's)."""
    k = key[1] if isinstance(key, tuple) and len(key) > 1 else None
    return k if isinstance(k, int) else None


def on_slabs(chunks: int, workers: list[str]) -> Any:
    """Where each task of a graph over ``chunks`` chunks runs (a ``dask.annotate(workers=...)`` callable): chunk
    k's tasks on ``workers[k * W // chunks]``, a contiguous slab of chunks per worker; other tasks on any."""

    def where(key: Any) -> list[str]:
        k = chunk_of(key)
        return [workers[k * len(workers) // chunks]] if k is not None else list(workers)

    return where


def placed(graph: Any, chunks: int, workers: list[str]) -> Any:
    """``graph`` optimised by Dask, its tasks on slabs of ``workers`` (:func:`on_slabs`); compute it with
    ``optimize_graph=False``. The GPUs are alike and so are the chunks: left to Dask, two H200s got 59 and 69
    of 128 chunks (1.83x one GPU against 1.97x for an even split, README.md run G); placed, 64 each, and no
    chunk's partial crosses workers before the combine. Annotated as it is optimised: Dask's optimisation
    fuses a chunk's tasks into one new layer, which takes the annotations in force (it refuses to fuse layers
    annotated with callables)."""
    import dask

    if len(workers) < 2:
        (optimised,) = dask.optimize(graph)
        return optimised
    with dask.annotate(workers=on_slabs(chunks, workers), allow_other_workers=False):
        (optimised,) = dask.optimize(graph)
    return optimised


HEAD = 4  # chunks of each worker's slab submitted ahead of the rest of a placed graph (slab_heads)


def slab_heads(graph: Any, chunks: int, workers: list[str], head: int | None = None) -> list[Any]:
    """The keys of ``graph`` to submit ahead of it (:func:`compute`): its tasks that depend on nothing, of the
    first ``head`` chunks (default :data:`HEAD`) of each worker's slab (:func:`on_slabs`); none for one worker.

    The scheduler takes in a graph whole before any worker starts, and placed tasks skip Dask's queue: it moves
    every one to a worker and sends it (129 tasks of the pipeline, 4 H200s: a worker's first task 25-37 ms after
    the submission, against 16-18 ms with Dask's queuing, README.md). Submitted first on their own, a few
    chunks a worker start while the scheduler takes in the rest."""
    head = HEAD if head is None else head
    if len(workers) < 2 or head <= 0:
        return []
    slabs: dict[int, list[int]] = {}
    for k in range(chunks):
        slabs.setdefault(k * len(workers) // chunks, []).append(k)
    wanted = {k for ks in slabs.values() for k in ks[:head]}
    dependencies = graph.__dask_graph__().get_all_dependencies()
    return [key for key, needs in dependencies.items() if not needs and chunk_of(key) in wanted]


def task_count(graph: Any, optimize: bool = True) -> int:
    """Tasks in ``graph`` as the scheduler gets it: optimised by Dask, unless ``optimize`` is False."""
    import dask

    (optimised,) = dask.optimize(graph) if optimize else (graph,)
    return len(optimised.__dask_graph__())


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


def task_stream_summary(stream: list[dict[str, Any]], window: tuple[float, float] | None = None) -> dict[str, Any]:
    """Per worker, from ``Client.get_task_stream``: tasks run, seconds computing, transfers in and their
    seconds, and the span from the first start to the last stop. Not their bytes: the stream files a transfer
    under the task that needed it, whose ``nbytes`` is that task's own result (the earlier summary's 0.0 MiB).
    ``window``: the run's (submitted, result) wall-clock times (:func:`timed`, one host's clock): then also how
    long after the submission the worker's first task started (``lead_s``) and how long before the result its
    last one stopped (``trail_s``): the scheduling a run pays outside its workers."""
    workers: dict[str, dict[str, float]] = {}
    for task in stream:
        w = workers.setdefault(task["worker"], {"tasks": 0, "compute_s": 0.0, "transfers": 0, "transfer_s": 0.0,
                                                "first": math.inf, "last": -math.inf})
        for part in task["startstops"]:
            w["first"], w["last"] = min(w["first"], part["start"]), max(w["last"], part["stop"])
            if part["action"] == "compute":
                w["tasks"] += 1
                w["compute_s"] += part["stop"] - part["start"]
            elif part["action"] == "transfer":
                w["transfers"] += 1
                w["transfer_s"] += part["stop"] - part["start"]
    for w in workers.values():
        if window is not None:
            w["lead_s"], w["trail_s"] = w["first"] - window[0], window[1] - w["last"]
        w["span_s"] = w.pop("last") - w.pop("first")
    return workers


# A worker preload (Python text: Dask runs it as the worker starts, before any task): the example's directories on the
# worker's import path, so that tasks naming its modules' functions unpickle there.
_ON_PATH = """\
import sys
for _directory in reversed({directories!r}):
    if _directory not in sys.path:
        sys.path.insert(0, _directory)
"""

# A worker preload (Python text: Dask runs it as the worker starts, before any task): every function of the NVRTC
# binding kspec compiles with raises from then on, so kspec has no compiler there, as on an image without NVRTC.
# The module itself stays importable (cuda.core and numba.cuda import it, and Dask imports those to move CuPy
# arrays); CuPy's own NVRTC binding is CuPy's and stays.
NO_NVRTC = """\
try:
    import cuda.bindings.nvrtc as nvrtc
except ImportError:  # no binding: nothing to block
    nvrtc = None

def _blocked(*args, **kwargs):
    raise RuntimeError("NVRTC is blocked on this worker")

for _name in dir(nvrtc) if nvrtc is not None else ():
    _fn = getattr(nvrtc, _name)
    if _name.startswith("nvrtc") and callable(_fn) and not isinstance(_fn, type):
        setattr(nvrtc, _name, _blocked)
"""


def cluster(gpus: int, kernels_dir: Path, threads: int = 1, served: str | os.PathLike[str] | None = None,
            modules: tuple[Any, ...] = ()) -> Any:
    """A distributed cluster with one worker process per GPU (``CUDA_VISIBLE_DEVICES`` per worker, as dask-cuda
    sets it). Tasks name this module's functions (and those of ``modules``), which pickle by reference: the
    workers import the modules from their directories (a worker preload puts them on its ``sys.path``), as a
    deployed cluster imports installed task code. Sent by value (cloudpickle's ``register_pickle_by_value``),
    every task carried its functions' code: 9.5 KB and 0.4 ms of pickling a task on the scheduler's one thread
    (6 us by reference; tests/examples_tests/test_dask.py bounds it), which bounded the stencil graph on four GPUs
    (README.md). Workers need kspec (and CuPy) installed and ``kernels_dir`` (what ``prepare`` wrote) readable.

    ``served``: a ``kspec build`` output (of spec files ``kspec capture`` wrote, say) that workers load every
    kernel from, besides the typed module's own binaries: they run with ``KSPEC_COMPILE=never`` (a kernel
    without a binary is an error, never a compile), empty kspec caches, and kspec's NVRTC blocked before
    anything else runs in them (:data:`NO_NVRTC`), as on workers that have none installed."""
    import tempfile

    from distributed import Nanny, Scheduler, SpecCluster

    directories = list(dict.fromkeys(str(Path(m.__file__).resolve().parent) for m in (sys.modules[__name__], *modules)))
    preload = [_ON_PATH.format(directories=directories)] + ([NO_NVRTC] if served is not None else [])
    env = {"DASK_KERNELS_DIR": str(kernels_dir)}
    if served is not None:
        env.update(KSPEC_BINARIES=str(Path(served).resolve()), KSPEC_COMPILE="never")
    workers = {}
    for k in range(gpus):
        own = dict(env, CUDA_VISIBLE_DEVICES=str(k))
        if served is not None:  # nothing from an earlier run's cache or call records
            own.update(KSPEC_CACHE_DIR=tempfile.mkdtemp(), KSPEC_MEMO_DIR=tempfile.mkdtemp())
        # memory_limit=0: Dask counts a chunk's bytes as the worker's memory whatever holds them; with its default
        # limit (the host's memory over its cores: 8 GB a worker on a 64-core host) it spilled CuPy chunks to
        # disk, a device-to-host copy and a write per chunk (4 s a 2 GiB chunk). The chunks live on the GPU.
        options = {"nthreads": threads, "env": own, "memory_limit": 0,
                   "preload": preload}
        workers[f"gpu{k}"] = {"cls": Nanny, "options": options}
    return SpecCluster(scheduler={"cls": Scheduler, "options": {"dashboard_address": None}}, workers=workers)


def start_workers(client: Any, gpus: int) -> None:
    """Wait for the cluster's workers."""
    client.wait_for_workers(gpus)


def kernel_loads() -> dict[str, Any]:
    """Run on a worker (``client.run``): its kspec kernel loads by source (``binary``: a build output;
    ``cache``: kspec's disk cache; ``compiled``: NVRTC), the names of the kernels it compiled, and whether
    NVRTC answers there."""
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
        answer = "available"
    except ImportError:
        answer = "not installed"
    except RuntimeError:
        answer = "blocked"
    if "kspec" not in sys.modules:
        return {"loads": {}, "compiled": [], "nvrtc": answer}
    import kspec

    events = kspec.compile_log()
    counts = collections.Counter(e.source for e in events)
    return {"loads": dict(counts), "compiled": sorted({e.kernel for e in events if e.source == "compiled"}),
            "nvrtc": answer}


def print_workers(workers: dict[str, Any], loads: dict[str, Any] | None = None) -> None:
    """Per worker: the last timed run's task stream, then its kernel loads (:func:`kernel_loads`)."""
    for name, w in sorted(workers.items()):
        window = (f" (starting {w['lead_s'] * 1e3:.1f} ms after the submission, ending {w['trail_s'] * 1e3:.1f} ms "
                  "before the result)" if "lead_s" in w else "")
        print(f"  worker {name}: {w['tasks']} tasks computing {w['compute_s']:.3f} s of {w['span_s']:.3f} s{window}; "
              f"{w['transfers']} transfers in, {w['transfer_s']:.3f} s")
    for address, found in sorted((loads or {}).items()):
        print(f"  kernel loads on {address}: {found['loads']}, NVRTC {found['nvrtc']}"
              + (f", compiled {found['compiled']}" if found["compiled"] else ""))


def run(
    gpus: int, gib: float, chunk_mib: int, workdir: Path, use_cupy: bool = False, repeats: int = 3, threads: int = 1,
    split_every: int | None = None, served: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Start a cluster of ``gpus`` workers and time the pipeline on it (:func:`run_on`); ``loads``: each
    worker's kernel loads (:func:`kernel_loads`)."""
    from distributed import Client

    with cluster(gpus, workdir, threads, served) as c, Client(c) as client:
        start_workers(client, gpus)
        result = run_on(client, gib, chunk_mib, use_cupy, repeats, split_every)
        result["loads"] = client.run(kernel_loads)
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
    graph = placed(graph, n // chunk, workers)
    ntasks = task_count(graph, optimize=False)
    ahead = slab_heads(graph, n // chunk, workers)
    value, seconds, stream, window = timed(client, graph, repeats, optimize=False, ahead=ahead)
    # the same numbers in NumPy: chunks are reproducible from their seeds (checked on one chunk's worth)
    expected = _expected_norm(n, chunk)
    assert math.isclose(value, expected, rel_tol=1e-3), (value, expected)
    # bytes through device memory per element pair: x, y written (random), read; d written, read; z written, read
    moved = 9 * n * 4
    return {"seconds": seconds, "gbps": moved / seconds / 1e9, "tasks": ntasks, "norm": value,
            "us_per_task": seconds / ntasks * 1e6, "workers": task_stream_summary(stream, window)}


def compute(client: Any, graph: Any, optimize: bool = True, ahead: Any = ()) -> Any:
    """``graph``'s value, computed on ``client``'s cluster; the tasks ``ahead`` (keys of ``graph``, with what
    they need: :func:`slab_heads`) submitted first on their own, the whole graph right after them. The
    scheduler keeps one task a key: those in the graph again are the ones already under way."""
    early = client.get(graph.__dask_graph__().cull(set(ahead)), list(ahead), sync=False) if ahead else []
    try:
        return client.compute(graph, optimize_graph=optimize).result()
    finally:
        del early  # released with the result


def timed(client: Any, graph: Any, repeats: int, optimize: bool = True, ahead: Any = ()
          ) -> tuple[float, float, list[dict[str, Any]], tuple[float, float]]:
    """(the graph's value as a float, the median seconds of ``repeats`` runs of the whole graph after a warm-up
    that loads or compiles each worker's kernels once, the last run's task stream, and its (submitted, result)
    wall-clock times, the clock of the task stream's starts and stops). ``optimize`` False: the graph as built
    (Dask's optimisation rebuilds layers without their annotations: an ordered graph keeps them). ``ahead``:
    keys submitted ahead of the graph (:func:`compute`)."""
    from distributed import get_task_stream

    float(compute(client, graph, optimize, ahead))
    times = []
    for _ in range(repeats):
        with get_task_stream(client) as stream:
            submitted, start = time.time(), time.perf_counter()
            value = float(compute(client, graph, optimize, ahead))
            times.append(time.perf_counter() - start)
            window = (submitted, time.time())
    return value, sorted(times)[len(times) // 2], stream.data, window


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
    print_workers(result["workers"], result["loads"])


if __name__ == "__main__":
    # run as the module `pipeline` (its directory is sys.path[0]): tasks then name pipeline's functions, which the
    # workers import, where __main__'s would travel by value with every task (cluster)
    import pipeline

    pipeline.main()
