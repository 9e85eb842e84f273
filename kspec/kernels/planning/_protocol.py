"""What the planner needs of a kernel: :class:`PlannedKernel`, read by name and never through private attributes.

The planner (:mod:`._planner`, :mod:`._reduction_planner`, :mod:`._abstract_plan`) serves ElementwiseKernel and
ReductionKernel, which live above it in :mod:`kspec.kernels`; each hands the planner a small view of itself
(:class:`kspec.kernels._planner_view.PlannerView`) that meets this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TYPE_CHECKING

if TYPE_CHECKING:
    from ...render import Specialization
    from ._binding import Bound


class PlannedKernel(Protocol):
    """A spec kernel as the planner sees it."""

    @property
    def name(self) -> str:
        """The kernel's name, for errors and launch labels."""

    @property
    def nout(self) -> int:
        """How many output parameters it has."""

    @property
    def spec(self) -> Any:
        """Its spec as the kernel holds it: a served kernel keeps a plain one (no Pydantic model)."""

    @property
    def cupy_rules(self) -> bool:
        """Whether CuPy's scalar and layout rules apply (the CuPy-style constructors) or the typed path's."""

    @property
    def binaries(self) -> Any:
        """The kernel's own binary store, or None (the binary stores are searched by content)."""

    def split_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                   accepted: str) -> tuple[Sequence[Any], Sequence[Any] | None]:  # fmt: skip
        """Inputs and the outputs given, with the kernel's own errors for a wrong count or keyword."""

    def check_stream(self, stream: object) -> None:
        """Refuse a ``stream=`` the kernel cannot launch on."""

    def specializer(self, bound: Bound, used: bool = True) -> Specialization:
        """The specialization of a bound call (memoised; ``used``: counted as a call's)."""

    def plan_tuning(self, device_id: int | None) -> Callable[[str], Any] | None:
        """The tuned knobs a plan on ``device_id`` looks its layout label up in; None: the planner's rules."""

    def result_items(self, nargs: int) -> tuple[int, tuple[int, ...]]:
        """What a call returns, as the launch code's result kind and output positions."""

    def abstract_steps(self, plan: Any, device_id: int) -> tuple[list[Any], int]:
        """The launches of a plan made for ArraySpecs, and their workspace bytes."""
