"""`kspec tune SPECS`: time the configs of tuned raw specs, and the planner's knobs for elementwise and reduction
specs with ``tune.cases``, on this GPU and write their tuning records."""

from __future__ import annotations

import argparse

from .._errors import KspecError
from ._common import add_spec_paths, error, spec_files_or_report


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("tune", help="time tuned raw kernels' configs and elementwise/reduction kernels' planner knobs (tune.cases) on "
                       "this GPU; write <spec>.tune.json records")
    add_spec_paths(p)
    p.add_argument("--arch", help="the GPU's arch, e.g. sm_90 (checked against this GPU: a record is per arch)")
    p.add_argument("--shapes", nargs="+", metavar="K=V[,K=V]", help="key values to tune for (default: each spec's shapes)")
    p.add_argument("--budget", type=float, default=300.0, metavar="SECONDS", help="time for the whole run (default 300)")
    p.add_argument("--force", action="store_true", help="re-tune kernels whose record entry is up to date")
    p.add_argument("--reps", type=int, default=15, help="timed launches per config and shape (default 15)")
    p.set_defaults(run=run)


def parse_shapes(texts: list[str] | None) -> list[dict[str, int]] | None:
    if not texts:
        return None
    shapes = []
    for text in texts:
        shape: dict[str, int] = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip().isidentifier() or not value.strip().isdigit():
                raise ValueError(f"--shapes: expected K=V[,K=V] with positive ints, got {text!r}")
            shape[name.strip()] = int(value)
        shapes.append(shape)
    return shapes


def run(args: argparse.Namespace) -> int:
    files = spec_files_or_report(args.paths)
    if files is None:
        return 1
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as exc:
        error(str(exc))
        return 2
    if args.budget <= 0 or args.reps < 3:
        error("--budget must be > 0 seconds and --reps at least 3")
        return 2
    try:
        from ..tune import TuneOptions, tune_files  # on call: it needs the GPU (the runtime)

        report = tune_files(files, TuneOptions(shapes=shapes, budget=args.budget, force=args.force, reps=args.reps,
                                               arch=args.arch))  # fmt: skip
    except (KspecError, ValueError) as exc:
        error(str(exc))
        return 1
    for name, what in report.kernels.items():
        print(f"{name}: {what}")
    for path in report.written:
        print(f"wrote {path}")
    print(f"kspec tune: {len(report.kernels)} kernel(s) in {report.seconds:.1f} s")
    return 0 if all(v != "incomplete" for v in report.kernels.values()) else 3
