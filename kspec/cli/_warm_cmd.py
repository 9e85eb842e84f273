"""`kspec warm [PATHS] --arch sm_90 [--arch host] [-j N]`: fill the binary cache with every declared
specialization, as run time looks it up, so that ``KSPEC_COMPILE=never`` serves every declared call."""

from __future__ import annotations

import argparse
import sys

from .._errors import KspecError
from ._build_cmd import add_compile_options, check_compilers, parse_archs, sigterm_as_exit
from ._common import add_spec_paths, error, note


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "warm",
        help="compile every declared instantiation into the binary cache, as calls look it up (no GPU needed)",
        description="Compile (or find already cached) every launch variant of every declared instantiation of "
        "every spec into the binary cache (KSPEC_CACHE_DIR), for each --arch: afterwards a process with "
        "KSPEC_COMPILE=never serves every declared call from the cache. For a container image build.",
    )
    add_spec_paths(p)
    p.add_argument("--arch", action="append", required=True, metavar="ARCH",
                   help="the device's target, e.g. sm_90, or host for the CPU device; repeat it (or give "
                   "sm_80,sm_90) for several")
    add_compile_options(p)
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("-v", "--verbose", action="store_true", help="print a line per cache entry, then the summary")
    shown.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors; no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler import compile_timeout
    from ..spec import load_library

    if args.jobs is not None and args.jobs < 1:
        error(f"--jobs: expected a positive number of parallel compiles, got {args.jobs}")
        return 1
    try:
        timeout = compile_timeout(args.compile_timeout)
        archs = parse_archs(",".join(args.arch), note=None if args.quiet else note)
        library = load_library(args.paths)
        check_compilers(archs, portable_host=False)  # the cache keys name the march run time uses
    except KspecError as exc:
        error(str(exc))
        return 1
    from ..build import warm_specs

    with sigterm_as_exit():
        report = warm_specs(library.values(), archs, jobs=args.jobs, timeout=timeout, show=not args.quiet)
    if args.verbose:
        for r in report.results:
            print(f"{'FAILED' if not r.ok else 'cached' if r.cache_hit else 'compiled'} {r.what}")
        for spec, why in report.skipped:
            print(f"skipped {spec.name}: {why}")
    for r in report.failures:
        print(f"\nFAILED {r.what}:\n{r.error}", file=sys.stderr)
    if not args.quiet:
        print(report.summary())
    return (1 if report.failures else 0) | _warm_call_path(args.quiet)


def _warm_call_path(quiet: bool) -> int:
    """kspec's compiled call path for this interpreter, into the same cache (kspec/compiler/host/_extension.py):
    a deployed process then finds it, also under KSPEC_COMPILE=never. Without a host compiler or Python's
    headers calls take the Python path: a note, not a failure."""
    from ..compiler import build_call_path

    try:
        build_call_path()
    except (KspecError, OSError) as exc:
        print(f"note: kspec's compiled call path was not built ({exc}); calls will take the Python path",
              file=sys.stderr)  # fmt: skip
        return 0
    if not quiet:
        print("kspec's compiled call path: cached for this interpreter")
    return 0
