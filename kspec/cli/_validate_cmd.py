"""`kspec validate [PATHS]`: check spec files, one summary line per file, every error, exit 1 on any."""

from __future__ import annotations

import argparse

from .._errors import SpecError
from ..spec import SpecLibrary, find_spec_files, read_file
from ._common import add_spec_paths, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("validate", help="check spec files and report every error")
    add_spec_paths(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    paths = list(args.paths)
    files, unsearched = find_spec_files(paths)
    if not files and not unsearched:
        error(f"no spec files (*.toml, *.json) in {' '.join(paths)}")
        return 1
    library = SpecLibrary()
    n_errors = len(unsearched)
    n_kernels = 0
    for exc in unsearched:  # a broken link, an unreadable directory: reported, then the files found are checked
        print(f"error: {exc}")
    for path in files:
        report = read_file(path)
        errors = list(report.errors)
        for spec in report.specs:
            try:
                library.add(spec)  # names are unique across all files given: one namespace
            except SpecError as exc:
                errors.append(exc)
        n_kernels += len(report.specs)
        n_errors += len(errors)
        status = "ok" if not errors else f"{len(errors)} error{'s' * (len(errors) != 1)}"
        print(f"{path}: {len(report.specs)} kernel{'s' * (len(report.specs) != 1)}, {status}")
        for err in errors:
            print(f"  error: {err}")
    print(f"{len(files)} file{'s' * (len(files) != 1)}, {n_kernels} kernels, {n_errors} errors")
    return 1 if n_errors else 0
