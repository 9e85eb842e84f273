"""`kspec build [PATHS] --arch sm_80,sm_90 [-o DIR]`: compile every declared instantiation for every arch."""

from __future__ import annotations

import argparse
import sys

from .._errors import KspecError, SpecError
from ._common import add_spec_paths, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..compiler import DEFAULT_ARCHS

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
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..build import plan_build, precompile_with_progress, write_output
    from ..compiler import check_arch, default_archs
    from ..spec import load_library

    try:
        library = load_library(args.paths)
    except SpecError as exc:
        error(str(exc))
        return 1
    try:
        if args.arch:
            archs = [check_arch(a.strip(), param="--arch") for a in args.arch.split(",") if a.strip()]
        else:
            archs = default_archs()
    except KspecError as exc:
        error(str(exc))
        return 1
    plan = plan_build(library.values(), archs)
    results, wall = precompile_with_progress(plan.units, jobs=args.jobs)
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
        manifest = write_output(results, args.output)
        print(f"wrote {manifest}")
    return 1 if failures else 0


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

