"""kspec kernels inside Dask (examples/dask): on a local cluster of processes without a GPU, the graphs (the
elementwise pipeline, the stencil pipeline's map_overlap) are built and shipped, the kernels arrive intact on the
workers (specs pickled, the generated module imported there with its binaries), a task fails with kspec's
NoDeviceError, not a pickling error, and a served cluster's workers have no NVRTC and refuse to compile."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import pytest

import kspec

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "dask"))

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
gpu_cluster = pytest.importorskip("gpu_cluster")
pipeline = pytest.importorskip("pipeline")
scheduling = pytest.importorskip("scheduling")
stencil = pytest.importorskip("stencil")
scaling = pytest.importorskip("scaling")


def _on_worker_spec(kernel):  # runs on a worker: what arrived
    return type(kernel).__name__, kernel.spec.to_data()


def _on_worker_typed():  # runs on a worker: the generated module and its binaries are there
    module = pipeline.typed_kernels()
    binaries = Path(module.__file__).parent / "_binaries" / "manifest.json"
    return sorted(module.__all__), binaries.is_file()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    workdir = pipeline.prepare(tmp_path_factory.mktemp("dask"), archs="sm_90")
    with gpu_cluster.cluster(2, workdir) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        yield client


def test_kernels_arrive_intact_on_the_workers(client):
    axpy = pipeline.axpy_kernel()
    name, data = client.submit(_on_worker_spec, axpy, pure=False).result()
    assert name == "ElementwiseKernel" and data == axpy.spec.to_data()
    assert client.submit(_on_worker_typed, pure=False).result() == (["laplace_halo", "scaled_diff", "sum_of_squares"], True)


def test_every_task_function_pickles_by_reference(client):
    # tasks name the example's functions, which the workers import (gpu_cluster.cluster): a task carries their names,
    # not their code, and the workers find them
    import cloudpickle

    tasks = (pipeline.step_kspec, pipeline.step_cupy, pipeline.partial_kspec, pipeline.partial_cupy,
             pipeline.combine, pipeline.random_chunk, pipeline.throttled, gpu_cluster.kernel_loads,
             stencil.laplace_spec, stencil.laplace_ndimage, stencil.chunk_at, stencil.chunk_energy, stencil.MadeChunk)
    for task in tasks:
        assert cloudpickle.loads(cloudpickle.dumps(task)) is task and len(cloudpickle.dumps(task)) < 100
    found = client.run(lambda: [getattr(sys.modules[t.__module__], t.__name__) is t for t in tasks])
    assert all(all(flags) for flags in found.values()), found


def _without_a_gpu():
    from kspec.runtime import device_count

    if device_count() > 0:
        pytest.skip("the machine has a GPU: tests/examples_tests/test_dask_gpu.py runs the graphs there")


def test_a_task_without_a_gpu_fails_with_no_device_error(client):
    _without_a_gpu()
    x = da.from_array(np.arange(16, dtype=np.float32), chunks=4)
    norm = pipeline.pipeline(x, x + 1)
    assert len(norm.__dask_graph__()) > 8  # map_blocks per chunk, then the reduction's tree
    with pytest.raises(kspec.NoDeviceError):
        client.compute(norm).result()


@pytest.mark.parametrize("graph", stencil.GRAPHS)
def test_the_stencil_graph_exchanges_halos_then_fails_without_a_gpu(client, graph):
    _without_a_gpu()
    v = da.from_array(np.arange(4 * 3 * 5, dtype=np.float32).reshape(4, 3, 5), chunks=(2, 3, 5))
    energy = stencil.energy(v, "spec", graph)
    names = {key[0] if isinstance(key, tuple) else key for key in energy.__dask_graph__()}
    halo = {"halo": "halo-made", "overlap": "getitem"}[graph]
    assert any(halo in name for name in names), names  # the halo planes
    with pytest.raises(kspec.NoDeviceError):
        client.compute(energy).result()


def _laplace_nearest(volume):  # ndimage.laplace(volume, mode="nearest") in NumPy
    padded = np.pad(volume.astype(np.float64), 1, mode="edge")
    centre = padded[1:-1, 1:-1, 1:-1]
    total = np.zeros_like(centre)
    for axis in range(3):
        lo = [slice(1, -1)] * 3
        hi = [slice(1, -1)] * 3
        lo[axis], hi[axis] = slice(0, -2), slice(2, None)
        total += padded[tuple(lo)] - 2 * centre + padded[tuple(hi)]
    return total


def _planes(neighbour):  # stencil.neighbour_planes on the host: a MadeChunk made here, or the planes it pickles to
    return neighbour.edges if hasattr(neighbour, "block") else neighbour


def _chunk_energy_numpy(chunk, before, after, kernels):  # chunk_energy's contract, on the host
    block = chunk.block if hasattr(chunk, "block") else chunk
    lo = block[:1] if before is None else _planes(before)[1:]
    hi = block[-1:] if after is None else _planes(after)[:1]
    lap = _laplace_nearest(np.concatenate([lo, block, hi]))[1:-1]
    return np.asarray((lap * lap).sum())


def test_the_halo_graph_is_three_tasks_a_chunk_and_wires_each_chunk_to_its_neighbours(monkeypatch):
    # the graph's wiring on the host: each chunk's task gets the planes of the chunks before and after it (the
    # volume's own ends replicated), so the energy is that of the whole volume's Laplacian
    import dask

    rng = np.random.default_rng(5)
    volume = rng.random((12, 4, 6), dtype=np.float32)
    monkeypatch.setattr(stencil, "chunk_energy", _chunk_energy_numpy)
    for depth in (2, 3, 12):
        v = da.from_array(volume, chunks=(depth, 4, 6))
        energy = stencil.energy(v, "spec", "halo")
        with dask.config.set(scheduler="sync"):
            got = float(energy.compute())
        assert got == pytest.approx(np.sqrt((_laplace_nearest(volume) ** 2).sum()), rel=1e-5)
        n = v.numblocks[0]
        assert scheduling.task_count(energy) <= 3 * n + 1  # the chunk, its edge planes, its energy; the combine (and sqrt)
    overlap = stencil.energy(da.from_array(volume, chunks=(2, 4, 6)), "spec", "overlap")
    assert scheduling.task_count(overlap) >= 6 * 6
    with pytest.raises(ValueError, match="graph"):
        stencil.energy(v, "spec", "tiles")
    with pytest.raises(ValueError, match="chunked along its first axis"):
        stencil.energy(da.from_array(volume, chunks=(6, 2, 6)), "spec", "halo")


def test_the_halo_graph_runs_in_volume_order(monkeypatch):
    # stencil.in_volume_order: chunk k's tasks at priority -k, so a worker consumes chunk k right after making
    # chunk k + 1 (Dask's own order for this graph kept 34 of 128 chunks alive on one worker); the graph is
    # computed as built (Dask's optimisation drops layer annotations), with the same energy
    from distributed import Client, LocalCluster, get_task_stream

    rng = np.random.default_rng(6)
    volume = rng.random((64, 4, 6), dtype=np.float32)
    monkeypatch.setattr(stencil, "chunk_energy", _chunk_energy_numpy)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        with stencil.in_volume_order(32):
            v = da.from_array(volume, chunks=(2, 4, 6))
        energy = stencil.energy(v, "spec", "halo")
        with get_task_stream(client) as stream:
            got = float(energy.compute(optimize_graph=False))
    assert got == pytest.approx(np.sqrt((_laplace_nearest(volume) ** 2).sum()), rel=1e-5)
    starts = sorted((task["startstops"][0]["start"], task["key"]) for task in stream.data)
    parts = [key[1] for _, key in starts if isinstance(key, tuple) and "halo-energy" in key[0]]
    # in order but for races: neighbours swapped, or a chunk the scheduler hands out before it has queued the rest
    # (Dask's own order: 52, 53, 8, 10, 9, 50, ... a descent every few chunks)
    descents = sum(1 for a, b in zip(parts, parts[1:]) if b < a)
    assert sorted(parts) == list(range(32)) and descents <= 3, parts


def test_the_halo_graphs_tasks_pickle_small():
    # Dask's scheduler pickles every task it sends to a worker, on its one thread: sent by value (cloudpickle's
    # register_pickle_by_value), each task of this graph carried its functions' code, ~9.5 KB and ~0.4 ms of
    # pickling, the bound of the halo graph on four GPUs; by reference a task is its key, arguments and names
    import cloudpickle

    for kernels in ("spec", "ndimage"):
        graph = dict(stencil.slab_energy(8, 2, kernels, ["w0", "w1"]).__dask_graph__())
        sizes = {key: len(cloudpickle.dumps(task)) for key, task in graph.items()}
        assert len(sizes) == 2 * 8 + 2 + 1 and max(sizes.values()) < 1_000, sizes


def test_a_made_chunk_travels_as_its_edge_planes_alone():
    # another worker gets the planes a halo needs (pickled), never the chunk; on its own worker the object serves
    import pickle

    block = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)
    made = stencil.MadeChunk(block)
    sent = pickle.loads(pickle.dumps(made))
    assert isinstance(sent, np.ndarray) and sent.shape == (2, 2, 3)
    np.testing.assert_array_equal(sent, block[[0, 4]])
    np.testing.assert_array_equal(_planes(made), block[[0, 4]])


@pytest.mark.parametrize("ahead", [2, 3])
def test_the_slab_graph_places_slabs_and_makes_each_chunk_after_an_earlier_energy(monkeypatch, ahead):
    # stencil.slab_energy: two tasks a chunk; chunk k's tasks on worker k * W // n; chunk k made only once the
    # energy of chunk k - ahead (same slab, not its first) is done, so a worker holds a few chunks, not its slab;
    # the last chunk of a slab that another follows is made second (the next slab's first chunk reads its planes);
    # each slab's partial sums combined on its worker, then the slabs' totals
    from distributed import Client, LocalCluster, get_task_stream

    rng = np.random.default_rng(7)
    n, depth = 24, 2
    volume = rng.random((n * depth, 4, 6), dtype=np.float32)
    monkeypatch.setattr(stencil, "PLANE", (4, 6))
    monkeypatch.setattr(stencil, "chunk_at", lambda k, shape, seed, *after: volume[k * depth:(k + 1) * depth])
    monkeypatch.setattr(stencil, "chunk_energy", _chunk_energy_numpy)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        energy = stencil.slab_energy(n, depth, "spec", workers, ahead=ahead)
        assert scheduling.task_count(energy, optimize=False) == 2 * n + 2 + 1  # made, energy a chunk; 2 slabs; the total (and sqrt)
        with get_task_stream(client) as stream:
            got = float(energy.compute(optimize_graph=False))
    assert got == pytest.approx(np.sqrt((_laplace_nearest(volume) ** 2).sum()), rel=1e-5)
    ran = {task["key"]: task for task in stream.data if isinstance(task["key"], tuple) and len(task["key"]) == 2}
    made = {k: t for (name, k), t in ran.items() if name.startswith("halo-made")}
    parts = {k: t for (name, k), t in ran.items() if name.startswith("halo-energy")}
    slab_totals = {k: t for (name, k), t in ran.items() if name.startswith("halo-total") and name.endswith("-slab")}
    assert sorted(made) == sorted(parts) == list(range(n))
    assert sorted(slab_totals) == [0, n // 2] and [slab_totals[k]["worker"] for k in (0, n // 2)] == workers
    boundary = n // 2 - 1  # slab 0's last chunk
    for k in range(n):
        slab = k * 2 // n
        assert parts[k]["worker"] == made[k]["worker"] == workers[slab]
        if k - ahead > slab * n // 2 and k != boundary:  # a slab's first chunk waits for the slab before: none waits for it
            assert made[k]["startstops"][0]["start"] >= parts[k - ahead]["startstops"][-1]["stop"]
    # made early: before every chunk of its slab that waits for an energy (those the worker gets later; the first
    # few, ready at once like it, may race it to the worker)
    start = {k: t["startstops"][0]["start"] for k, t in made.items()}
    assert start[boundary] < min(start[k] for k in range(ahead + 1, boundary))
    with pytest.raises(ValueError, match="ahead"):
        stencil.slab_energy(n, depth, "spec", workers, ahead=1)


def test_combine_sums_partials_from_this_worker_and_others():
    # dask.array.reduction(concatenate=False) hands combine nested lists; a partial is a HostCopy made here
    # (read once its copy is done) or the NumPy array another worker's HostCopy pickled into
    class Made:
        copied = True

        def __init__(self, value):
            self.host = np.asarray(value, dtype=np.float32)

        def value(self):
            return self.host

    parts = [[Made([1.5]), np.asarray([2.0], dtype=np.float32)], [np.asarray([0.5], dtype=np.float32)]]
    assert pipeline.combine(parts, axis=(0,), keepdims=False) == np.float32(4.0)
    kept = pipeline.combine(parts, axis=(0,), keepdims=True)
    assert kept.shape == (1,) and kept[0] == 4.0
    assert pipeline.combine(parts, axis=(0,), keepdims=False, root=True) == np.float32(2.0)  # the norm's root


def _worker_policy():  # runs on a worker
    import os

    return os.environ.get("KSPEC_COMPILE"), os.environ.get("KSPEC_BINARIES"), os.environ.get("KSPEC_CACHE_DIR")


def test_served_workers_have_no_nvrtc_and_never_compile(tmp_path):
    workdir = pipeline.prepare(tmp_path / "k", archs="sm_90")
    served = tmp_path / "build"
    served.mkdir()
    with gpu_cluster.cluster(2, workdir, served=served) as cluster, distributed.Client(cluster) as c:
        gpu_cluster.start_workers(c, 2)
        assert {found["nvrtc"] for found in c.run(gpu_cluster.kernel_loads).values()} == {"blocked"}
        # the binding stays importable: cuda.core and numba.cuda import it, and Dask imports those to move CuPy arrays
        assert set(c.run(lambda: __import__("cuda.bindings.nvrtc").__name__).values()) == {"cuda"}
        policies = list(c.run(_worker_policy).values())
        assert {p[:2] for p in policies} == {("never", str(served.resolve()))}
        assert len({p[2] for p in policies}) == 2  # an empty kspec cache each
        loads = c.run(gpu_cluster.kernel_loads)
        assert all(found["compiled"] == [] for found in loads.values())


def test_the_scaling_table_reads_rows_and_reports_failures(tmp_path):
    rows = tmp_path / "rows.jsonl"
    lines = [{"row": "stencil, kspec spec kernel", "gpus": g, "seconds": 4.0 / g, "gbps": 100.0 * g} for g in (1, 2, 4)]
    lines.append({"row": "stencil, cupyx.scipy.ndimage (CuPy)", "gpus": 1, "error": "CompileForbiddenError: x"})
    lines.append({"gpus": 1, "loads": {}})
    rows.write_text("".join(__import__("json").dumps(line) + "\n" for line in lines))
    text = scaling.table([rows])
    assert "| stencil, kspec spec kernel | 4.000 s, 100 GB/s | 2.000 s, 200 GB/s | 1.000 s, 400 GB/s | **2.00x** | **4.00x** |" in text
    assert "CompileForbiddenError" in text


def test_the_scaling_rows_can_be_chosen_by_name():
    # scaling.py --rows: a rerun of some rows; a word that matches no row is an error naming the rows
    rows = scaling.workloads(True, 1.0, 1.0)
    assert [name for name, _ in scaling.chosen(rows, None)] == [name for name, _ in rows]
    picked = [name for name, _ in scaling.chosen(rows, "pipeline, spec kernel")]
    assert picked == ["pipeline, kspec spec kernels", "stencil, kspec spec kernel", "stencil as map_overlap, kspec spec kernel"]
    with pytest.raises(SystemExit, match="no row"):
        scaling.chosen(rows, "nothing like it")
    # --skip: every row but those named
    left = [name for name, _ in scaling.chosen(rows, None, "map_overlap")]
    assert left == [name for name, _ in rows if "map_overlap" not in name] and len(left) == len(rows) - 1
    assert [name for name, _ in scaling.chosen(rows, "spec kernel", "map_overlap, pipeline")] == ["stencil, kspec spec kernel"]
    with pytest.raises(SystemExit, match="no row"):
        scaling.chosen(rows, "pipeline", "kspec")


def test_timed_runs_the_graph_and_keeps_the_last_task_stream(client):
    # the timing both pipelines share (scheduling.timed): warm-up, the median of the runs, the last run's stream
    graph = da.ones((64,), chunks=16).sum()
    value, seconds, stream, window = scheduling.timed(client, graph, 3)
    assert value == 64.0 and seconds > 0
    assert window[0] <= window[1]
    summary = scheduling.task_stream_summary(stream, window)
    assert {t["worker"] for t in stream} == set(summary)
    # inside the run's window, to within each worker's estimate of the scheduler's clock offset (a worker shifts
    # its times by it, taken from a heartbeat's round trip: a few ms either way, though the clock is one host's)
    slack = 0.05
    for w in summary.values():
        assert -slack <= w["lead_s"] and -slack <= w["trail_s"]
        assert abs(w["lead_s"] + w["span_s"] + w["trail_s"] - (window[1] - window[0])) <= 1e-6


def _numpy_chunk(block_info=None, seed=0):  # pipeline.random_chunk's contract, on the host
    info = block_info[None]
    return np.random.default_rng(seed + info["chunk-location"][0]).random(info["chunk-shape"], dtype="float32")


def _numpy_step(x, y):
    return 2.0 * (0.5 * (x - y)) + x


def _numpy_partial(block, axis, keepdims):
    return (block.astype(np.float64) ** 2).sum(axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("width", [2, 3])
def test_the_pipeline_graph_runs_a_slab_of_chunks_per_worker(width):
    # scheduling.placed: Dask fuses a chunk's tasks (two random chunks, the step, the partial sum) into one, and
    # chunk k's runs on worker k * W // n, whatever Dask's balancing would have chosen; the result is unchanged
    from distributed import Client, LocalCluster, get_task_stream

    n, size = 12, 64
    x = da.map_blocks(_numpy_chunk, chunks=((size,) * n,), dtype="float32", seed=1)
    y = da.map_blocks(_numpy_chunk, chunks=((size,) * n,), dtype="float32", seed=2)
    z = da.map_blocks(_numpy_step, x, y, dtype="float32")
    graph = pipeline.norm(z, _numpy_partial)
    with LocalCluster(n_workers=width, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        ordered = scheduling.placed(graph, n, workers)
        assert scheduling.task_count(ordered, optimize=False) == n + 1  # a task a chunk, one combine
        # submitted ahead: the first two chunks of each slab, placed as in the whole graph
        ahead = scheduling.slab_heads(ordered, n, workers, head=2)
        firsts = [k for k in range(n) if k * width // n != (k - 1) * width // n or k == 0]
        assert sorted(scheduling.chunk_of(key) for key in ahead) == sorted(k + d for k in firsts for d in (0, 1))
        with get_task_stream(client) as stream:
            got = float(scheduling.compute(client, ordered, optimize=False, ahead=ahead))
        for _ in range(100):  # nothing left on the workers: the heads are released with the result (a message)
            if not client.who_has():
                break
            time.sleep(0.05)
        assert not client.who_has()
    expected = np.sqrt(sum((_numpy_step(_numpy_chunk({None: {"chunk-location": (k,), "chunk-shape": (size,)}}, 1),
                                        _numpy_chunk({None: {"chunk-location": (k,), "chunk-shape": (size,)}}, 2)
                                        ).astype(np.float64) ** 2).sum() for k in range(n)))
    assert got == pytest.approx(expected, rel=1e-6)
    ran = {scheduling.chunk_of(t["key"]): t["worker"] for t in stream.data if scheduling.chunk_of(t["key"]) is not None}
    assert ran == {k: workers[k * width // n] for k in range(n)}
    assert sum(scheduling.chunk_of(t["key"]) is not None for t in stream.data) == n  # each chunk once


def test_one_worker_gets_the_graph_optimised_and_unplaced():
    x = da.ones((40,), chunks=10)
    ordered = scheduling.placed(x.sum(), 4, ["tcp://only:1"])
    layers = ordered.__dask_graph__().layers.values()
    assert all(not (layer.annotations or {}).get("workers") for layer in layers)
    assert scheduling.slab_heads(ordered, 4, ["tcp://only:1"]) == []  # nothing to start ahead


def test_the_task_stream_summary_counts_compute_and_transfers_per_worker():
    # a transfer is filed under the task that needed it (with that task's own nbytes): counted and timed, no bytes
    stream = [
        {"worker": "a", "nbytes": 4, "startstops": [{"action": "transfer", "start": 1.0, "stop": 1.5, "source": "b"},
                                                     {"action": "compute", "start": 1.5, "stop": 2.0}]},
        {"worker": "a", "nbytes": 4, "startstops": [{"action": "compute", "start": 2.0, "stop": 3.0}]},
        {"worker": "b", "nbytes": 4, "startstops": [{"action": "compute", "start": 0.5, "stop": 0.75}]},
    ]
    summary = scheduling.task_stream_summary(stream)
    assert summary == {"a": {"tasks": 2, "compute_s": 1.5, "transfers": 1, "transfer_s": 0.5, "span_s": 2.0},
                       "b": {"tasks": 1, "compute_s": 0.25, "transfers": 0, "transfer_s": 0.0, "span_s": 0.25}}
    # with the run's (submitted, result) times: when each worker started and stopped within it
    timed = scheduling.task_stream_summary(stream, (0.25, 3.5))
    assert (timed["a"]["lead_s"], timed["a"]["trail_s"]) == (0.75, 0.5)
    assert (timed["b"]["lead_s"], timed["b"]["trail_s"]) == (0.25, 2.75)
