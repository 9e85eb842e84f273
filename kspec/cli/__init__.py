"""The ``kspec`` command line. Each subcommand lives in its own module with ``add_parser(subparsers)``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _cache_cmd, _build_cmd, _capture_cmd, _generate_cmd, _show_cmd, _tune_cmd, _validate_cmd, _warm_cmd

# Order here is the order of `kspec --help`. A new subcommand is one module and one entry.
_COMMANDS = (_validate_cmd, _show_cmd, _generate_cmd, _build_cmd, _warm_cmd, _tune_cmd, _capture_cmd, _cache_cmd)


def make_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(prog="kspec", description="CUDA kernels declared as data.")
    parser.add_argument("--version", action="version", version=f"kspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kspec`` and ``python -m kspec``; returns the exit status."""
    args = make_parser().parse_args(argv)
    try:
        status = int(args.run(args) or 0)
        sys.stdout.flush()
    except BrokenPipeError:
        # `kspec build ... | head`: the reader left. Exit quietly, as Unix tools do; point stdout at devnull so
        # the interpreter's own flush at exit does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the signal
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
