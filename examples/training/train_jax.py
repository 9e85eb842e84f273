"""Train the small model of model.py in JAX, its activation and loss kspec kernels, inside jax.jit.

    python examples/training/train_jax.py [--steps 200] [--device gpu|cpu]

On ``cpu`` the kernels run on kspec's CPU device and JAX on its CPU backend. Prints the loss every 50 steps.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


# --8<-- [start:train]
def train(steps: int) -> list[float]:
    import jax
    import jax.numpy as jnp

    from model import bias_gelu, huber, problem

    x, y = (jnp.asarray(a) for a in problem())
    k1, k2 = jax.random.split(jax.random.key(0))
    params = {"w1": jax.random.normal(k1, (16, 64)) / 4, "b1": jnp.zeros(64), "w2": jax.random.normal(k2, (64, 4)) / 8}

    def loss_of(p: Any, x: Any, y: Any) -> Any:
        return huber(bias_gelu(x @ p["w1"], p["b1"]) @ p["w2"], y, 0.5).mean()

    @jax.jit
    def step(p: Any, x: Any, y: Any) -> tuple[Any, Any]:
        loss, grads = jax.value_and_grad(loss_of)(p, x, y)
        return jax.tree.map(lambda v, g: v - 0.2 * g, p, grads), loss

    losses = []
    for _ in range(steps):
        params, loss = step(params, x, y)
        losses.append(float(loss))
    return losses

# --8<-- [end:train]

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    options = parser.parse_args()
    import jax

    import kspec

    with contextlib.ExitStack() as stack:
        if options.device == "cpu":
            stack.enter_context(kspec.use_device("cpu"))
            stack.enter_context(jax.default_device(jax.devices("cpu")[0]))
        losses = train(options.steps)
    for k in range(0, len(losses), 50):
        print(f"step {k:4d}: loss {losses[k]:.5f}")
    print(f"step {len(losses) - 1:4d}: loss {losses[-1]:.5f}")


if __name__ == "__main__":
    main()
