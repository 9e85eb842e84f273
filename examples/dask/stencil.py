"""A stencil pipeline on Dask: a 3-d volume in chunks, a Laplacian with halos exchanged between chunks, then a
reduction: the energy sqrt(sum(laplace(v)^2)).

Two ways to write the kernel:

- ``--kernels spec``: the raw kernel ``laplace_halo`` of specs.toml, from the typed module that
  ``pipeline.prepare`` generates and compiles (workers load its binaries), and the ``sum_of_squares`` reduction;
- ``--kernels ndimage``: ``cupyx.scipy.ndimage.laplace(chunk, mode="nearest")`` and a CuPy ``ReductionKernel``:
  CuPy's own kernels, or kspec's when the program runs under ``python -m kspec.cupy`` (the switch reaches the
  workers: they are processes the program starts).

And two ways to write the graph (``--graph``):

- ``overlap``: ``dask.array.map_overlap`` (each chunk padded with its neighbours' edge planes), then
  ``dask.array.reduction``: about 8 tasks a chunk once Dask has optimised the graph (the chunk, the slices of
  the planes, their concatenation, the kernel fused with the trim, the partial sum, ...);
- ``halo`` (the default): the same exchange as two tasks a chunk: the chunk with a copy of its two edge planes
  (:class:`MadeChunk`: another worker fetches the planes, never the chunk), and the kernel with its partial sum,
  which reads the neighbours' planes where they are (``laplace_halo`` takes them as arguments; ndimage's path
  concatenates them on the GPU). The graph makes the volume's chunks itself (:func:`slab_energy`): a slab per
  worker, halos crossing workers only where slabs meet, each worker a few chunks ahead of its energies. Dask
  spends a millisecond or more a task, scheduler and worker together, against ~4 ms of GPU time a 4 GiB chunk
  (README.md). ``energy(v, graph="halo")`` builds the same exchange over any volume ``v`` (three tasks a chunk).

The volume is chunked along its first axis only, so a halo is two planes; the volume's own first and last
planes are replicated beyond its ends, as ndimage's ``mode="nearest"`` does, and the kernel replicates the edges
of the other axes: the result is ``ndimage.laplace(volume, mode="nearest")`` of the whole volume.

``python examples/dask/stencil.py --gpus N --gib G [--kernels spec|ndimage] [--graph halo|overlap] [--served
BUILD]``; see ``scaling.py`` for the table of 1, 2 and 4 GPUs.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
# shared with pipeline.py: the cluster (gpu_cluster), the placement and the timing (scheduling), the chunks, the
# throttle and the reductions' pieces (pipeline)
import gpu_cluster  # noqa: E402
import pipeline  # noqa: E402
import scheduling  # noqa: E402
# Dask's scheduler pickles every task it sends, on its one thread: tasks name module-level functions, which pickle by
# reference (gpu_cluster.cluster puts this directory on the workers' import path)
from pipeline import (HostCopy, on_device, on_this_device, partial_cupy, partial_kspec,  # noqa: E402,I001
                      random_chunk, throttled, typed_kernels)

PLANE = (1024, 1024)  # (ny, nx) of the volume: a plane is 4 MiB of float32, the halo a chunk exchanges per side
ZSTEP = 32  # planes a thread of laplace_halo walks
GRAPHS = ("halo", "overlap")


def laplace_spec(block: Any, lo: Any = None, hi: Any = None) -> Any:
    """The Laplacian of one chunk with the spec kernel (one pass: each element read about once), ``lo`` and ``hi``
    the planes beyond its ends (default: its own first and last, replicated)."""
    kernel = typed_kernels().laplace_halo
    block = on_device(block)  # NumPy chunks (the CPU tests) become kspec arrays: no GPU, NoDeviceError
    import cupy as cp

    out = cp.empty_like(block)
    nz, ny, nx = block.shape
    lo = block[0] if lo is None else lo
    hi = block[nz - 1] if hi is None else hi
    grid = ((nx + 31) // 32, (ny + 7) // 8, (nz + ZSTEP - 1) // ZSTEP)
    kernel(grid, (32, 8, 1), (block, lo, hi, out, np.int32(nz), np.int32(ny), np.int32(nx), np.int32(ZSTEP)))
    return out


def laplace_ndimage(block: Any) -> Any:
    """The same Laplacian with cupyx.scipy.ndimage (one correlate pass per axis, summed)."""
    from cupyx.scipy import ndimage

    return ndimage.laplace(block, mode="nearest")


class MadeChunk:
    """A chunk with a copy of its first and last planes, made by one task. A task on the chunk's own worker gets
    the object itself (the chunk, and the planes on the device); pickled for another worker it travels as the
    planes alone (NumPy, 8 MiB), never the chunk. Two tasks a chunk were three (the chunk, its edge planes, its
    energy), and Dask's per-task cost, not the GPU, bounded the graph (README.md)."""

    def __init__(self, block: Any) -> None:
        self.block = block
        planes = block[[0, block.shape[0] - 1]]
        # on a GPU a HostCopy: a neighbour on another worker receives the planes as soon as this chunk is made,
        # not once everything queued on its GPU is done
        self.edges = planes if isinstance(planes, np.ndarray) else HostCopy(planes)

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        edges = self.edges if isinstance(self.edges, np.ndarray) else self.edges.value()
        return np.array, (edges,)


