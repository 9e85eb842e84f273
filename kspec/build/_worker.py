"""The compile worker of a build: ``python -m kspec.build._worker``, one NVRTC compile at a time.

Reads length-prefixed pickled tasks on stdin and answers each on the original stdout (fd 1 is pointed at
stderr, so nothing NVRTC or a library prints can corrupt the replies). Compiles on a thread with a large
stack: NVRTC recurses once per operator, and a 50k-term expression overflows a default thread stack.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import threading
from typing import IO, Any

HEADER = struct.Struct("<Q")
STACK_BYTES = 512 << 20  # address space only: pages are touched as NVRTC recurses


def read_message(stream: IO[bytes]) -> Any:
    """One message, or None at end of input."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        return None
    return pickle.loads(body)


def write_message(stream: IO[bytes], message: Any) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()


def compile_task(task: dict[str, Any]) -> tuple[str, Any]:
    """``("ok", CompiledProgram)`` or ``("error", exception)`` for one task (compile_source's arguments)."""
    from ..compiler import compile_source

    try:
        return "ok", compile_source(**task)
    except Exception as exc:  # a KspecError pickles with its details; anything else as its text
        try:
            pickle.dumps(exc)
            return "error", exc
        except Exception:
            return "error", RuntimeError(f"{type(exc).__name__}: {exc}")


def _on_big_stack(task: dict[str, Any]) -> tuple[str, Any]:
    result: list[tuple[str, Any]] = []
    threading.stack_size(STACK_BYTES)
    thread = threading.Thread(target=lambda: result.append(compile_task(task)), name="kspec-compile")
    thread.start()
    thread.join()
    return result[0]


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever is printed goes to stderr, never into the reply stream
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    while True:
        task = read_message(requests)
        if task is None:
            return 0
        write_message(replies, _on_big_stack(task))


if __name__ == "__main__":
    sys.exit(main())
