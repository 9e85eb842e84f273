"""What both training examples share: the kernels, and the data of a small regression problem.

A two-layer network ``y = W2 @ gelu(W1 @ x + b1)`` learns ``sin`` of a linear map of its input. The activation is a
``kspec.fuse`` function (differentiated with no declaration: kspec derives its backward from the traced kernel);
the loss is the spec kernel ``huber`` of specs.toml, whose gradient its spec declares.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import kspec

# --8<-- [start:model]
KERNELS = kspec.load(Path(__file__).with_name("specs.toml"))
huber = KERNELS.huber


@kspec.fuse
def bias_gelu(x, b):
    v = x + b
    return 0.5 * v * (1.0 + np.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
# --8<-- [end:model]


def problem(n: int = 512, features: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), float32: ``n`` samples of ``features`` inputs and 4 targets."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features)).astype(np.float32)
    mix = rng.standard_normal((features, 4)).astype(np.float32) / np.sqrt(features)
    return x, np.sin(x @ mix).astype(np.float32)
