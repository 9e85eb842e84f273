"""A spec kernel as the planner reads it: :class:`PlannerView`, which meets
:class:`kspec.kernels.planning.PlannedKernel`.

The planner (kspec/kernels/planning/) sits below the kernel classes, so it cannot know them; it reads what it needs
through this view, by name, and the view reads the kernel's own state here, in the kernel classes' package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..render import Specialization
    from .planning import Bound


class PlannerView:
    """A spec kernel as the planner reads it (:class:`kspec.kernels.planning.PlannedKernel`): by name, never
    through its private attributes. Made per planned signature, never on a call that hits one."""

    __slots__ = ("_kernel",)

    def __init__(self, kernel: Any) -> None:  # a SpecKernel (whose module imports this one)
        self._kernel = kernel

    @property
    def name(self) -> str:
        return self._kernel.name

    @property
    def nout(self) -> int:
        return self._kernel._nout

    @property
    def spec(self) -> Any:
        return self._kernel._spec

    @property
    def cupy_rules(self) -> bool:
        return self._kernel._cupy_rules

    @property
    def binaries(self) -> Any:
        return self._kernel._binaries

    def split_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                   accepted: str) -> tuple[Sequence[Any], Sequence[Any] | None]:  # fmt: skip
        return self._kernel._split_args(args, kwargs, accepted)

    def check_stream(self, stream: object) -> None:
        self._kernel._check_stream(stream)

    def specializer(self, bound: Bound, used: bool = True) -> Specialization:
        return self._kernel._specializer(bound, used)

    def plan_tuning(self, device_id: int | None) -> Any:
        return self._kernel._plan_tuning(device_id)

    def result_items(self, nargs: int) -> tuple[int, tuple[int, ...]]:
        return self._kernel._result_items(nargs)

    def abstract_steps(self, plan: Any, device_id: int) -> tuple[list[Any], int]:
        return self._kernel._abstract_steps(plan, device_id)
