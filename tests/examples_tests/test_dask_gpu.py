"""examples/dask on the GPU: the pipeline of kspec kernels over CuPy chunks on a cluster of one worker per GPU
(1 GPU, and 2 where the machine has them), checked against the same numbers in float64, next to the same
pipeline with CuPy's kernels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import kspec

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "dask"))

pytest.importorskip("distributed")
pytest.importorskip("cupy")
pipeline = pytest.importorskip("pipeline")


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
    assert result["tasks"] > 16


def test_same_pipeline_with_cupy_kernels(kernels_dir, monkeypatch):
    monkeypatch.setenv("DASK_KERNELS_DIR", str(kernels_dir))
    result = pipeline.run(1, gib=0.25, chunk_mib=16, workdir=kernels_dir, use_cupy=True)
    assert result["tasks"] > 16
