"""What ``kspec build`` prints: a one-line summary, the full table (``--verbose``) or JSON (``--json``).

Kept apart from the command so the formats are plain functions of the results (tested without compiling).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..build import BuildResult
from ..spec import AnySpec

JSON_FORMAT_VERSION = 1  # bump when a key of `kspec build --json` changes meaning or goes away


def summary_line(results: Sequence[BuildResult], archs: Sequence[str], wall: float, skipped: int) -> str:
    """``38/38 modules built for sm_80 in 10.35 s (0 from the cache), 0 failed, 4.1 MB (108 KB a module)``; skipped
    kernels counted."""
    failed = sum(not r.ok for r in results)
    hits = sum(r.cache_hit for r in results)
    linked = sum(r.linked for r in results)
    sizes = [len(r.program.binary) for r in results if r.ok and r.program is not None]
    line = (
        f"{len(results) - failed}/{len(results)} modules built for {','.join(archs)} "
        f"in {wall:.2f} s ({hits} from the cache{f', {linked} linked from one PTX a module' if linked else ''}), "
        f"{failed} failed"
    )
    if sizes:
        line += f", {_size(sum(sizes))} ({_size(sum(sizes) // len(sizes))} a module)"
    if skipped:
        line += f", {skipped} {'kernel' if skipped == 1 else 'kernels'} left to a first-call compile"
    return line


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def print_table(results: Sequence[BuildResult], file: TextIO | None = None) -> None:
    """The full table, one row per module, as wide as the terminal (rich measures it).

    Output that is not a terminal (a log, a pipe) gets the table's natural width rather than rich's
    default of 80 columns, which would fold kernel names; ``COLUMNS`` still wins when set.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kspec build", show_lines=False)
    for col, justify in (("kernel", "left"), ("types", "left"), ("arch", "left"), ("regs", "right"),
                         ("compile ms", "right"), ("cache", "left")):  # fmt: skip
        # a narrow terminal wraps names rather than cutting them ("sum_and_mul…" names no kernel); the short
        # columns keep their width
        wraps = col in ("kernel", "types")
        table.add_column(col, justify=justify, overflow="fold" if wraps else "ellipsis", no_wrap=not wraps)  # type: ignore[arg-type]
    for r in sorted(results, key=lambda r: (r.unit.spec.name, r.unit.label, r.unit.arch)):
        regs = r.max_registers
        table.add_row(
            r.unit.spec.name,
            r.unit.label,
            r.unit.arch,
            "-" if regs is None else str(regs),
            "FAILED" if not r.ok else f"{r.program.compile_ms:.0f}" if r.program and not r.cache_hit else "-",
            "hit" if r.cache_hit else "",
        )
    out = file if file is not None else sys.stdout
    console = Console(file=out)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(file=out, width=max(80, console.measure(table, options=console.options.update(width=10_000)).maximum))
    console.print(table)


def json_report(
    results: Sequence[BuildResult],
    *,
    archs: Sequence[str],
    wall: float,
    skipped: Sequence[tuple[AnySpec, str]],
    manifest: str | None,
    error: str | None = None,
) -> str:
    """The machine-readable report of ``kspec build --json`` (one JSON object; keys are stable)."""
    failed = sum(not r.ok for r in results)
    doc: dict[str, Any] = {
        "kspec_build_report": JSON_FORMAT_VERSION,
        "ok": failed == 0 and error is None,
        "archs": list(archs),
        "wall_s": round(wall, 3),
        "modules_total": len(results),
        "modules_built": len(results) - failed,
        "modules_failed": failed,
        "cache_hits": sum(r.cache_hit for r in results),
        "modules_linked": sum(r.linked for r in results),
        "manifest": manifest,
        "error": error,
        "modules": [_module(r) for r in sorted(results, key=lambda r: (r.unit.spec.name, r.unit.label, r.unit.arch))],
        "skipped": [{"kernel": spec.name, "reason": why} for spec, why in skipped],
    }
    return json.dumps(doc, indent=1, sort_keys=False)


def _module(r: BuildResult) -> dict[str, Any]:
    return {
        "kernel": r.unit.spec.name,
        "instantiation": dict(r.unit.types),
        "scalars": sorted(r.unit.scalars),
        "arch": r.unit.arch,
        "ok": r.ok,
        "cache_hit": r.cache_hit,
        "linked": r.linked,
        "compile_ms": None if r.program is None or r.cache_hit else round(r.program.compile_ms, 1),
        "registers": r.max_registers,
        "key": r.key or None,
        "error": None if r.error is None else str(r.error),
    }
