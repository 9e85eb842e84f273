"""`kspec capture -o DIR [--prune] [--records DIR] -- COMMAND...`: run a program and write the kernels it built as
spec files (kspec/capturer).

COMMAND runs with kspec under CuPy (``python -m kspec.cupy``'s start-up hook, in every Python process it starts),
call records off (every specialization is planned, so every one is seen) and a recorder in each process; then the
records are merged into DIR. The exit status is COMMAND's (a test run with failures still writes what it built).
``--records DIR`` merges records written earlier (by ``KSPEC_CAPTURE_DIR=DIR``) and runs nothing; ``--merge DIR...``
merges other captures' spec files (the shards of a test run captured on several machines) and runs nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .._errors import KspecError
from ._common import error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("capture", help="run a program and write the kernels it builds as spec files")
    p.add_argument("-o", "--output", required=True, help="directory of the captured spec files (merged into)")
    p.add_argument("--prune", action="store_true", help="drop captured kernels this run did not build")
    p.add_argument("--records", metavar="DIR", help="merge the records in DIR (written by KSPEC_CAPTURE_DIR) instead of running")
    p.add_argument("--merge", metavar="DIR", nargs="+", help="merge the captured spec files of these directories "
                   "(other captures' outputs) instead of running")
    p.add_argument("--no-cupy", action="store_true", help="do not put kspec under CuPy (record kspec's own constructors only)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program to run, after --")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..capturer import recording_environment, write_captured
    from ..cupy import launch_environment

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if args.merge is not None:
        if command or args.records is not None or args.prune:
            error("--merge runs nothing and prunes nothing: give it alone with -o")
            return 2
        from ..capturer import merge_captured

        try:
            report = merge_captured(args.merge, args.output)
        except KspecError as exc:
            error(str(exc))
            return 2
        print(f"kspec capture: {report.summary()}")
        return 0
    if args.records is not None:
        if command:
            error("give a command or --records, not both")
            return 2
        if not Path(args.records).is_dir():
            error(f"--records: {args.records!r} is not a directory")
            return 2
        report = write_captured(args.records, args.output, prune=args.prune)
        print(f"kspec capture: {report.summary()}")
        return 0
    if not command:
        error("no command to run: kspec capture -o DIR -- python script.py (or -- python -m pytest ...)")
        return 2
    with tempfile.TemporaryDirectory(prefix="kspec-capture-") as records:
        env = {**os.environ, **recording_environment(records)}
        launch_environment(env, swap=not args.no_cupy)  # the start-up hook starts the recorder in every process
        try:
            status = subprocess.call(command, env=env)
        except OSError as exc:
            error(f"cannot run {command[0]!r}: {exc}")
            return 127
        report = write_captured(records, args.output, prune=args.prune)
    print(f"kspec capture: {report.summary()}", file=sys.stderr if status else sys.stdout)
    return status
