"""How examples/dask's graphs over chunks run on a cluster of GPU workers: a slab of chunks per worker
(:func:`placed`), each slab's first chunks submitted ahead of the graph (:func:`slab_heads`, :func:`compute`), the
timing both pipelines share (:func:`timed`) and what a run's task stream says per worker
(:func:`task_stream_summary`). Client-side only: no task names these functions."""

from __future__ import annotations

import math
import time
from typing import Any


def chunk_of(key: Any) -> int | None:
    """The chunk a task key ``(name, k, ...)`` of a graph over chunks along one axis belongs to; None for the
    graph's other keys (a combine's)."""
    k = key[1] if isinstance(key, tuple) and len(key) > 1 else None
    return k if isinstance(k, int) else None


def slab_of(k: int, chunks: int, width: int) -> int:
    """The slab (the worker's index, of ``width``) chunk ``k`` of ``chunks`` belongs to: contiguous, even slabs."""
    return k * width // chunks


def on_slabs(chunks: int, workers: list[str]) -> Any:
    """Where each task of a graph over ``chunks`` chunks runs (a ``dask.annotate(workers=...)`` callable): chunk
    k's tasks on ``workers[k * W // chunks]``, a contiguous slab of chunks per worker; other tasks on any."""

    def where(key: Any) -> list[str]:
        k = chunk_of(key)
        return [workers[slab_of(k, chunks, len(workers))]] if k is not None else list(workers)

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
        slabs.setdefault(slab_of(k, chunks, len(workers)), []).append(k)
    wanted = {k for ks in slabs.values() for k in ks[:head]}
    dependencies = graph.__dask_graph__().get_all_dependencies()
    return [key for key, needs in dependencies.items() if not needs and chunk_of(key) in wanted]


def task_count(graph: Any, optimize: bool = True) -> int:
    """Tasks in ``graph`` as the scheduler gets it: optimised by Dask, unless ``optimize`` is False."""
    import dask

    (optimised,) = dask.optimize(graph) if optimize else (graph,)
    return len(optimised.__dask_graph__())


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


def compute(client: Any, graph: Any, optimize: bool = True, ahead: Any = ()) -> Any:
    """``graph``'s value, computed on ``client``'s cluster; the tasks ``ahead`` (keys of ``graph``, with what
    they need: :func:`slab_heads`) submitted first on their own, the whole graph right after them. The
    scheduler keeps one task a key: those in the graph again are the ones already under way."""
    return _compute(client, graph, optimize, _heads(graph, ahead))


def _heads(graph: Any, ahead: Any) -> tuple[Any, list[Any]] | None:
    """The part of ``graph`` the keys ``ahead`` need, and those keys (culled once, not per run)."""
    return (graph.__dask_graph__().cull(set(ahead)), list(ahead)) if ahead else None


def _compute(client: Any, graph: Any, optimize: bool, heads: tuple[Any, list[Any]] | None) -> Any:
    early = client.get(*heads, sync=False) if heads else []
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

    heads = _heads(graph, ahead)
    float(_compute(client, graph, optimize, heads))
    times = []
    for _ in range(repeats):
        with get_task_stream(client) as stream:
            submitted, start = time.time(), time.perf_counter()
            value = float(_compute(client, graph, optimize, heads))
            times.append(time.perf_counter() - start)
            window = (submitted, time.time())
    return value, sorted(times)[len(times) // 2], stream.data, window
