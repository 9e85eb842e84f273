"""Worker processes for a build's compiles, so that one kernel cannot take the build down.

NVRTC runs in-process C++: a kernel that crashes it (a stack overflow on a huge expression) would kill the
build and lose every other kernel, and one that never finishes would hang it, since a thread cannot be
stopped. Each compile therefore runs in a worker process (``kspec.build._worker``, reused across compiles);
a worker that dies or runs past the time limit is killed and replaced, and that kernel alone fails with
a :class:`kspec.CompileError` (:class:`kspec.CompileTimeoutError`) saying so.

Windows has no ``select`` on pipes: there the compiles run in threads with a large stack and no time limit.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .._errors import CompileError, CompileTimeoutError, about_kernel
from ..compiler import DEFAULT_COMPILE_TIMEOUT_S
from ._worker import read_message, write_message

WORKER_MODULE = "kspec.build._worker"  # tests point this at a worker that crashes or hangs on purpose
ISOLATED = os.name == "posix"


class _Gone(Exception):
    """The worker ended without a reply (crashed, or was killed)."""


class _Worker:
    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where `import kspec` finds this kspec
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        self.stderr = tempfile.TemporaryFile()
        self._killing = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**os.environ, "PYTHONPATH": path},
        )

    def ask(self, task: dict[str, Any], timeout: float | None) -> tuple[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            write_message(self.process.stdin, task)
        except OSError:
            raise _Gone from None
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        # wait for the first byte of the reply with the time limit; the rest follows at once
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                break
        reply: tuple[str, Any] | None = read_message(self.process.stdout)
        if reply is None:
            raise _Gone
        return reply

    def kill(self) -> str:
        """Stop the worker; what ended it, for the message (its signal, exit status and stderr's end). Twice is
        harmless: a pool closing on an interrupt and the build thread that saw the worker end both call it."""
        with self._killing:
            if self.process.poll() is None:
                self.process.kill()
            code = self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
            tail = ""
            if not self.stderr.closed:
                self.stderr.seek(0)
                tail = self.stderr.read()[-2000:].decode("utf-8", "replace").strip()
                self.stderr.close()
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit status {code}"
        return how + (f"; its stderr ended with:\n{tail}" if tail else "")

    def close(self) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.close()  # end of input: the worker exits
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class CompilePool:
    """Up to ``size`` worker processes; :meth:`compile` is called from the build's threads."""

    def __init__(self, size: int, timeout: float | None = DEFAULT_COMPILE_TIMEOUT_S) -> None:
        self.size = max(1, size)
        self.timeout = timeout if timeout and timeout > 0 else None
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()

    def compile(self, *, name: str, **task: Any) -> Any:
        """``compile_source(name=name, **task)`` in a worker: the CompiledProgram, or raises its error."""
        worker = self._take()
        try:
            status, value = worker.ask({"name": name, **task}, self.timeout)
        except TimeoutError:
            self._drop(worker)
            raise CompileTimeoutError(
                about_kernel(
                    name,
                    f"compiling it took more than {self.timeout:g} s and was stopped; the other kernels of the "
                    "build are not affected (kspec build --compile-timeout SECONDS, KSPEC_COMPILE_TIMEOUT or the "
                    "build hook's compile-timeout raise the limit; 0 means none)",
                ),
                kernel=name,
            ) from None
        except _Gone:
            how = self._drop(worker)
            raise CompileError(
                about_kernel(
                    name,
                    f"the NVRTC compile crashed ({how}); the other kernels of the build are not "
                    "affected. A very large expression can exhaust NVRTC's stack: split the kernel.",
                ),
                kernel=name,
            ) from None
        self._idle.put(worker)
        if status == "ok":
            return value
        raise value

    def _take(self) -> _Worker:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        worker = _Worker()  # one per concurrent caller at most: the build runs `size` threads
        with self._lock:
            self._all.append(worker)
        return worker

    def _drop(self, worker: _Worker) -> str:
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        return worker.kill()

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.close()

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CompilePool", "DEFAULT_COMPILE_TIMEOUT_S", "ISOLATED", "WORKER_MODULE"]
