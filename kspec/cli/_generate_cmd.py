"""`kspec generate [SPECS] -o OUT [--check]`: typed Python modules for spec files, one per file.

Writes only the files whose content changed (atomically); ``--check`` writes nothing and exits 1 when a
file is stale or missing, which is how CI notices a ``generated/`` that was not regenerated.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from .._version import __version__
from ..codegen import generate, sync_files
from ._common import add_spec_paths, directory_problem, error, spec_files_or_report

DEFAULT_OUT = "generated"


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("generate", help="write typed Python modules for spec files")
    add_spec_paths(p)
    p.add_argument("-o", "--out", default=DEFAULT_OUT, metavar="OUT", help=f"output directory (default: {DEFAULT_OUT}/)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale or missing")
    p.set_defaults(run=run)


def command_line(paths: list[str], out: str) -> str:
    """The command recorded in each header: the same for a run and for its ``--check``."""
    return shlex.join(["kspec", "generate", *paths, "-o", out])


def run(args: argparse.Namespace) -> int:
    files = spec_files_or_report(list(args.paths))
    if files is None:
        return 1
    out = Path(args.out)
    problem = directory_problem(out) if not args.check else None
    if problem:  # before generating; nothing is created
        error(f"output {str(out)!r} {problem}")
        return 1
    result = generate(files, command=command_line(list(args.paths), args.out), version=__version__, out_dir=out)
    if not result.ok:
        n_errors = 0
        for path, errors in result.errors:
            n_errors += len(errors)
            status = "ok" if not errors else f"{len(errors)} error{'s' * (len(errors) != 1)}"
            n = result.kernels.get(path, 0)
            print(f"{path}: {n} kernel{'s' * (n != 1)}, {status}")
            for err in errors:
                print(f"  error: {err}")
        print(f"{n_errors} error{'s' * (n_errors != 1)}: nothing generated")
        return 1
    try:
        changed = sync_files(result.files, out, check=args.check)
    except OSError as exc:  # sync_files leaves every file as it was
        error(f"output {str(out)!r}: cannot write the generated modules: {exc.strerror or exc}; nothing written")
        return 1
    if args.check:
        for target, missing in changed:
            print(f"{target}: {'missing' if missing else 'stale'}")
        if changed:
            print(f"{len(changed)} file{'s' * (len(changed) != 1)} out of date: run {command_line(list(args.paths), args.out)}")
            return 1
        print(f"{out}: up to date ({len(result.files)} files)")
        return 0
    for target, _missing in changed:
        print(f"wrote {target}")
    if not changed:
        print(f"{out}: up to date ({len(result.files)} files)")
    return 0