def neighbour_planes(neighbour: Any) -> Any:
    """A neighbour's first and last planes on this device: from its :class:`MadeChunk` where it was made here,
    else the NumPy planes another worker sent."""
    edges = neighbour.edges if hasattr(neighbour, "block") else neighbour  # duck-typed, as the CPU tests' stand-ins
    return on_this_device(edges)


def chunk_energy(chunk: Any, before: Any, after: Any, kernels: str) -> Any:
    """One task of the halo graph: a chunk's Laplacian and its sum of squares, given the chunk (or its
    :class:`MadeChunk`) and the :class:`MadeChunk` of the chunks before and after it (None at the volume's ends:
    the chunk's own planes are replicated there). Returns the partial sum as :class:`pipeline.HostCopy`."""
    block = on_device(chunk.block if hasattr(chunk, "block") else chunk)
    lo = block[0] if before is None else neighbour_planes(before)[1]
    hi = block[block.shape[0] - 1] if after is None else neighbour_planes(after)[0]
    if kernels == "spec":
        return partial_kspec(laplace_spec(block, lo, hi), axis=(0, 1, 2), keepdims=False)
    import cupy as cp

    padded = cp.concatenate([lo[None], block, hi[None]])  # what map_overlap's graph builds, here on the GPU
    return partial_cupy(laplace_ndimage(padded)[1:-1], axis=(0, 1, 2), keepdims=False)


