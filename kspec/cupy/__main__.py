"""``python -m kspec.cupy [-m MODULE | SCRIPT] [ARGS...]``: run a program, or a module such as pytest, with CuPy's
kernel constructors, ``cupy.fuse`` and ``cupyx.jit`` served by kspec (see :mod:`kspec.cupy`), in it and in every
Python process it starts."""

from __future__ import annotations

import os
import runpy
import sys

from ._hook import install, launch_environment

_USAGE = "usage: python -m kspec.cupy [-m MODULE | SCRIPT] [ARGS...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(_USAGE + "\n\n" + (__doc__ or "").strip(), file=sys.stderr if not argv else sys.stdout)
        raise SystemExit(0 if argv else 2)
    launch_environment(os.environ)
    install()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
