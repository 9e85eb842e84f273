"""examples/training: a small model trained in PyTorch (inside torch.compile) and in JAX (inside jax.jit) with a
kspec fused activation and a spec kernel whose gradient its spec declares (issue [AD]). The loss must fall; on
kspec's CPU device here, on the GPU in the gpu-marked cases."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

import kspec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "training"


@pytest.fixture(autouse=True)
def _on_path():
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


def _falls(losses):
    assert all(loss == loss for loss in losses), losses  # no NaN
    assert losses[-1] < 0.5 * losses[0], (losses[0], losses[-1])


@pytest.mark.parametrize("where", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_training_in_pytorch(request, where):
    pytest.importorskip("torch")
    if where == "cpu":
        request.getfixturevalue("on_cpu_device")
    from helpers.torch_cases import fresh_compiles
    import train_torch

    with fresh_compiles():
        _falls(train_torch.train(40, where))


@pytest.mark.parametrize("where", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_training_in_jax(request, where):
    jax = pytest.importorskip("jax")
    with contextlib.ExitStack() as stack:
        if where == "cpu":
            request.getfixturevalue("on_cpu_device")
            stack.enter_context(jax.default_device(jax.devices("cpu")[0]))
        import train_jax

        _falls(train_jax.train(40))


def test_the_loss_kernel_declares_its_gradient():
    from model import huber

    assert set(huber.spec.grad) == {"pred"}
    assert isinstance(kspec.load(EXAMPLES / "specs.toml"), kspec.KernelLibrary)
