"""The progress bar of a build (``kspec build``, ``kspec warm`` and the hatch hook): rich on a terminal, silent otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from ._precompile import BuildResult, BuildUnit, precompile
from ._workers import DEFAULT_COMPILE_TIMEOUT_S


class BuildProgress:
    """A progress bar on a terminal (rich); nothing when stderr is a file or a pipe (CI logs stay clean).

    Use as a context manager and pass :meth:`advance` as ``precompile(..., on_result=)``.
    """

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled  # False: no bar even on a terminal (`kspec build --quiet`)
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> "BuildProgress":
        if self.enabled and sys.stderr.isatty() and self.total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.description}"), console=Console(stderr=True), transient=True,
            )  # fmt: skip
            self._bar.start()
            self._task = self._bar.add_task("", total=self.total)
        return self

    def advance(self, result: BuildResult) -> None:
        self.step(f"{result.unit.spec.name} {result.unit.arch}")

    def step(self, description: str) -> None:
        """One more done; ``description`` (kernel and arch) shown beside the bar."""
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=description)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def precompile_with_progress(
    units: Sequence[BuildUnit],
    *,
    jobs: int | None = None,
    timeout: float | None = DEFAULT_COMPILE_TIMEOUT_S,
    show: bool = True,
) -> tuple[list[BuildResult], float]:
    """:func:`precompile` behind a progress bar (``show=False``: none); the results and the wall time in seconds."""
    start = time.perf_counter()
    with BuildProgress(len(units), enabled=show) as progress:
        results = precompile(units, jobs=jobs, on_result=progress.advance, timeout=timeout)
    return results, time.perf_counter() - start
