"""``ArraySpec``: an array that has no memory (what a tracer knows of one), and what a plan says about a launch.

``kernel.output_specs(*specs)`` and ``kernel.plan_launch(*specs)`` take ArraySpecs where a call takes arrays
(a framework tracing a graph, ``torch.compile`` or ``jax.jit``, has shapes, dtypes and devices, never memory).
Binding reads an ArraySpec into the same :class:`~kspec.runtime.ArrayInfo` a real array gives (pointer 0,
no library), so the one planner of a call plans it (:mod:`._planner`, :mod:`._reduction_planner`).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..._named_tuple import NamedTuple
from ... import dtypes
from ..._errors import KspecTypeError, KspecValueError
from ...runtime import HOST_DEVICE_ID, ArrayInfo

CUDA, CPU = "cuda", "cpu"


class _ArraySpecFields(NamedTuple):
    shape: tuple[int, ...]
    dtype: str  # kspec dtype name ("float32", ...)
    device: str = CUDA  # "cuda" (GPU device) or "cpu" (kspec's CPU device)
    device_id: int = 0  # the CUDA ordinal; -1 (kspec's CPU device) for device "cpu"
    strides: tuple[int, ...] | None = None  # bytes; None: C-contiguous


class ArraySpec(_ArraySpecFields):
    """An array without memory: ``ArraySpec(shape, dtype, device="cuda", device_id=0, strides=None)``.

    ``dtype`` takes a kspec dtype name or anything NumPy reads as a dtype (``np.float32``, ``"f4"``) and keeps
    the kspec name; ``strides`` are in bytes (None: C-contiguous); device ``"cpu"`` is kspec's CPU device,
    whose ``device_id`` is -1. Invalid fields raise a TypeError / ValueError naming the field. Sizes and
    strides may be a tracer's symbolic ints (``torch.SymInt``, dynamic shapes): output_specs plans with them."""

    __slots__ = ()

    def __new__(cls, shape: Any, dtype: Any, device: str = CUDA, device_id: int = 0,
                strides: Any = None) -> ArraySpec:  # fmt: skip
        shape = _ints("shape", shape)
        if any(extent < 0 for extent in shape):
            raise KspecValueError(f"ArraySpec: shape: extents must be >= 0, got {shape}")
        if device not in (CUDA, CPU):
            raise KspecValueError(f"ArraySpec: device: expected 'cuda' or 'cpu', got {device!r}")
        device_id = _ints("device_id", (device_id,))[0]
        if device == CPU:
            if device_id not in (0, HOST_DEVICE_ID):
                raise KspecValueError(f"ArraySpec: device_id: the CPU device has no ordinal {device_id} (it is {HOST_DEVICE_ID})")
            device_id = HOST_DEVICE_ID
        elif device_id < 0:
            raise KspecValueError(f"ArraySpec: device_id: expected a CUDA ordinal >= 0, got {device_id}")
        if strides is not None:
            strides = _ints("strides", strides)
            if len(strides) != len(shape):
                raise KspecValueError(f"ArraySpec: strides: {len(strides)} strides for {len(shape)} dims (shape {shape})")
        return super().__new__(cls, shape, dtype_name(dtype), device, device_id, strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return dtypes.BY_NAME[self.dtype].itemsize

    @property
    def byte_strides(self) -> tuple[int, ...]:
        """The strides in bytes (C-contiguous ones when ``strides`` is None)."""
        return self.strides if self.strides is not None else dtypes.c_strides(self.shape, self.itemsize)

    @property
    def nbytes(self) -> int:
        size = 1
        for extent in self.shape:
            size *= extent
        return size * self.itemsize


def dtype_name(dtype: Any) -> str:
    """A kspec dtype name for a name or anything NumPy reads as a dtype; TypeError naming ``dtype`` otherwise."""
    if isinstance(dtype, str):
        name = dtypes.canonical_name(dtype)
        if name is not None:
            return name
    try:
        return dtypes.from_numpy(np.dtype(dtype)).name
    except (KeyError, TypeError, ValueError):
        raise KspecTypeError(f"ArraySpec: dtype: expected one of {', '.join(dtypes.NAMES)}, got {dtype!r}") from None


def _ints(field: str, values: Any) -> tuple[int, ...]:
    try:
        items = tuple(values)
    except TypeError:
        raise KspecTypeError(f"ArraySpec: {field}: expected a tuple of ints, got {type(values).__name__}") from None
    result = []
    for value in items:
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise KspecTypeError(f"ArraySpec: {field}: expected ints, got {value!r} ({type(value).__name__})")
        result.append(value if _symbolic(value) else operator.index(value))
    return tuple(result)


def _symbolic(value: object) -> bool:
    """A tracer's symbolic int (``torch.SymInt``: dynamic shapes), kept as it is: the planner's comparisons on
    it become the tracer's guards, its arithmetic the outputs' symbolic sizes (``operator.index`` would make
    the tracer specialise it)."""
    return type(value) is not int and hasattr(value, "node") and type(value).__name__ == "SymInt"


def array_spec_info(spec: ArraySpec) -> ArrayInfo:
    """The ArrayInfo binding reads from a real array, for an ArraySpec: pointer 0, no library, not read-only.
    Its NumPy dtype only carries the item size where NumPy lacks the type (bfloat16 without ml_dtypes)."""
    np_dtype = dtypes.BY_NAME[spec.dtype].numpy
    if np_dtype is None:
        np_dtype = np.dtype(f"V{spec.itemsize}")
    return ArrayInfo(0, spec.shape, spec.byte_strides, np_dtype, spec.device_id, None, False, spec)


def spec_of_output(shape: tuple[int, ...], dtype: str, device_id: int) -> ArraySpec:
    """The ArraySpec of an output a call allocates: C-contiguous, on the call's device."""
    return ArraySpec(shape, dtype, CPU if device_id == HOST_DEVICE_ID else CUDA, device_id)


class LaunchStep(NamedTuple):
    """One kernel launch of a :class:`LaunchPlan`."""

    function: int  # the loaded function's handle (CUfunction as an int; the entry's address on the CPU device)
    grid: int
    block: int
    shared: int  # dynamic shared memory bytes
    params: bytes  # the parameter buffer: static values and scalars written, pointers 0
    slot_offsets: tuple[int, ...]  # byte offset of each kernel parameter in ``params``
    # (byte offset in params, role, index): "input" -> the index-th array among the call's inputs (argument
    # order, scalars skipped), "output" -> outputs[index], "workspace" -> workspace base + index bytes
    pointers: tuple[tuple[int, str, int], ...]


class LaunchPlan(NamedTuple):
    """A call planned for ArraySpecs (``kernel.plan_launch``): what to allocate and what to launch, in order,
    on one stream. ``result``: what the call returns, ``"single"`` (outputs[0]), ``"tuple"`` (all outputs)
    or ``"none"``."""

    outputs: tuple[ArraySpec, ...]
    result: str
    steps: tuple[LaunchStep, ...]
    workspace: int  # bytes of device scratch the steps use (0: none), a multiple of 256
    device_id: int


WORKSPACE_ALIGN = 256


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to the workspace alignment."""
    return -(-nbytes // WORKSPACE_ALIGN) * WORKSPACE_ALIGN