def volume_geometry(gib: float, chunk_mib: int) -> tuple[int, int]:
    """(chunks, planes a chunk) of a (nz, *PLANE) float32 volume of about ``gib`` GiB in ``chunk_mib`` MiB chunks
    along its first axis: at least two planes a chunk (the halo's depth is one)."""
    plane_bytes = PLANE[0] * PLANE[1] * 4
    depth = max(2, chunk_mib * 2**20 // plane_bytes)
    nz = max(depth, int(gib * 2**30 // plane_bytes) // depth * depth)
    return nz // depth, depth


def volume(gib: float, chunk_mib: int, seed: int = 1) -> Any:
    """A (nz, *PLANE) float32 Dask array of random chunks made on the workers' GPUs, chunked along axis 0."""
    import cupy as cp
    import dask.array as da

    n, depth = volume_geometry(gib, chunk_mib)
    meta = cp.empty((0, 0, 0), dtype="float32")
    with in_volume_order(n):
        return da.map_blocks(volume_chunk, chunks=((depth,) * n, (PLANE[0],), (PLANE[1],)),
                             dtype="float32", meta=meta, seed=seed)


def volume_chunk(block_info: Any = None, seed: int = 0) -> Any:
    """A chunk of the volume, returned once its GPU has caught up (:func:`pipeline.throttled`): made at launch
    speed, each a millisecond of task whatever its GPU time, the chunks ran ahead of the tasks consuming them and
    one H200 ran out of memory (512 GiB in 4 GiB chunks)."""
    return throttled(random_chunk(block_info, seed))


def chunk_at(k: int, shape: tuple[int, ...], seed: int, *after: Any) -> Any:
    """Chunk ``k`` of :func:`volume` (the same values), made by a task of :func:`slab_energy`; ``after``: the
    results of the tasks it waits for, unused."""
    return volume_chunk({None: {"chunk-location": (k, 0, 0), "chunk-shape": shape}}, seed)


def in_volume_order(chunks: int, workers: list[str] | None = None, priorities: dict[Any, float] | None = None) -> Any:
    """Annotations (a context manager) that run the tasks of a volume of ``chunks`` chunks built inside in volume
    order: chunk k's tasks (keys ``(name, k, ...)``) at priority -k, anything else (the combine) last. Dask's own
    order for the halo graph made chunks far from each other (52, 53, 8, 10, 9, 50, ...), each held until both
    its neighbours were made: on one worker 34 of 128 chunks were alive at once (out of memory on an H200 with
    4 GiB chunks), in volume order 5. ``workers``: chunk k's tasks also run on ``workers[k * W // chunks]``, a
    slab of the volume per worker (:func:`slab_energy`). ``priorities``: keys that run at another priority (a
    slab's boundary chunk made early). Compute such a graph with ``optimize_graph=False``: Dask's optimisation
    rebuilds the layers without their annotations."""
    import dask

    given = priorities or {}

    def priority(key: Any) -> float:
        if key in given:
            return given[key]
        k = scheduling.chunk_of(key)
        return -k if k is not None else -chunks

    if not workers:
        return dask.annotate(priority=priority)
    return dask.annotate(priority=priority, workers=scheduling.on_slabs(chunks, workers), allow_other_workers=False)


def energy(v: Any, kernels: str = "spec", graph: str = "halo") -> Any:
    """The graph over a volume ``v``: the Laplacian with halos (``graph``: see the module's doc), then sqrt of the
    sum of its squares with every partial sum in one combine (see pipeline.pipeline)."""
    import dask.array as da

    if graph not in GRAPHS:
        raise ValueError(f"graph: expected one of {GRAPHS}, got {graph!r}")
    if graph == "halo":
        if v.ndim != 3 or v.numblocks[1:] != (1, 1):
            raise ValueError(f"v: expected a 3-d volume chunked along its first axis only, got chunks {v.chunks}")
        n = v.numblocks[0]
        with in_volume_order(n):
            return halo_norm([(v.name, k, 0, 0) for k in range(n)], kernels, _names(v, kernels), [v])
    step = laplace_spec if kernels == "spec" else laplace_ndimage
    lap = da.map_overlap(step, v, depth={0: 1, 1: 0, 2: 0}, boundary={0: "nearest", 1: "none", 2: "none"},
                         dtype=v.dtype, meta=v._meta)
    return pipeline.norm(lap, partial_kspec if kernels == "spec" else partial_cupy)


# Chunks a worker of slab_energy makes beyond the last one whose energy it has computed. Each turn of the chain
# (an energy done, the scheduler releasing the next chunk, that chunk made, the scheduler releasing the energy it
# completes) waits two scheduler round trips, and Dask batches its messages (every 5 ms from the scheduler to a
# worker, 2 ms back), so a turn must carry several chunks: at 4 one H200 ran a chunk every 12 ms for ~4 ms of GPU
# work (README.md); a local sketch with sleeps for GPU time: 11 ms a chunk at 4, 8.3 at 8, no better at 12. None:
# AHEAD_GIB of chunks, at least 2: eight of 4 GiB (and three more alive: 44 GiB), four of 8 GiB (four H200s, 1 TiB:
# 0.420-0.426 s at four of 8 GiB, 0.423-0.533 s at six, 0.495-0.507 s at eight of 4 GiB; README.md run J).
AHEAD: int | None = None
AHEAD_GIB = 32


def chunks_ahead(depth: int) -> int:
    """The chunks of ``depth`` planes a worker makes ahead: :data:`AHEAD`, or :data:`AHEAD_GIB` worth of them."""
    if AHEAD is not None:
        return AHEAD
    return max(2, AHEAD_GIB * 2**30 // (depth * PLANE[0] * PLANE[1] * 4))


def slab_energy(chunks: int, depth: int, kernels: str, workers: list[str], seed: int = 1,
                ahead: int | None = None) -> Any:
    """The halo graph over :func:`volume`'s ``chunks`` chunks of ``depth`` planes, made by the graph itself, two
    tasks a chunk: worker w makes and consumes a slab of the volume (chunk k on ``workers[k * W // n]``), so
    halos cross workers only where two slabs meet, and it makes chunk k once chunk ``k - ahead``'s energy is
    computed (a dependency; default :func:`chunks_ahead`), so about ``ahead`` + 3 chunks are alive on a GPU. Placed
    tasks skip Dask's queuing: without that dependency a worker made every chunk of its slab at once (one H200
    out of memory); placed and chained, each worker has its next tasks in hand when one ends, instead of a
    scheduler round trip away (0.23 s of GPU work in a 2.6 s span on one H200 with queuing).

    Where two slabs meet, the next slab's first chunk needs the planes of this slab's last one: that chunk is made
    second, right after the slab's first (one more chunk alive on the GPU), so no Laplacian waits at the end for a
    slab to finish and its planes to cross. Each slab's partial sums are combined on its own worker, and the
    slabs' totals at the end: a few numbers cross workers there, not a partial sum a chunk (README.md, run C)."""
    from dask.base import tokenize

    ahead = chunks_ahead(depth) if ahead is None else ahead
    if ahead < 2:
        raise ValueError(f"ahead: expected at least 2 (chunk k's energy reads chunk k + 1), got {ahead}")
    n, width = chunks, len(workers)
    names = _names(tokenize(n, depth, seed, workers, ahead), kernels)
    slabs = [scheduling.slab_of(k, n, width) for k in range(n)]
    first: dict[int, int] = {}  # slab -> its first chunk, whose energy waits for the slab before: nothing waits for it
    last: dict[int, int] = {}  # slab -> its last chunk, whose planes the next slab's first chunk reads
    for k, slab in enumerate(slabs):
        first.setdefault(slab, k)
        last[slab] = k
    boundary = {last[slab] for slab in last if slab + 1 < width}
    tasks = []
    for k in range(n):
        waits = k - ahead
        after = [(names[1], waits)] if waits > first[slabs[k]] and k not in boundary else []
        tasks.append((chunk_at, k, (depth, *PLANE), seed, *after))
    early = {(names[0], k): -first[slabs[k]] - 0.5 for k in boundary}  # between the slab's first chunk and its second
    with in_volume_order(n, workers, early):
        return halo_norm(tasks, kernels, names, slabs=slabs)


def _names(token: Any, kernels: str) -> tuple[str, str, str]:
    from dask.base import tokenize

    t = tokenize(token, kernels)
    return f"halo-made-{t}", f"halo-energy-{t}", f"halo-total-{t}"


def halo_norm(chunks: list[Any], kernels: str, names: tuple[str, str, str], dependencies: Any = (),
              slabs: list[int] | None = None) -> Any:
    """The energy (the square root of the sum of squares of the volume's Laplacian) as a 0-d Dask array, given
    the task (or key) of each chunk: per chunk a :class:`MadeChunk` (the chunk and its edge planes) and its
    :func:`chunk_energy` (which gets its neighbours' planes where they are), then one combine of the partials,
    which takes the square root; ``slabs`` (chunk k's slab, ascending): a combine a slab first, keyed by the
    slab's first chunk (placed with it), then one of the slabs' totals."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    made, parts, total = names
    n = len(chunks)
    by_key = bool(dependencies)  # the chunks are keys of ``dependencies``, not tasks of this graph
    energy_of = functools.partial(chunk_energy, kernels=kernels)
    layer: dict[Any, Any] = {}
    for k in range(n):
        layer[(made, k)] = (MadeChunk, chunks[k])
        before = (made, k - 1) if k > 0 else None
        after = (made, k + 1) if k + 1 < n else None
        # a key of another collection (energy(v)) goes to its energy as it is: unplaced, the energy may run on
        # another worker than the MadeChunk, which would send its planes only
        own = chunks[k] if by_key else (made, k)
        layer[(parts, k)] = (energy_of, own, before, after)
    combine = functools.partial(pipeline.combine, axis=None, keepdims=False)
    root = functools.partial(combine, root=True)  # the last combine takes the square root
    if slabs is None:
        layer[(total,)] = (root, [(parts, k) for k in range(n)])
    else:
        members: dict[int, list[int]] = {}
        for k, slab in enumerate(slabs):
            members.setdefault(slab, []).append(k)
        layer.update({(f"{total}-slab", ks[0]): (combine, [(parts, k) for k in ks]) for ks in members.values()})
        layer[(total,)] = (root, [(f"{total}-slab", ks[0]) for ks in members.values()])
    dsk = HighLevelGraph.from_collections(total, layer, dependencies=list(dependencies))
    return da.Array(dsk, total, chunks=(), dtype="float32", meta=pipeline.HOST_META)


@functools.lru_cache(maxsize=8)
def expected_energy(chunks: int, depth: int, seed: int = 1) -> float:
    """The energy recomputed chunk by chunk on this process's GPU, in float64 (once per size): each chunk
    regenerated from its seed with its neighbours' edge planes (the volume's own edges replicated),
    ndimage.laplace over slabs of it, interiors kept."""
    import cupy as cp
    from cupyx.scipy import ndimage

    def chunk(k: int) -> Any:
        return cp.random.default_rng(seed + k).random((depth, *PLANE), dtype="float32")

    total = 0.0
    slab = 64  # planes of float64 at a time: the check's memory stays a few chunks' worth
    for k in range(chunks):
        mid = chunk(k)
        lo = chunk(k - 1)[-1:].copy() if k > 0 else mid[:1]
        hi = chunk(k + 1)[:1].copy() if k + 1 < chunks else mid[-1:]
        padded = cp.concatenate([lo, mid, hi])
        for z in range(1, depth + 1, slab):  # output planes z .. z+slab-1 of the padded chunk
            piece = padded[z - 1 : min(z + slab, depth + 1) + 1].astype("float64")
            lap = ndimage.laplace(piece, mode="nearest")[1:-1]
            total += float((lap * lap).sum())
        del mid, lo, hi, padded
    cp.get_default_memory_pool().free_all_blocks()  # the workers on this GPU need it
    return math.sqrt(total)


def run_on(client: Any, gib: float, chunk_mib: int, kernels: str = "spec", repeats: int = 3,
           check: bool = True, graph: str = "halo") -> dict[str, Any]:
    """Time the graph on a running cluster: the median of ``repeats`` runs after a warm-up, checked against
    :func:`expected_energy` (relative 1e-3: float32 sums against a float64 recomputation; with chunks of
    two planes, as the GPU tests run it, a wrong halo moves the energy by far more)."""

    n, depth = volume_geometry(gib, chunk_mib)
    ahead: list[Any] = []
    if graph == "halo":  # the volume's chunks made by the graph, a slab per worker, the first few of each ahead
        workers = sorted(client.scheduler_info()["workers"])
        result = slab_energy(n, depth, kernels, workers)
        ahead = scheduling.slab_heads(result, n, workers)
    else:
        result = energy(volume(gib, chunk_mib), kernels, graph)
    ordered = graph == "halo"  # its annotations kept: computed as built
    value, seconds, stream, window = scheduling.timed(client, result, repeats, optimize=not ordered, ahead=ahead)
    if check:
        expected = expected_energy(n, depth)
        assert math.isclose(value, expected, rel_tol=1e-3), (value, expected)
    # bytes through device memory per element, counted for the spec kernel: the chunk written (random) and read
    # by the kernel, its result written and read by the sum (overlap: and the padded copy written and read)
    size = n * depth * PLANE[0] * PLANE[1]
    moved = (4 if graph == "halo" else 6) * size * 4
    return {"seconds": seconds, "gbps": moved / seconds / 1e9, "gib": size * 4 / 2**30, "energy": value,
            **({"ahead": chunks_ahead(depth)} if graph == "halo" else {}),
            "tasks": scheduling.task_count(result, optimize=not ordered), "workers": scheduling.task_stream_summary(stream, window)}


def main() -> None:
    global AHEAD
    import tempfile

    from distributed import Client

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--gib", type=float, default=16.0, help="GiB of float32 volume")
    parser.add_argument("--chunk-mib", type=int, default=1024)
    parser.add_argument("--kernels", choices=("spec", "ndimage"), default="spec")
    parser.add_argument("--graph", choices=GRAPHS, default="halo")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ahead", type=int, default=AHEAD, help="the halo graph: chunks a worker makes ahead "
                        f"(default: {AHEAD_GIB} GiB of them)")
    parser.add_argument("--served", default=None, help="a kspec build output: workers load every kernel from it "
                        "and the typed module's binaries, with KSPEC_COMPILE=never and kspec's NVRTC blocked")
    args = parser.parse_args()
    AHEAD = args.ahead
    import kspec

    with tempfile.TemporaryDirectory() as tmp:
        workdir = pipeline.prepare(tmp, archs=kspec.get_device().arch)
        os.environ["DASK_KERNELS_DIR"] = str(workdir)
        with gpu_cluster.cluster(args.gpus, workdir, served=args.served, modules=(sys.modules[__name__],)) as c, \
                Client(c) as client:
            gpu_cluster.start_workers(client, args.gpus)
            r = run_on(client, args.gib, args.chunk_mib, args.kernels, args.repeats, graph=args.graph)
            loads = client.run(gpu_cluster.kernel_loads)
    print(f"{args.kernels} ({args.graph}) on {args.gpus} GPU(s): {r['gib']:g} GiB volume in {r['seconds']:.3f} s, {r['gbps']:.0f} GB/s, "
          f"{r['tasks']} tasks, energy {r['energy']:.6g}")
    gpu_cluster.print_workers(r["workers"], loads)


if __name__ == "__main__":
    # run as the module `stencil`: tasks name its functions, which the workers import (gpu_cluster.cluster)
    import stencil

    stencil.main()
