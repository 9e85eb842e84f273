"""PyTorch tensors as kspec sees them: a tensor (a FakeTensor while ``torch.compile`` traces) as an ArraySpec,
outputs made from ArraySpecs, and host tensors as NumPy arrays for kspec's CPU device."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from .._errors import KspecValueError
from ..kernels import ArraySpec
from ..runtime import device_kind

_NAMES: dict[Any, str] = {}  # torch dtype -> kspec dtype name (as spelled by both: "float32", "bfloat16"...)


def _torch() -> Any:
    return sys.modules["torch"]


def dtype_name(dtype: Any) -> str:
    """The kspec dtype name of a torch dtype (``ArraySpec`` refuses the names kspec lacks, naming them)."""
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def torch_dtype(name: str) -> Any:
    return getattr(_torch(), name)


def array_spec(t: Any) -> ArraySpec:
    """A tensor's shape, dtype, strides (in bytes) and device as an ArraySpec. Symbolic sizes (dynamic shapes)
    stay symbolic: kspec's planning on them gives symbolic output sizes and the guards its decisions need."""
    itemsize = t.element_size()
    strides = tuple(s * itemsize for s in t.stride())
    device = t.device
    if device.type == "cpu":
        return ArraySpec(tuple(t.shape), dtype_name(t.dtype), "cpu", -1, strides)
    return ArraySpec(tuple(t.shape), dtype_name(t.dtype), "cuda", device.index or 0, strides)


def scalar_stand_in(value: Any) -> Any:
    """A number as planning needs it: a traced scalar (``torch.SymFloat`` / ``SymInt`` / ``SymBool``: a Python
    number Dynamo made an input of the graph) as a plain number of its Python type. Outputs depend on a
    scalar's type only, and reading the traced value would make Dynamo specialise the graph on it (a
    recompile per value); the value is checked against the parameter's type when the op runs."""
    torch = _torch()
    if isinstance(value, torch.SymFloat):
        return 0.0
    if isinstance(value, torch.SymBool):
        return False
    if isinstance(value, torch.SymInt):
        return 0
    return value


def stand_ins(values: Sequence[Any]) -> list[Any]:
    """A call's arguments as planning sees them: each tensor (a FakeTensor while tracing) as its ArraySpec, each
    number through :func:`scalar_stand_in`."""
    tensor = _torch().Tensor
    return [array_spec(v) if isinstance(v, tensor) else scalar_stand_in(v) for v in values]


def empty_like_spec(spec: ArraySpec, device: Any) -> Any:
    """A new tensor for an output ArraySpec, on ``device`` (a FakeTensor inside a trace)."""
    return _torch().empty(spec.shape, dtype=torch_dtype(spec.dtype), device=device)


def first_device(args: Sequence[Any]) -> Any:
    tensor = _torch().Tensor
    return next(a.device for a in args if isinstance(a, tensor))


def check_cpu_device(name: str) -> None:
    """Host tensors run on kspec's CPU device: a clear error when it is off."""
    if device_kind() != "cpu":
        raise KspecValueError(
            f"kspec.torch: op kspec::{name} got CPU tensors, which kspec runs on its CPU device; turn it on "
            "(KSPEC_DEVICE=cpu or kspec.use_device('cpu')), or move the tensors to the GPU (.cuda())"
        )


def host_arrays(args: Sequence[Any]) -> list[Any]:
    """CPU tensors as NumPy arrays sharing their memory (kspec's CPU device takes NumPy arrays)."""
    tensor = _torch().Tensor
    return [a.detach().numpy() if isinstance(a, tensor) else a for a in args]


def host_tensors(result: Any) -> Any:
    """NumPy outputs of a CPU-device call as tensors sharing their memory."""
    from_numpy = _torch().from_numpy
    if isinstance(result, tuple):
        return tuple(from_numpy(r) for r in result)
    return from_numpy(result)
