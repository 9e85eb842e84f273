"""`kspec cache info|clear`: the on-disk binary cache."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ..compiler import BinaryCache, default_cache
from ._common import directory_problem, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "cache",
        help="show or clear the compiled-binary cache",
        description="The binary cache lives in KSPEC_CACHE_DIR, else the platform's user cache directory.",
    )
    actions = p.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    for action, run, help_text in (
        ("info", _info, "print the cache directory, its entries, their size against the cap, hits and misses"),
        ("clear", _clear, "remove every entry kspec wrote (other files stay) and print how many were removed"),
    ):
        a = actions.add_parser(action, help=help_text, description=help_text)
        a.add_argument("--dir", metavar="DIR", help="cache directory to use instead of KSPEC_CACHE_DIR / the default")
        a.set_defaults(run=run)


def _cache(args: argparse.Namespace) -> BinaryCache:
    return BinaryCache(args.dir) if args.dir else default_cache()


def _named_by(args: argparse.Namespace) -> str:
    if args.dir:
        return "--dir"
    return "KSPEC_CACHE_DIR" if os.environ.get("KSPEC_CACHE_DIR") else "the default cache directory"


def _directory_problem(directory: Path | None, named_by: str) -> str | None:
    """Why ``directory`` cannot be a binary cache (one line), or None. A regular file, ``/dev/null`` or a
    path under ``/proc`` would otherwise read as an empty cache. A directory that does not exist yet is
    fine when it could be created (the first compile does)."""
    if directory is None:
        return None
    problem = directory_problem(directory)
    return None if problem is None else f"cache directory {str(directory)!r} ({named_by}) {problem}"


def _info(args: argparse.Namespace) -> int:
    cache = _cache(args)
    problem = _directory_problem(cache.directory, _named_by(args))
    if problem:
        error(problem)
        return 1
    info = cache.info()
    cap = "no cap" if info.max_bytes is None else f"cap {_human(info.max_bytes)}"
    lookups = info.hits + info.misses
    rate = f", {100 * info.hits / lookups:.0f}% hits" if lookups else ""
    since = time.strftime(" since %Y-%m-%d %H:%M", time.localtime(info.since)) if info.since else ""
    print(f"directory: {info.directory}")
    print(f"entries:   {info.entries}")
    print(f"size:      {_human(info.total_bytes)} ({info.total_bytes} bytes), {cap} (KSPEC_CACHE_MAX_BYTES)")
    print(f"hits:      {info.hits}")
    print(f"misses:    {info.misses} ({lookups} lookups{rate}{since})")
    print(f"evicted:   {info.evictions} {'entry' if info.evictions == 1 else 'entries'} (least recently used, over the cap)")
    return 0


def _clear(args: argparse.Namespace) -> int:
    cache = _cache(args)
    directory = cache.directory
    problem = _directory_problem(directory, _named_by(args))
    if problem:  # clear could remove nothing there, and would say "removed 0 entries"
        error(problem)
        return 1
    report = cache.clear_report()
    removed = report.removed
    print(f"removed {removed} {'entry' if removed == 1 else 'entries'} from {directory}")
    # Only files named <key>.kbin that start with kspec's magic are entries: other files stay untouched.
    for path, why in report.failed:
        error(f"could not remove {path}: {why}")
    return 1 if report.failed else 0


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
