"""kspec kernels inside Dask (examples/dask): on a local cluster of processes without a GPU, the graph is built
and shipped, the kernels arrive intact on the workers (specs pickled, the generated module imported there
with its binaries), and a task fails with kspec's NoDeviceError, not a pickling error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import kspec

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "dask"))

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
pipeline = pytest.importorskip("pipeline")


def _on_worker_spec(kernel):  # runs on a worker: what arrived
    return type(kernel).__name__, kernel.spec.to_data()


def _on_worker_typed():  # runs on a worker: the generated module and its binaries are there
    module = pipeline.typed_kernels()
    binaries = Path(module.__file__).parent / "_binaries" / "manifest.json"
    return sorted(module.__all__), binaries.is_file()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    workdir = pipeline.prepare(tmp_path_factory.mktemp("dask"), archs="sm_90")
    with pipeline.cluster(2, workdir) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        yield client


def test_kernels_arrive_intact_on_the_workers(client):
    axpy = pipeline.axpy_kernel()
    name, data = client.submit(_on_worker_spec, axpy, pure=False).result()
    assert name == "ElementwiseKernel" and data == axpy.spec.to_data()
    assert client.submit(_on_worker_typed, pure=False).result() == (["scaled_diff", "sum_of_squares"], True)


def test_every_task_function_pickles_by_value(client):
    # the cluster ships this module's functions by value: module state they reach must pickle too
    import cloudpickle

    for task in (pipeline.step_kspec, pipeline.step_cupy, pipeline.partial_kspec, pipeline.partial_cupy,
                 pipeline.combine, pipeline.random_chunk, pipeline.throttled):
        assert callable(cloudpickle.loads(cloudpickle.dumps(task)))


def test_a_task_without_a_gpu_fails_with_no_device_error(client):
    x = da.from_array(np.arange(16, dtype=np.float32), chunks=4)
    norm = pipeline.pipeline(x, x + 1)
    assert len(norm.__dask_graph__()) > 8  # map_blocks per chunk, then the reduction's tree
    with pytest.raises(kspec.NoDeviceError):
        client.compute(norm).result()
