"""A pytest plugin for benchmarks/clients/peer_groups.sh's ``served`` mode: each process (xdist worker) writes, at the end,
every kernel load of kspec's compile log and every test that failed on a compile the policy forbade, as JSON lines
in ``$KSPEC_SERVED_LOG/<pid>.jsonl``. ``python3 benchmarks/clients/served_summary.py DIR`` counts them."""

from __future__ import annotations

import json
import os
from typing import Any


def _write(record: dict[str, Any]) -> None:
    directory = os.environ.get("KSPEC_SERVED_LOG")
    if directory:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed and "CompileForbiddenError" in str(report.longrepr):
        text = str(report.longrepr)
        line = next((ln for ln in text.splitlines() if "CompileForbiddenError" in ln), "")
        _write({"forbidden": report.nodeid, "message": line.strip()[:400]})


def pytest_sessionfinish(session: Any) -> None:
    import sys

    if "kspec" not in sys.modules:
        return
    import kspec

    for event in kspec.compile_log():
        _write({"kernel": event.kernel, "source": event.source, "what": event.what, "arch": event.arch})
