"""Gradients summed to their inputs' shapes: a reduction's kept shape, and the sums over broadcast axes."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..kernels import ReductionKernel

GRAD_PREFIX = "grad_"  # grad_<input>: a backward's output (kspec/spec/_grad.py)
_SUMS_KEPT = 64
_sums: dict[tuple[Any, str], Any] = {}  # (the binary store, dtype) -> the reduction that sums such gradients


def kept_shape(shapes: Sequence[tuple[int, ...]], axis: Any) -> tuple[int, ...]:
    """A reduction's output shape with its reduced axes kept (extent 1): the inputs' broadcast shape, reduced
    over ``axis`` (None: all; an int or a sequence; negative counts from the end). The output and its gradient,
    reshaped to it, broadcast back over the inputs in the backward kernel."""
    import numpy as np

    full = np.broadcast_shapes(*shapes)
    if axis is None:
        axes = set(range(len(full)))
    else:
        axes = {int(a) % max(len(full), 1) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    return tuple(1 if d in axes else n for d, n in enumerate(full))


def reduced(grad: Any, arg: Any, stream: Any, beside: Any = None) -> Any:
    """``grad`` (the broadcast shape) summed to ``arg``'s shape: over the leading axes ``arg`` lacks and the axes
    where ``arg`` has extent 1. A Python number's gradient is the sum of all. The sum is a kspec reduction of
    the gradient's dtype (kspec.spec.grad_sum_spec), served from the binaries of the kernel ``beside`` where it
    has them: ``kspec build`` precompiles the sums beside the backwards."""
    shape = tuple(getattr(arg, "shape", ()))
    full = tuple(grad.shape)
    if shape == full:
        return grad
    lead = len(full) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and full[lead + d] != 1)
    summed = _sum_kernel(grad, beside)(grad, axis=axes, **({"stream": stream} if stream is not None else {}))
    return summed.reshape(shape)


def _sum_kernel(grad: Any, beside: Any) -> Any:
    from ..runtime import array_dtype_ndim

    found = array_dtype_ndim(grad)
    return grad_sum_kernel(found[0].name if found is not None else "float64", beside)


def grad_sum_kernel(dtype: str, beside: Any) -> Any:
    """The reduction that sums gradients of ``dtype`` (kspec.spec.grad_sum_spec), from ``beside``'s binaries."""
    from ..spec import grad_sum_spec

    binaries = getattr(beside, "binaries", None)
    key = (binaries, dtype)
    kernel = _sums.get(key)
    if kernel is None:
        if len(_sums) >= _SUMS_KEPT:
            del _sums[next(iter(_sums))]
        kernel = _sums[key] = ReductionKernel.from_spec(grad_sum_spec(dtype), binaries=binaries)
    return kernel


def sum_to_shape(grad: Any, like: Any) -> Any:
    """A PyTorch gradient summed to ``like``'s shape (``sum_to_size``: the axes it was broadcast along)."""
    shape = getattr(like, "shape", None)
    return grad.sum_to_size(shape) if shape is not None and tuple(grad.shape) != tuple(shape) else grad


def shared_for(spec: Any, inputs: Sequence[Any]) -> dict[str, str]:
    """The gradients a backward may take from an earlier input's (``spec.shared_gradients()``: ``{input: earlier
    input}``) for these inputs: all of them when every such input is broadcast, so that its gradient is summed
    from the earlier one's array (a new array: nothing aliases), one full-size array less than writing it; else
    none (a gradient of the full shape must be an array of its own)."""
    shared = spec.shared_gradients()
    if not shared:
        return {}
    shapes = {p.name: tuple(getattr(a, "shape", ())) for p, a in zip(spec.in_params, inputs)}
    full = _broadcast(tuple(shapes.values()))
    return shared if all(shapes.get(name, full) != full for name in shared) else {}


def _broadcast(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The shapes' broadcast shape; a tracer's symbolic sizes (torch.SymInt, unhashable) are broadcast by hand."""
    try:
        return _broadcast_ints(shapes)
    except TypeError:
        n = max((len(s) for s in shapes), default=0)
        padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
        return tuple(next((e for e in column if not (type(e) is int and e == 1)), 1) for column in zip(*padded))


@functools.lru_cache(maxsize=256)  # asked on every backward call with the same few shapes (a training loop)
def _broadcast_ints(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    import numpy as np

    return tuple(np.broadcast_shapes(*shapes))


def by_input(names: Sequence[str], made: Any, shared: dict[str, str]) -> dict[str, Any]:
    """A backward kernel's results by input name: ``made`` holds the gradients of ``names`` less those in ``shared``
    (each then the earlier input's)."""
    written = [n for n in names if n not in shared]
    found = dict(zip(written, made if isinstance(made, (tuple, list)) else (made,)))
    for name, earlier in shared.items():
        found[name] = found[earlier]
    return found
