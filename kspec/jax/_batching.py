"""``jax.vmap`` of a kspec call: the same kernel planned again on the batched shapes.

``jax.custom_batching.custom_vmap`` hands the rule the operands with their batch axis in front. What the
batched call is depends on the kernel:

* elementwise (an ElementwiseKernel, or a fused function whose kernels are all elementwise): every array gets
  the batch axis in front and size-1 axes up to the call's rank (an unbatched array a size-1 batch axis), so
  kspec's broadcasting pairs each batch element with its own slice; the outputs have the batch axis in front;
* reduction: the same, and the reduced axes shift by one (``axis=None`` reduces every axis but the batch one).

Where the batched call would not be the map of the unbatched one, vmap raises
:class:`kspec.KspecNotImplementedError` saying why: ``raw`` parameters (indexed by hand over the whole array),
an operation that reads the flat index ``i`` / ``_ind`` (or a reduction's ``_in_ind`` / ``_out_ind``), an
elementwise ``size=``, a fused function that reduces.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._errors import AxisError, KspecNotImplementedError
from ._callspec import CallSpec, kernel_name

Launch = Callable[[CallSpec, tuple[Any, ...]], tuple[tuple[Any, ...], str]]

_ELEMENTWISE_INDEX = re.compile(r"\b(i|_ind)\b")
_REDUCTION_INDEX = re.compile(r"\b(_in_ind|_out_ind)\b")


def batch_rule(spec: CallSpec, launch: Launch, axis_size: int, in_batched: Sequence[bool],
               *arrays: Any) -> tuple[Any, Any]:  # fmt: skip
    """custom_vmap's rule: (outputs, which outputs are batched) of ``spec`` on batched ``arrays``; ``launch``
    emits the batched call (kspec/jax/_emit.py, batchable again for nested vmaps)."""
    if not any(in_batched):
        outputs, _result = launch(spec, tuple(arrays))
        return outputs, tuple(False for _ in outputs)
    import jax.numpy as jnp

    given = spec.output_operands()  # outputs passed as arguments: each batch element writes its own
    operands = [a if batched or k not in given else jnp.broadcast_to(a, (axis_size, *a.shape))
                for k, (a, batched) in enumerate(zip(arrays, in_batched))]  # fmt: skip
    flags = [batched or k in given for k, batched in enumerate(in_batched)]
    ranks = [a.ndim - 1 if batched else a.ndim for a, batched in zip(operands, flags)]
    kind = batching_kind(spec, [(a.dtype, r) for a, r in zip(operands, ranks)])
    kwargs = dict(spec.kwargs)
    if kind == "reduction":  # the call's rank is its inputs'; outputs keep their own shape behind the batch axis
        rank = max((r for k, r in enumerate(ranks) if k not in given), default=0)
        kwargs["axis"] = shifted_axes(kernel_name(spec.kernel), kwargs.get("axis"), rank)
        padded = tuple(a if k in given else _pad(a, b, rank) for k, (a, b) in enumerate(zip(operands, flags)))
    else:
        rank = max(ranks, default=0)
        padded = tuple(_pad(a, b, rank) for a, b in zip(operands, flags))
    outputs, _result = launch(spec.with_kwargs(kwargs), padded)
    return outputs, tuple(True for _ in outputs)


def _pad(array: Any, batched: bool, rank: int) -> Any:
    """``array`` as rank + 1 dims: the batch axis (size 1 when unbatched) then size-1 axes, then its own."""
    own = array.shape[1:] if batched else array.shape
    batch = array.shape[0] if batched else 1
    return array.reshape((batch, *(1,) * (rank - len(own)), *own))


def shifted_axes(name: str, axis: Any, rank: int) -> tuple[int, ...]:
    """The reduced axes of the batched call: ``axis`` of a rank-``rank`` call, one further right."""
    if axis is None:
        return tuple(range(1, rank + 1))
    items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shifted = []
    for item in items:
        item = int(item)
        if not -rank <= item < rank:
            raise AxisError(f"axis {item} is out of bounds for array of dimension {rank}: kernel '{name}'", axis=item,
                            ndim=rank)  # fmt: skip
        shifted.append(item % rank + 1)
    return tuple(shifted)


def batching_kind(spec: CallSpec, logical: Sequence[tuple[Any, int]]) -> str:
    """``"elementwise"`` or ``"reduction"``: how ``spec``'s kernel batches; KspecNotImplementedError if it cannot.
    ``logical``: (dtype, rank) of each array operand without the batch axis."""
    kernel = spec.kernel
    name = kernel_name(kernel)

    def refuse(why: str) -> KspecNotImplementedError:
        return KspecNotImplementedError(
            f"jax.vmap of kernel '{name}': {why}, so the batched call would not be the unbatched one per batch "
            "element; call it per element (jax.lax.map) instead"
        )

    kind = getattr(kernel, "KIND", None)
    if kind is None:
        return _fused_kind(spec, logical, refuse)
    if any(p.raw for p in (*kernel.in_params, *kernel.out_params)):
        raise refuse("it has raw parameters (indexed by hand over the whole array)")
    if kind == "elementwise":
        if dict(spec.kwargs).get("size") is not None:
            raise refuse("size= sets the loop length by hand")
        texts = [kernel.operation, getattr(kernel.spec, "loop_prep", ""), getattr(kernel.spec, "after_loop", "")]
        if any(_ELEMENTWISE_INDEX.search(t or "") for t in texts):
            raise refuse("its operation reads the flat index (i or _ind)")
        return "elementwise"
    if kind == "reduction":
        texts = [kernel.map_expr, kernel.reduce_expr, kernel.post_map_expr]
        if any(_REDUCTION_INDEX.search(t or "") for t in texts):
            raise refuse("its expressions read _in_ind or _out_ind (their sizes change with the batch)")
        return "reduction"
    raise refuse(f"kernels of kind {kind!r} are not batched by kspec.jax")


def _fused_kind(spec: CallSpec, logical: Sequence[tuple[Any, int]], refuse: Any) -> str:
    """A fused function batches as elementwise when every kernel it traces to for these argument types (dtype and
    rank of each array, ``logical``) is elementwise."""
    from ..spec import ElementwiseSpec

    specs = getattr(spec.kernel, "specs", None)
    if specs is None:
        raise refuse(f"kspec.jax does not know how {type(spec.kernel).__name__} batches")
    # NumPy stand-ins: a fused function's trace reads only dtype and rank (no memory: broadcast views of a scalar)
    stand_ins = tuple(np.broadcast_to(np.zeros((), dtype), (1,) * ndim) for dtype, ndim in logical)
    traced = specs(*spec.arguments(stand_ins))
    if not all(isinstance(s, ElementwiseSpec) for s in traced):
        raise refuse("the fused function reduces (only fused functions that are elementwise throughout batch)")
    return "elementwise"
