"""The ``kspec`` command line. Each subcommand lives in its own module with ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _cache_cmd, _build_cmd, _generate_cmd, _show_cmd, _validate_cmd

# Order here is the order of `kspec --help`. A new subcommand is one module and one entry.
_COMMANDS = (_validate_cmd, _show_cmd, _generate_cmd, _build_cmd, _cache_cmd)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kspec", description="CUDA kernels declared as data.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kspec`` and ``python -m kspec``; returns the exit status."""
    args = make_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
