"""Arguments and output helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import sys

DEFAULT_SPECS = "specs"


def add_spec_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        default=[DEFAULT_SPECS],
        metavar="PATH",
        help=f"spec files or directories (default: {DEFAULT_SPECS}/)",
    )


def error(message: str) -> None:
    print(f"kspec: error: {message}", file=sys.stderr)
