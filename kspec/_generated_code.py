"""The call path's generated code, compiled once: kept per process, on disk across processes, and in builds.

The kernels layer's dispatchers and launches (kspec/kernels/callpath/_signature.py, _launch_code.py) and the runtime's
raw-kernel packers (kspec/runtime/_packer.py) are Python source generated per call structure. Compiling one
costs 0.1-1.6 ms, much of what a kernel served from a binary adds to its first call. So compiled code is kept in
memory by source, and marshalled under ``memo_dir()/callpath/`` (named by the digest of the interpreter's
version and the source), where a new process loads it in tens of microseconds instead. A fresh machine's memo
is empty: a ``kspec build`` of captured specs ships the code their capture generated (its sources are a file
of the captured directory, kspec/capturer/_call_path.py), compiled into its output's ``callpath/`` under the same
names, and the binary stores a process serves from are read first (before the memo, then compiling).

A leaf: both layers use it, and the runtime may not import the kernels layer, so the kernels layer tells it
where the stores are (:func:`set_code_directories`). A file that cannot be read, loaded or written is ignored
and the code is compiled; files are written whole (temporary file, then rename), as the interpreter's own
``.pyc`` files are.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import CodeType

from ._digest import sha256_hex
from ._memo import memo_dir

CODE_DIR = "callpath"  # in the memo directory and in a build output
# marshal's format and the bytecode belong to one interpreter build
_INTERPRETER = f"{sys.implementation.cache_tag} {sys.version}\n"
_code: dict[str, CodeType] = {}
_watchers: list[Callable[[str, str], None]] = []
_noted: set[str] = set()  # sources given to note_source
_shipped: list[Callable[[], Iterable[Path]]] = []  # the build outputs' code directories (set by the kernels layer)


def compiled(source: str, what: str) -> CodeType:
    """The code object of ``source`` (a module body); ``what`` names it in tracebacks."""
    code = _code.get(source)
    if code is None:
        if len(_code) > 1024:
            _code.clear()
        code = _code[source] = _load_or_compile(source, what)
        for watch in _watchers:
            watch(source, what)
    return code


def code_file_name(source: str) -> str:
    """The file a source's compiled code is kept in, in a memo or a build's code directory (this interpreter)."""
    return f"{sha256_hex((_INTERPRETER + source).encode())}.marshal"


def compile_source(source: str, what: str) -> CodeType:
    """``source`` compiled as the call path compiles it (a build's code directory holds these, marshalled)."""
    return compile(source, f"<kspec call path: {what}>", "exec")


def watch_sources(watch: Callable[[str, str], None]) -> Callable[[], None]:
    """Call ``watch(source, what)`` with each source this process's call path uses, once (a capture keeps them);
    returns what stops it."""
    _watchers.append(watch)
    return lambda: _watchers.remove(watch) if watch in _watchers else None


def sources_watched() -> bool:
    """Whether something watches the sources (a capture): only then is :func:`note_source` worth its work."""
    return bool(_watchers)


def note_source(source: str, what: str) -> None:
    """Tell the watchers of a source the call path would compile where it does not (a launch the compiled call
    path runs here), once per process."""
    if source not in _noted and source not in _code:
        _noted.add(source)
        for watch in _watchers:
            watch(source, what)


def set_code_directories(directories: Callable[[], Iterable[Path]]) -> None:
    """Where built code is found besides the memo: ``directories()`` (asked, before the memo, on each source's
    first load in a process) lists build outputs' code directories."""
    _shipped[:] = [directories]


def _load_or_compile(source: str, what: str) -> CodeType:
    name = code_file_name(source)
    # a build's directory first: a process it serves finds there all it needs, and its memo is often empty (a
    # fresh machine), where each look would be a failed open (~30 us on a slow host); the same name is the same code
    for directories in _shipped:
        for directory in directories():
            code = _load(os.path.join(directory, name))
            if code is not None:
                return code
    path = os.path.join(memo_dir(), CODE_DIR, name)
    code = _load(path)
    if code is not None:
        return code
    code = compile_source(source, what)
    try:
        from ._atomic import write_atomic  # only when writing: tempfile stays out of a warm process

        write_atomic(Path(path), marshal.dumps(code))
    except OSError:
        pass
    return code


def _load(path: str) -> CodeType | None:
    try:
        with open(path, "rb") as file:
            code = marshal.loads(file.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


# -- the sources file of a captured directory, and a build's code directory ------------------------------------

SOURCES_FILE = "call-path.txt"
_MARK = "#> "  # starts each source: "#> <what>"; no generated line starts so (they are code, or indented)
_SOURCES_HEADER = (
    "# The call path's generated code that the captured kernels' calls used (written by kspec capture, merged by\n"
    "# re-runs). kspec build compiles it into its output's callpath/: a process served by that build loads it there\n"
    "# instead of compiling it on each kernel's first call. Each source follows its line \"#> what\".\n"
)


def storable_sources(sources: Mapping[str, str]) -> dict[str, str]:
    """The ``sources`` (source -> what) a sources file gives back byte for byte: not those without a final newline,
    with a line that looks like a mark, or a ``what`` of several lines."""
    return {source: what for source, what in sources.items() if _storable(source) and "\n" not in what}


def format_sources(sources: Mapping[str, str]) -> str:
    """The text of a sources file: ``sources`` (source -> what), sorted, each after its mark line; those it cannot
    give back are left out (:func:`storable_sources`)."""
    kept = sorted((what, source) for source, what in storable_sources(sources).items())
    return _SOURCES_HEADER + "".join(f"{_MARK}{what}\n{source}" for what, source in kept)


def read_sources(directory: Path) -> dict[str, str]:
    """The sources (source -> what) of a directory's sources file (a captured directory); none without one."""
    try:
        return parse_sources((directory / SOURCES_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return {}


def parse_sources(text: str) -> dict[str, str]:
    """A sources file's sources (source -> what); lines before the first mark are its header."""
    found: dict[str, str] = {}
    what: str | None = None
    lines: list[str] = []
    for line in [*text.splitlines(keepends=True), _MARK]:
        if line.startswith(_MARK):
            if what is not None and lines:
                found["".join(lines)] = what
            what, lines = line[len(_MARK):].strip(), []
        elif what is not None:
            lines.append(line)
    return found


def _storable(source: str) -> bool:
    return source.endswith("\n") and "\r" not in source and not any(
        line.startswith(_MARK) for line in source.splitlines())


def write_code_directory(sources: Mapping[str, str], directory: Path) -> int:
    """Compile ``sources`` (source -> what) for this interpreter into ``directory`` (a build output's
    :data:`CODE_DIR`), removing the files of sources no longer there; returns how many it holds. A source that does
    not compile is left out (the call path compiles it and reports the error where it is used)."""
    from ._atomic import write_atomic

    names = set()
    for source, what in sources.items():
        try:
            data = marshal.dumps(compile_source(source, what))
        except (SyntaxError, ValueError):
            continue
        name = code_file_name(source)
        names.add(name)
        path = directory / name
        if not path.is_file() or path.read_bytes() != data:
            write_atomic(path, data)
    for old in directory.glob("*.marshal") if directory.is_dir() else ():
        if old.name not in names:
            old.unlink(missing_ok=True)
    if not names:
        try:
            directory.rmdir()
        except OSError:  # absent, or holding what this did not write
            pass
    return len(names)
