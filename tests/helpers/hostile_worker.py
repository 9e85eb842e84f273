"""A compile worker that misbehaves on purpose (tests/build_tests/test_hostile_build.py points the build at it).

A task for a kernel named ``crasher`` kills the worker with SIGSEGV, as NVRTC overflowing its stack does;
one named ``sleeper`` never answers, as a runaway compile does. Every other task compiles for real.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from kspec.build import _worker

_compile_task = _worker.compile_task


def compile_task(task):  # type: ignore[no-untyped-def]
    if task["name"] == "crasher":
        os.kill(os.getpid(), signal.SIGSEGV)
    if task["name"] == "sleeper":
        time.sleep(3600)
    return _compile_task(task)


_worker.compile_task = compile_task

if __name__ == "__main__":
    sys.exit(_worker.main())
