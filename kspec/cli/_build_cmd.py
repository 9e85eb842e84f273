"""`kspec build [PATHS] --arch sm_80,sm_90 [-o DIR]`: compile every declared instantiation for every arch."""

from __future__ import annotations

import argparse
import os
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .._errors import KspecError, KspecValueError
from ._common import add_spec_paths, error, note


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..compiler import DEFAULT_ARCHS

    p = sub.add_parser(
        "build",
        help="validate, render and compile every declared instantiation (no GPU needed)",
        description="Compile every declared instantiation of every spec for every arch. "
        f"Default archs: {','.join(DEFAULT_ARCHS)} (those the installed NVRTC supports).",
    )
    add_spec_paths(p)
    p.add_argument("--arch", default=None, help="comma-separated targets, e.g. sm_80,sm_90 (compute_XX for PTX; host for the CPU device)")
    p.add_argument("-o", "--output", default=None, metavar="DIR", help="write binaries and manifest.json here")
    add_compile_options(p)
    # What goes to stdout: one of these (default: a one-line summary). Failures go to stderr in every mode.
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("-v", "--verbose", action="store_true", help="print the full table: a row per module, then the summary")
    shown.add_argument("--json", action="store_true", help="print one JSON object describing every module (for scripts)")
    shown.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors; no progress bar")
    p.set_defaults(run=run)


def parse_archs(text: str | None, *, note: Callable[[str], None] | None = None) -> list[str]:
    """``--arch``: checked, each once, in the order given; the default archs when not given. ``note`` is told
    of a target named more than once (it is compiled once)."""
    from ..compiler import check_arch, default_archs

    if text is None:
        defaults: list[str] = default_archs()  # a lazy export: untyped to mypy
        return defaults
    archs: list[str] = []
    repeated: list[str] = []
    for item in text.split(","):
        if item.strip():
            arch = check_arch(item.strip(), param="--arch")
            if arch not in archs:  # sm_80,sm_80 builds (and lists) sm_80 once
                archs.append(arch)
            elif arch not in repeated:
                repeated.append(arch)
    if not archs:
        raise KspecValueError(f"--arch: no architecture in {text!r}; give targets such as sm_80,sm_90")
    if repeated and note is not None:
        note(f"--arch names {', '.join(repeated)} more than once; each target is compiled once")
    return archs


def add_compile_options(p: argparse.ArgumentParser) -> None:
    """``-j`` and ``--compile-timeout``, as ``kspec build`` and ``kspec warm`` take them."""
    from ..compiler import COMPILE_TIMEOUT_ENV, DEFAULT_COMPILE_TIMEOUT_S

    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel compiles (default: CPU count)")
    p.add_argument(
        "--compile-timeout",
        default=None,
        metavar="SECONDS",
        help=f"stop a kernel's compile after this long and report it as failed, the other kernels going on "
        f"(default: {COMPILE_TIMEOUT_ENV}, else {DEFAULT_COMPILE_TIMEOUT_S:g}; 0: no limit)",
    )


def run(args: argparse.Namespace) -> int:
    from ..build import check_output_dir, plan_build
    from ..compiler import compile_timeout
    from ..spec import load_library

    if args.jobs is not None and args.jobs < 1:
        error(f"--jobs: expected a positive number of parallel compiles, got {args.jobs}")
        return 1
    try:
        args.compile_timeout = compile_timeout(args.compile_timeout)
        library = load_library(args.paths)  # no spec files at all is an error, as for validate
        archs = parse_archs(args.arch, note=None if args.quiet else note)
        plan = plan_build(library.values(), archs)
        if plan.units:
            check_compilers(archs)
        if args.output:  # every -o problem before the first compile, not after the last
            check_output_dir(args.output, plan.units)
    except KspecError as exc:
        error(str(exc))
        return 1
    with sigterm_as_exit():
        return _build(args, plan, archs)


def check_compilers(archs: list[str], *, portable_host: bool = True) -> None:
    """NvrtcNotFoundError (or HostCompilerNotFoundError for ``--arch host``) before the first compile:
    without it every module would fail with the same error (once per module) and ``-o`` would get an empty
    manifest. Said once, nothing written. ``portable_host``: host modules built to ship (no -march=native);
    ``kspec warm`` keeps the march run time uses, which its cache keys name."""
    from ..compiler import HOST_ARCH, HOST_MARCH_ENV, host_compiler, nvrtc_version, portable_host_march

    if any(arch != HOST_ARCH for arch in archs):
        nvrtc_version()  # loads NVRTC; the cache key of every module needs its version anyway
    if HOST_ARCH in archs:
        host_compiler()
        if portable_host:  # prebuilt host modules must run on other machines than this one: no -march=native
            os.environ.setdefault(HOST_MARCH_ENV, portable_host_march())


def _build(args: argparse.Namespace, plan: Any, archs: list[str]) -> int:
    from ..build import precompile_with_progress, write_output
    from ._build_report import json_report, print_table, summary_line

    results, wall = precompile_with_progress(plan.units, jobs=args.jobs, timeout=args.compile_timeout, show=not args.quiet)
    failures = [r for r in results if not r.ok]
    human = not (args.json or args.quiet)
    if args.verbose:
        print_table(results)
        for spec, why in plan.skipped:
            print(f"skipped {spec.name}: {why}")
    for r in failures:
        print(f"\nFAILED {r.what}:\n{r.error}", file=sys.stderr)
    manifest: str | None = None
    write_error: str | None = None
    if args.output:
        try:
            manifest = str(write_output(results, args.output))
        except KspecError as exc:  # the directory changed while compiling
            write_error = str(exc)
            error(write_error)
    if human:  # one line, whatever the number of modules: the table is --verbose's
        print(summary_line(results, archs, wall, len(plan.skipped)) + (f"; wrote {manifest}" if manifest else ""))
    if args.json:
        print(json_report(results, archs=archs, wall=wall, skipped=plan.skipped, manifest=manifest, error=write_error))
    return 1 if failures or write_error else 0


@contextlib.contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """SIGTERM ends the build as an exception would: temporary files are removed, workers stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
