"""Gradients of kspec kernels (issue [AD]): the backward kernel an elementwise spec's ``grad`` table declares,
and :func:`vjp`, which runs a kernel and gives the function from its outputs' gradients to its inputs'.

A front end over the kernels layer, as kspec.fuse is: it makes specs and runs them through kspec.kernels; it owns
no compiler or launcher.
"""

from __future__ import annotations

from ..spec import backward_spec
from ._vjp import auto_kernel, kept_shape, vjp

__all__ = ["auto_kernel", "backward_spec", "kept_shape", "vjp"]
