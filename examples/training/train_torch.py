"""Train the small model of model.py in PyTorch, its activation and loss kspec kernels, inside torch.compile.

    python examples/training/train_torch.py [--steps 200] [--device cuda|cpu]

On ``cpu`` the kernels run on kspec's CPU device (no GPU needed). Prints the loss every 50 steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


# --8<-- [start:train]
def train(steps: int, device: str, compile: bool = True) -> list[float]:
    import torch

    import kspec.torch as kt
    from model import bias_gelu, huber, problem

    act, loss_kernel = kt.register(bias_gelu), kt.register(huber, scalars=["delta"])
    x, y = (torch.as_tensor(a, device=device) for a in problem())
    torch.manual_seed(0)
    w1 = (torch.randn(16, 64, device=device) / 4).requires_grad_()
    b1 = torch.zeros(64, device=device, requires_grad=True)
    w2 = (torch.randn(64, 4, device=device) / 8).requires_grad_()
    opt = torch.optim.Adam([w1, b1, w2], lr=1e-2)

    def loss_of(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return loss_kernel(act(x @ w1, b1) @ w2, y, 0.5).mean()

    step_loss = torch.compile(loss_of, fullgraph=True) if compile else loss_of
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = step_loss(x, y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses

# --8<-- [end:train]

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    options = parser.parse_args()
    import contextlib

    import kspec

    with kspec.use_device("cpu") if options.device == "cpu" else contextlib.nullcontext():
        losses = train(options.steps, options.device)
    for k in range(0, len(losses), 50):
        print(f"step {k:4d}: loss {losses[k]:.5f}")
    print(f"step {len(losses) - 1:4d}: loss {losses[-1]:.5f}")


if __name__ == "__main__":
    main()
