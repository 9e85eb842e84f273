"""Gradients of kspec kernels: the backward kernel an elementwise spec's ``grad`` table declares,
and :func:`vjp`, which runs a kernel and gives the function from its outputs' gradients to its inputs'.

A front end over the kernels layer, as kspec.fuse is: it makes specs and runs them through kspec.kernels; it owns
no compiler or launcher.
"""

from __future__ import annotations

from ..spec import backward_spec, outputs_read
from ._custom import CustomVJP, custom_vjp
from ._program import (
    ArrayOps,
    DiffProgram,
    DiffStep,
    assemble,
    auto_kernel,
    differentiable_program,
    result_nodes,
    run_backward,
    run_forward,
)
from ._summed import SummedBackward, broadcast_gradients, layouts_key, summed_backward
from ._sums import by_input, kept_shape, shared_for, sum_to_shape
from ._vjp import vjp

# ``__all__`` is the user-facing API (docs/reference/grad.md); the other names imported above are kspec.grad's
# interface to kspec.torch and kspec.jax, which import them from here (tests/project_tests/test_layers.py).
__all__ = ["CustomVJP", "backward_spec", "custom_vjp", "vjp"]
