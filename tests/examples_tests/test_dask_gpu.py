"""examples/dask on the GPU: the pipeline of kspec kernels over CuPy chunks on a cluster of one worker per GPU
(1 GPU, and 2 where the machine has them), checked against the same numbers in float64, next to the same
pipeline with CuPy's kernels; the stencil pipeline (its halo graph and map_overlap's) with the spec kernel and with
cupyx.scipy.ndimage; and scaling.sh's whole sequence at a small size: capture, build, workers served from it
with no NVRTC (zero compiles in their logs), CuPy's rows, the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kspec

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "dask"))

pytest.importorskip("distributed")
pytest.importorskip("cupy")
gpu_cluster = pytest.importorskip("gpu_cluster")
pipeline = pytest.importorskip("pipeline")
stencil = pytest.importorskip("stencil")


@pytest.fixture(scope="module")
def kernels_dir(tmp_path_factory):
    return pipeline.prepare(tmp_path_factory.mktemp("dask"), archs=kspec.get_device().arch)


@pytest.mark.parametrize("gpus", [1, 2])
def test_pipeline_matches_float64_reference(kernels_dir, gpus, monkeypatch):
    from kspec.runtime import device_count

    if device_count() < gpus:
        pytest.skip(f"needs {gpus} GPUs, the machine has {device_count()}")
    monkeypatch.setenv("DASK_KERNELS_DIR", str(kernels_dir))
    result = pipeline.run(gpus, gib=0.25, chunk_mib=16, workdir=kernels_dir)  # run() checks the norm
    # 8 chunks: Dask fuses each chunk's tasks (x, y, the step, the partial sum) into one; the combine (and sqrt)
    assert result["tasks"] == 8 + 1


def test_same_pipeline_with_cupy_kernels(kernels_dir, monkeypatch):
    monkeypatch.setenv("DASK_KERNELS_DIR", str(kernels_dir))
    result = pipeline.run(1, gib=0.25, chunk_mib=16, workdir=kernels_dir, use_cupy=True)
    assert result["tasks"] == 8 + 1


def _cluster_of(gpus):
    from kspec.runtime import device_count

    if device_count() < gpus:
        pytest.skip(f"needs {gpus} GPUs, the machine has {device_count()}")


@pytest.mark.parametrize("kernels,gpus,graph", [("spec", 1, "halo"), ("ndimage", 1, "halo"), ("spec", 2, "halo"),
                                                ("ndimage", 2, "halo"), ("spec", 2, "overlap"), ("ndimage", 1, "overlap")])
def test_stencil_matches_ndimage_on_the_whole_volume(kernels_dir, kernels, gpus, graph, monkeypatch):
    _cluster_of(gpus)
    from distributed import Client

    monkeypatch.setenv("DASK_KERNELS_DIR", str(kernels_dir))
    monkeypatch.setattr(stencil, "AHEAD", 2)  # the slab graph's chain at work on 8 chunks (the default makes 8 ahead)
    with gpu_cluster.cluster(gpus, kernels_dir, modules=(stencil,)) as c, Client(c) as client:
        gpu_cluster.start_workers(client, gpus)
        result = stencil.run_on(client, 0.0625, 8, kernels, repeats=1, graph=graph)  # 8 chunks of 2 planes: all halo
    assert result["tasks"] > 8 and result["energy"] > 0
    assert result.get("ahead", 2) == 2


def test_one_chunk_of_the_spec_kernel_is_ndimage_laplace(kernels_dir, monkeypatch):
    import cupy as cp
    from cupyx.scipy import ndimage

    monkeypatch.setenv("DASK_KERNELS_DIR", str(kernels_dir))
    block = cp.random.default_rng(3).random((37, 19, 45), dtype="float32")  # odd sizes: partial blocks everywhere
    got = stencil.laplace_spec(block)
    cp.testing.assert_allclose(got, ndimage.laplace(block, mode="nearest"), rtol=1e-5, atol=1e-5)


def test_one_chunk_with_its_neighbours_planes_is_that_slab_of_the_volumes_laplace(kernels_dir, monkeypatch):
    import cupy as cp
    from cupyx.scipy import ndimage

    monkeypatch.setenv("DASK_KERNELS_DIR", str(kernels_dir))
    volume = cp.random.default_rng(4).random((41, 19, 45), dtype="float32")
    expected = ndimage.laplace(volume, mode="nearest")
    for start, stop in ((0, 13), (13, 40), (40, 41)):  # the first chunk, a middle one, the last one (one plane)
        block = cp.ascontiguousarray(volume[start:stop])
        lo = volume[start - 1] if start > 0 else None
        hi = volume[stop] if stop < 41 else None
        got = stencil.laplace_spec(block, lo, hi)
        cp.testing.assert_allclose(got, expected[start:stop], rtol=1e-5, atol=1e-5)


def test_a_host_partial_travels_as_the_numpy_value_of_its_chunk():
    import pickle

    import cupy as cp
    import numpy as np

    device_value = cp.arange(5, dtype=cp.float32).sum(keepdims=True)
    partial = pipeline.HostCopy(device_value)
    del device_value  # the copy is queued on the stream: the pool reuses the memory only after it
    arrived = pickle.loads(pickle.dumps(partial))
    assert type(arrived) is np.ndarray and arrived.tolist() == [10.0]
    assert pipeline.combine([partial, arrived], axis=(0,), keepdims=False) == np.float32(20.0)


def test_scaling_sequence_serves_the_workers_from_a_capture(tmp_path):
    # the whole of scaling.sh at a small size on one GPU: the workers' kernel loads all from binaries, NVRTC blocked
    env = dict(os.environ, OUT_DIR=str(tmp_path / "out"), GPUS="1", PYTHON=sys.executable, PIPELINE_CHUNK_MIB="1",
               STENCIL_CHUNK_MIB="8", SCALING_ARGS="--pipeline-gib 0.25 --stencil-gib 0.0625 --repeats 1")
    done = subprocess.run(["bash", str(REPO / "examples" / "dask" / "scaling.sh")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "out" / "kspec.jsonl").read_text().splitlines()]
    measured = [r for r in rows if "row" in r]
    assert len(measured) == 4 and all("error" not in r and r["served"] for r in measured), measured
    clusters = [r["loads"] for r in rows if "loads" in r]
    assert len(clusters) == 1  # one cluster a size
    for found in (found for loads in clusters for found in loads.values()):
        assert found["nvrtc"] == "blocked" and found["compiled"] == [] and found["loads"].get("compiled", 0) == 0, found
        assert found["loads"].get("binary", 0) > 0, found
    cupy_rows = [json.loads(line) for line in (tmp_path / "out" / "cupy.jsonl").read_text().splitlines()]
    assert all("error" not in r for r in cupy_rows if "row" in r)
    assert "| stencil, kspec spec kernel |" in done.stdout
