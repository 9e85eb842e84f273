"""`kspec show NAME`: print one kernel's spec as TOML (or JSON)."""

from __future__ import annotations

import argparse

from .._errors import SpecError
from ..spec import dumps_json, dumps_toml, load_library
from ._common import DEFAULT_SPECS, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("show", help="print a kernel's spec as TOML")
    p.add_argument("name", help="kernel name")
    p.add_argument(
        "--specs", nargs="+", default=[DEFAULT_SPECS], metavar="PATH", help=f"where to look (default: {DEFAULT_SPECS}/)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        library = load_library(args.specs)
    except SpecError as exc:
        error(str(exc))
        return 1
    if args.name not in library:
        known = ", ".join(sorted(library)) or "none"
        error(f"no kernel named {args.name!r} in {' '.join(args.specs)} (kernels: {known})")
        return 1
    spec = library[args.name]
    print((dumps_json if args.json else dumps_toml)([spec]), end="")
    return 0
