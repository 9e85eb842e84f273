"""`kspec build [PATHS] --arch sm_80,sm_90 [-o DIR]`: compile every declared instantiation for every arch."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from .._errors import KspecError, KspecValueError
from ._common import add_spec_paths, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..compiler import DEFAULT_ARCHS, DEFAULT_COMPILE_TIMEOUT_S

    p = sub.add_parser(
        "build",
        help="validate, render and compile every declared instantiation (no GPU needed)",
        description="Compile every declared instantiation of every spec for every arch. "
        f"Default archs: {','.join(DEFAULT_ARCHS)} (those the installed NVRTC supports).",
    )
    add_spec_paths(p)
    p.add_argument("--arch", default=None, help="comma-separated targets, e.g. sm_80,sm_90 (compute_XX for PTX)")
    p.add_argument("-o", "--output", default=None, metavar="DIR", help="write binaries and manifest.json here")
    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel compiles (default: CPU count)")
    p.add_argument(
        "--compile-timeout",
        type=float,
        default=DEFAULT_COMPILE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"stop a kernel's compile after this long and report it as failed (default: {DEFAULT_COMPILE_TIMEOUT_S:g}; 0: no limit)",
    )
    p.set_defaults(run=run)


def parse_archs(text: str | None) -> list[str]:
    """``--arch``: checked, each once, in the order given; the default archs when not given."""
    from ..compiler import check_arch, default_archs

    if text is None:
        return default_archs()
    archs: list[str] = []
    for item in text.split(","):
        if item.strip():
            arch = check_arch(item.strip(), param="--arch")
            if arch not in archs:  # sm_80,sm_80 builds (and lists) sm_80 once
                archs.append(arch)
    if not archs:
        raise KspecValueError(f"--arch: no architecture in {text!r}; give targets such as sm_80,sm_90")
    return archs


def run(args: argparse.Namespace) -> int:
    from ..build import check_output_dir, plan_build
    from ..spec import load_library

    if args.jobs is not None and args.jobs < 1:
        error(f"--jobs: expected a positive number of parallel compiles, got {args.jobs}")
        return 1
    if not args.compile_timeout >= 0:  # NaN too
        error(f"--compile-timeout: expected seconds >= 0 (0: no limit), got {args.compile_timeout}")
        return 1
    try:
        library = load_library(args.paths)  # no spec files at all is an error, as for validate
        archs = parse_archs(args.arch)
        plan = plan_build(library.values(), archs)
        if args.output:  # every -o problem before the first compile, not after the last
            check_output_dir(args.output, plan.units)
    except KspecError as exc:
        error(str(exc))
        return 1
    with _sigterm_as_exit():
        return _build(args, plan, archs)


def _build(args: argparse.Namespace, plan: Any, archs: list[str]) -> int:
    from ..build import precompile_with_progress, write_output

    results, wall = precompile_with_progress(plan.units, jobs=args.jobs, timeout=args.compile_timeout)
    _print_table(results)
    for spec, why in plan.skipped:
        print(f"skipped {spec.name}: {why}")
    failures = [r for r in results if not r.ok]
    for r in failures:
        print(f"\nFAILED {r.what}:\n{r.error}", file=sys.stderr)
    hits = sum(r.cache_hit for r in results)
    print(
        f"{len(results) - len(failures)}/{len(results)} modules built for {','.join(archs)} "
        f"in {wall:.2f} s ({hits} from the cache), {len(failures)} failed"
    )
    if args.output:
        try:
            manifest = write_output(results, args.output)
        except KspecError as exc:  # the directory changed while compiling
            error(str(exc))
            return 1
        print(f"wrote {manifest}")
    return 1 if failures else 0


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM ends the build as an exception would: temporary files are removed, workers stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _print_table(results: list) -> None:  # type: ignore[type-arg]
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kspec build", show_lines=False)
    for col, justify in (("kernel", "left"), ("types", "left"), ("arch", "left"), ("regs", "right"),
                         ("compile ms", "right"), ("cache", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in sorted(results, key=lambda r: (r.unit.spec.name, r.unit.label, r.unit.arch)):
        regs = r.max_registers
        table.add_row(
            r.unit.spec.name,
            r.unit.label,
            r.unit.arch,
            "-" if regs is None else str(regs),
            "FAILED" if not r.ok else f"{r.program.compile_ms:.0f}" if not r.cache_hit else "-",
            "hit" if r.cache_hit else "",
        )
    Console(width=120).print(table)

