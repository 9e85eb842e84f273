"""What is static about a traced kspec call: the kernel, the non-array arguments, its keywords, the device."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from .._errors import KspecNotImplementedError
from ._describe import KIND_CUDA, KIND_HOST


class Static:
    """A positional argument that is not an array: a Python or NumPy scalar, written into the plan."""

    __slots__ = ("value", "_key")

    def __init__(self, value: Any) -> None:
        self.value = value
        self._key = (type(value), repr(value))  # repr: exact for floats, and NaN equals itself

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Static) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Static({self.value!r})"


@dataclass(frozen=True)
class Target:
    """Where the plan runs: CUDA device ``device`` (kind KIND_CUDA) or kspec's CPU device (KIND_HOST)."""

    kind: int
    device: int


@dataclass(frozen=True)
class CallSpec:
    """Everything static about a traced call: the kernel, which positions are arrays, the scalars, the kernel's
    keywords and the device. Equal specs trace to the same launch."""

    kernel: Any
    layout: tuple[Static | None, ...]  # None: the next array operand
    kwargs: tuple[tuple[str, Any], ...]
    target: Target

    def arguments(self, arrays: tuple[Any, ...]) -> list[Any]:
        """The call's positional arguments with ``arrays`` in the array positions."""
        items = iter(arrays)
        return [next(items) if slot is None else slot.value for slot in self.layout]

    def output_operands(self) -> dict[int, int]:
        """operand index -> output index, for the outputs given as arguments (positions from the kernel's
        ``nin`` on; a fused function takes none)."""
        nin = getattr(self.kernel, "nin", None)
        found: dict[int, int] = {}
        operand = 0
        for position, slot in enumerate(self.layout):
            if slot is None:
                if nin is not None and position >= nin:
                    found[operand] = position - nin
                operand += 1
        return found

    def with_kwargs(self, kwargs: Mapping[str, Any]) -> CallSpec:
        """The same call with other keywords (a batched reduction's axes)."""
        return replace(self, kwargs=tuple(sorted(kwargs.items())))


def kernel_name(kernel: Any) -> str:
    return str(getattr(kernel, "name", None) or getattr(kernel, "__name__", None) or type(kernel).__name__)


def target_of(device: Any) -> Target:
    """The device a call is planned for: the arrays' (eager calls), else JAX's default device."""
    import jax

    if device is None:
        configured = jax.config.jax_default_device
        if isinstance(configured, str):
            device = jax.devices(configured)[0]
        else:
            device = configured if configured is not None else jax.devices()[0]
    platform = str(device.platform).lower()
    if platform == "cpu":
        return Target(KIND_HOST, -1)
    if platform in ("gpu", "cuda"):
        ordinal = getattr(device, "local_hardware_id", None)  # the CUDA ordinal (device.id is global)
        return Target(KIND_CUDA, int(device.id if ordinal is None else ordinal))
    raise KspecNotImplementedError(
        f"kspec.jax runs kernels on CUDA GPUs and on the CPU; JAX's device is {device} (platform {platform!r})"
    )


