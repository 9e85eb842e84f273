"""`kspec cache info|clear`: the on-disk binary cache (one directory, or several: KSPEC_CACHE_DIR=a:b)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from .._memo import split_dirs
from ..compiler import NOT_AN_ENTRY, BinaryCache, default_cache
from ._common import directory_problem, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "cache",
        help="show or clear the compiled-binary cache",
        description="The binary cache lives in KSPEC_CACHE_DIR (several directories separated by "
        f"{os.pathsep!r}: looked up in order, the first writable one written), else the platform's user cache directory.",
    )
    actions = p.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    for action, run, help_text in (
        ("info", _info, "print the cache directory, its entries, their size against the cap, hits and misses"),
        ("clear", _clear, "remove every entry kspec wrote (other files stay), print how many were removed and name "
         "each file it could not remove, with the reason (exit status 1)"),
    ):
        a = actions.add_parser(action, help=help_text, description=help_text)
        a.add_argument("--dir", metavar="DIR", help="cache directory (or directories separated by "
                       f"{os.pathsep!r}) to use instead of KSPEC_CACHE_DIR / the default")
        if action == "info":
            a.add_argument("--by-kernel", action="store_true", help="group the entries and their hits by kernel")
            a.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        a.set_defaults(run=run)


def _cache(args: argparse.Namespace) -> BinaryCache:
    return BinaryCache(split_dirs(args.dir)) if args.dir else default_cache()


def _problem(cache: BinaryCache, named_by: str) -> str | None:
    """Why the cache's directories cannot be used (one line), or None. One directory must be one kspec can
    write or create; of several, a read-only or missing one is fine (it serves hits, or nothing), but a
    path that exists and is not a directory is a mistake that would read as an empty cache."""
    if len(cache.directories) <= 1:
        return _directory_problem(cache.directory, named_by)
    for directory in cache.directories:
        if os.path.exists(directory) and not os.path.isdir(directory):
            return f"cache directory {str(directory)!r} ({named_by}) is not a directory"
    return None


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
    problem = _problem(cache, _named_by(args))
    if problem:
        error(problem)
        return 1
    info = cache.info()
    kernels = _by_kernel(cache) if args.by_kernel else None
    if args.json:
        report: dict[str, Any] = {
            "directory": str(info.directory) if info.directory else None,
            "directories": [{"path": str(d.path), "entries": d.entries, "total_bytes": d.total_bytes,
                             "writable": d.writable, "written": d.written} for d in info.directories],
            "entries": info.entries, "total_bytes": info.total_bytes, "max_bytes": info.max_bytes,
            "hits": info.hits, "misses": info.misses, "evictions": info.evictions, "since": info.since or None,
        }  # fmt: skip
        if kernels is not None:
            report["kernels"] = kernels
        print(json.dumps(report, indent=2))
        return 0
    cap = "no cap" if info.max_bytes is None else f"cap {_human(info.max_bytes)}"
    lookups = info.hits + info.misses
    rate = f", {100 * info.hits / lookups:.0f}% hits" if lookups else ""
    since = time.strftime(" since %Y-%m-%d %H:%M", time.localtime(info.since)) if info.since else ""
    if len(info.directories) > 1:
        print(f"directories ({_named_by(args)}, looked up in order):")
        for d in info.directories:
            state = "written" if d.written else "writable" if d.writable else "read-only"
            state += "" if d.path.is_dir() else ", does not exist"
            print(f"  {d.path}  [{state}]  {d.entries} {'entry' if d.entries == 1 else 'entries'}, {_human(d.total_bytes)}")
        written = any(d.written for d in info.directories)
        print(f"written:   {info.directory if written else 'none (every directory is read-only: entries stay in memory)'}")
    else:
        print(f"directory: {info.directory}")
    print(f"entries:   {info.entries}")
    print(f"size:      {_human(info.total_bytes)} ({info.total_bytes} bytes), {cap} (KSPEC_CACHE_MAX_BYTES)")
    print(f"hits:      {info.hits}")
    print(f"misses:    {info.misses} ({lookups} lookups{rate}{since})")
    print(f"evicted:   {info.evictions} {'entry' if info.evictions == 1 else 'entries'} (least recently used, over the cap)")
    if kernels is not None:
        _print_kernels(kernels)
    return 0


def _by_kernel(cache: BinaryCache) -> list[dict[str, Any]]:
    """The entries grouped by kernel name, most hits first: entries, bytes, hits, archs, keys."""
    groups: dict[str, dict[str, Any]] = {}
    for entry in cache.entries():
        group = groups.setdefault(entry.kernel, {"kernel": entry.kernel, "entries": 0, "total_bytes": 0, "hits": 0,
                                                 "archs": [], "keys": []})  # fmt: skip
        group["entries"] += 1
        group["total_bytes"] += entry.size
        group["hits"] += entry.hits
        group["keys"].append(entry.key)
        if entry.arch not in group["archs"]:
            group["archs"].append(entry.arch)
    for group in groups.values():
        group["archs"].sort()
    return sorted(groups.values(), key=lambda g: (-g["hits"], g["kernel"]))


def _print_kernels(kernels: list[dict[str, Any]]) -> None:
    rows = [(k["kernel"] or "(unnamed)", str(k["entries"]), _human(k["total_bytes"]), str(k["hits"]),
             " ".join(k["archs"])) for k in kernels]  # fmt: skip
    header = ("kernel", "entries", "size", "hits", "archs")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) if i in (0, 4) else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    if not rows:
        print("(no entries)")


def _clear(args: argparse.Namespace) -> int:
    cache = _cache(args)
    directory = cache.directory
    problem = _problem(cache, _named_by(args))
    if problem:  # clear could remove nothing there, and would say "removed 0 entries"
        error(f"{problem}; nothing was removed")
        return 1
    report = cache.clear_report()
    removed = report.removed
    cleared = [d for d in cache.directories if d not in report.skipped]
    for skipped in report.skipped:
        print(f"skipped {skipped} (read-only)")
    if not cleared:
        error(f"no directory of the cache ({_named_by(args)}) can be written: nothing was removed")
        return 1
    where = directory if len(cache.directories) == 1 else ", ".join(map(str, cleared))
    print(f"removed {removed} {'entry' if removed == 1 else 'entries'} from {where}")
    # One line per path left behind, with the OS's reason or what the file is; any of them fails the command,
    # so a script that clears before a clean rebuild does not go on with stale entries in place.
    failed = [(path, why) for path, why in report.failed if why != NOT_AN_ENTRY]
    for path, why in report.failed:
        if why == NOT_AN_ENTRY:  # a user's file in a shared directory, or a damaged entry: said, not a failure
            print(f"left {path}: {why}")
    for path, why in failed:
        error(f"could not remove {path}: {why}")
    return 1 if failed else 0


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
