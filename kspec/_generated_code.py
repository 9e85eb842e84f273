"""The call path's generated code, compiled once: kept per process, and on disk across processes.

The kernels layer's dispatchers and launches (kspec/kernels/callpath/_signature.py, _launch_code.py) and the runtime's
raw-kernel packers (kspec/runtime/_packer.py) are Python source generated per call structure. Compiling one
costs 0.1-1 ms, much of what a kernel served from a binary adds to its first call. So compiled code is kept in
memory by source, and marshalled under ``memo_dir()/callpath/`` (named by the digest of the interpreter's
version and the source), where a new process loads it in tens of microseconds instead. A leaf: both layers use
it, and the runtime may not import the kernels layer. A file that cannot be read, loaded or written is ignored and the code is compiled;
files are written whole (temporary file, then rename), as the interpreter's own ``.pyc`` files are.
"""

from __future__ import annotations

import marshal
import sys
from types import CodeType

from ._digest import sha256_hex
from ._memo import memo_dir

# marshal's format and the bytecode belong to one interpreter build
_INTERPRETER = f"{sys.implementation.cache_tag} {sys.version}\n"
_code: dict[str, CodeType] = {}


def compiled(source: str, what: str) -> CodeType:
    """The code object of ``source`` (a module body); ``what`` names it in tracebacks."""
    code = _code.get(source)
    if code is None:
        if len(_code) > 1024:
            _code.clear()
        code = _code[source] = _load_or_compile(source, what)
    return code


def _load_or_compile(source: str, what: str) -> CodeType:
    path = memo_dir() / "callpath" / f"{sha256_hex((_INTERPRETER + source).encode())}.marshal"
    try:
        code = marshal.loads(path.read_bytes())
        if isinstance(code, CodeType):
            return code
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = compile(source, f"<kspec call path: {what}>", "exec")
    try:
        from ._atomic import write_atomic  # only when writing: tempfile stays out of a warm process

        write_atomic(path, marshal.dumps(code))
    except OSError:
        pass
    return code
