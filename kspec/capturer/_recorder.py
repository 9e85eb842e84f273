"""The recorder: a build observer (kspec/kernels/records/_observers.py) that appends what kernels build to a records file."""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from ._records import RECORDS_SUFFIX

CAPTURE_ENV = "KSPEC_CAPTURE_DIR"  # set by `kspec capture` for the processes it starts: record into this directory
_KSPEC_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_IMPORTLIB, _RUNPY = os.sep + "importlib" + os.sep, os.sep + "runpy.py"


class Recorder:
    """Records every typed specialization and raw module a process builds into ``directory`` (one file per
    recorder); see kspec/capturer/_records.py for the lines."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"records-{os.getpid()}-{uuid.uuid4().hex[:8]}{RECORDS_SUFFIX}"
        self._file: Any = None
        self._lock = threading.Lock()
        self._sites: dict[Any, dict[str, Any]] = {}  # a constructed kernel's token -> where it was built
        self._functions: set[tuple[int, str]] = set()  # (raw module, function name) already recorded
        self._specializations: set[str] = set()  # content keys of the specializations recorded
        self._stop: Any = None

    def start(self) -> Recorder:
        from .._generated_code import watch_sources
        from ..kernels import observe_builds

        stop_builds, stop_sources = observe_builds(self), watch_sources(self.call_path_source)
        self._stop = lambda: (stop_builds(), stop_sources())
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    # -- the observer ------------------------------------------------------------------------------------

    def constructed(self, token: object) -> None:
        self._sites[token if isinstance(token, str) else id(token)] = call_site()

    def specialized(self, spec: Any, spec_key: str, types: dict[str, str], scalars: frozenset[str],
                    raw_layouts: tuple[tuple[str, tuple[int, bool]], ...], key: str) -> None:  # fmt: skip
        if getattr(spec, "origin", None) is not None:  # a spec file's kernel is a spec already
            return
        self._specializations.add(key)
        self._write({
            "kind": spec.KIND, "spec": spec.to_data(), "types": dict(types), "scalars": sorted(scalars),
            "raw_layouts": {name: [ndim, c] for name, (ndim, c) in raw_layouts}, "key": key,
            "site": self._sites.get(spec_key) or call_site(),
        })  # fmt: skip

    def variant_loaded(self, key: str, variant: str) -> None:
        if key in self._specializations:  # one this recorder wrote (not a spec file's or a generated module's)
            self._write({"kind": "variant", "key": key, "variant": variant})

    def raw_function(self, build: Any, name: str) -> None:
        if build.binaries is not None:  # a spec's kernel, served by its own binaries: a spec already
            return
        key = (id(build), name)
        if key not in self._functions:  # once per module and name
            self._functions.add(key)
            self._write({**self._raw(build), "function": name})

    def raw_failed(self, build: Any, name: str) -> None:
        if build.binaries is None:  # (one served from binaries failed as its build recorded: captured already)
            self._write({**self._raw(build), "function": name, "compile_fails": True})

    def raw_loaded(self, build: Any) -> None:
        if build.binaries is None:  # (a build with binaries of its own is a spec file's: see raw_function)
            self._write(self._raw(build))

    def call_path_source(self, source: str, what: str) -> None:
        """Generated call-path code the process used (kspec/_generated_code.py): a build ships it compiled."""
        self._write({"kind": "call_path", "what": what, "source": source})

    def _raw(self, build: Any) -> dict[str, Any]:
        return {
            "kind": "raw", "code": build.code, "options": list(build.options),
            "name_expressions": list(build.name_expressions), "translate_cucomplex": bool(build.translate_cucomplex),
            "backend": build.backend, "label": build.label, "site": self._sites.get(id(build)) or call_site(),
        }  # fmt: skip

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        with self._lock:
            if self._file is None:
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(line)
            self._file.flush()


def call_site() -> dict[str, Any]:
    """The innermost frame outside kspec (and the import machinery): the code that built or called a kernel,
    its file relative to the ``sys.path`` entry it was imported from."""
    frame: Any = sys._getframe(1)
    while frame is not None and _skipped(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return {"module": "__main__", "file": "<unknown>", "line": 0}
    return {"module": str(frame.f_globals.get("__name__", "__main__")), "file": _relative(frame.f_code.co_filename),
            "line": frame.f_lineno}


def _skipped(filename: str) -> bool:
    """kspec's own frames, the code it generates (``<kspec ...>``) and the import machinery: never a site."""
    return (filename.startswith((_KSPEC_DIR, "<frozen ", "<kspec")) or _IMPORTLIB in filename
            or filename.endswith(_RUNPY))


def _relative(filename: str) -> str:
    best = ""
    for entry in sys.path:
        root = os.path.abspath(entry or ".") + os.sep
        if filename.startswith(root) and len(root) > len(best):
            best = root
    return (filename[len(best):] if best else filename).replace(os.sep, "/")


_recorder: Recorder | None = None


def record_from_environment() -> Recorder | None:
    """Start recording into ``KSPEC_CAPTURE_DIR`` when it is set (the start-up hook of processes ``kspec capture``
    runs); the recorder stops and closes its file at exit. Once per process."""
    global _recorder
    directory = os.environ.get(CAPTURE_ENV)
    if not directory or _recorder is not None:
        return _recorder
    import atexit

    _recorder = Recorder(directory).start()
    atexit.register(_recorder.stop)
    return _recorder


def recording_environment(records: str | os.PathLike[str]) -> dict[str, str]:
    """What a process records into ``records`` with: the directory, and call records off (a call a record serves
    plans nothing, so its specialization would not be seen). The start-up hook must be on its path too
    (``kspec.cupy.launch_environment``), unless the process starts the recorder itself."""
    return {CAPTURE_ENV: os.fspath(records), "KSPEC_CALL_RECORDS": "0"}
