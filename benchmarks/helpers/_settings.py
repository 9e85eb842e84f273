"""What one run of benchmarks/kernels/bench.py measures: the command line's settings, passed to every part."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Settings:
    """Sizes, repetitions and the case filter of one run (``--log2n``, ``--reps``, ``--only``...)."""

    log2n: int = 28  # every bandwidth case has 2**log2n elements
    reps: int = 40  # timed calls per library and case
    warmup: int = 5  # untimed calls first
    host_calls: int = 20000  # calls per host-cost loop
    quick: bool = False
    only: list[str] | None = None  # label substrings that select cases (None: all)
    seed: int = 0

    @classmethod
    def from_options(cls, opts: argparse.Namespace) -> Settings:
        """The settings of parsed command-line options (the defaults depend on ``--quick``)."""
        if opts.log2n % 2 or not 12 <= opts.log2n <= 30:
            raise SystemExit(f"--log2n must be even and in 12..30, got {opts.log2n}")
        return cls(
            log2n=opts.log2n,
            reps=opts.reps or (5 if opts.quick else 40),
            warmup=opts.warmup if opts.warmup is not None else (2 if opts.quick else 5),
            host_calls=opts.host_calls or (2000 if opts.quick else 20000),
            quick=opts.quick,
            only=opts.only,
            seed=opts.seed,
        )

    @property
    def n(self) -> int:
        """Elements of every bandwidth case."""
        return 1 << self.log2n

    @property
    def side(self) -> int:
        """(side, side) is n elements."""
        return 1 << (self.log2n // 2)

    @property
    def copy_bytes(self) -> int:
        """The copy ceiling's buffer (at most 4 n bytes)."""
        return min(1 << 30, 4 * self.n)

    def selects(self, label: str) -> bool:
        """Whether ``--only`` keeps the case (or host-cost row) ``label``."""
        return not self.only or any(o.lower() in label.lower() for o in self.only)
