"""The progress of a build (``kspec build``, ``kspec warm`` and the hatch hook): a bar on a terminal (rich); in a log
(stderr a file or a pipe: CI, ``nohup``), a plain line every :data:`LINE_EVERY_S` seconds, so a long build is never
silent."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from ._precompile import BuildResult, BuildUnit, precompile
from ._workers import DEFAULT_COMPILE_TIMEOUT_S

LINE_EVERY_S = 10.0  # in a log: one progress line at most this often (none for a build that ends sooner)


class BuildProgress:
    """A progress bar on a terminal (rich); in a log, ``kspec: compiling 120/436 modules, 45 s`` every
    :data:`LINE_EVERY_S` seconds.

    Use as a context manager and pass :meth:`advance` as ``precompile(..., on_result=)``.
    """

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled  # False: no bar and no lines (`kspec build --quiet`)
        self._bar: Any = None
        self._task: Any = None
        self._lines = False
        self._done = 0
        self._start = self._last = time.monotonic()

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
        elif self.enabled and self.total:
            self._lines = True
        return self

    def advance(self, result: BuildResult) -> None:
        self.step(f"{result.unit.spec.name} {result.unit.arch}")

    def step(self, description: str) -> None:
        """One more done; ``description`` (kernel and arch) shown beside the bar."""
        self._done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=description)
        elif self._lines:
            now = time.monotonic()
            if now - self._last >= LINE_EVERY_S and self._done < self.total:
                self._last = now
                print(f"kspec: compiling {self._done}/{self.total} modules, {now - self._start:.0f} s (last: {description})",
                      file=sys.stderr, flush=True)

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
