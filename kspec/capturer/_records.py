"""The records a capture writes: one JSON object per line, per process, in the capture's records directory.

Four kinds of line. A typed kernel's specialization::

    {"kind": "elementwise" | "reduction", "spec": <to_data()>, "types": {...}, "scalars": [...],
     "raw_layouts": {"name": [ndim, c_contiguous]}, "key": "<its content key>", "site": {...}}

a launch variant of one that a call loaded (after its specialization's line, in the same file)::

    {"kind": "variant", "key": "<the specialization's content key>", "variant": "entry/index/ndim/vec"}

and a raw module of source code loaded::

    {"kind": "raw", "code": "...", "options": [...], "name_expressions": [...], "translate_cucomplex": false,
     "backend": "nvrtc", "label": "...", "site": {...}}

and the source of generated call-path code the process used (kspec/_generated_code.py), once::

    {"kind": "call_path", "what": "launch" | "dispatcher" | "raw-kernel launch", "source": "..."}

A raw line with ``"compile_fails": true`` (and the ``function`` looked up) is a module whose compile failed: code
written for CuPy may rely on that (catching the CompileException to fall back on other code), so the capture
keeps it, and its build stores the failure.

``site``: where the kernel was built (``module``, ``file`` relative to its ``sys.path`` entry, ``line``). Lines
are appended and flushed as they happen, so a process killed mid-run (a test timeout) keeps what it built.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RECORDS_SUFFIX = ".jsonl"


def read_records(directory: str | Path) -> Iterator[dict[str, Any]]:
    """Every record in a records directory, file by file in name order; a damaged line (a process killed while
    writing it) is skipped."""
    for path in sorted(Path(directory).glob(f"*{RECORDS_SUFFIX}")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("kind"), str):
                    yield record
