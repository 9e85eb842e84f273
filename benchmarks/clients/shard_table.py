"""The table of benchmarks/clients/captured_shards.sh's runs: per shard of a peer group, what the capture run passed,
what the run served from its build passed of those, the served run's kernel loads, and the build.

    python3 benchmarks/clients/shard_table.py RESULTS_DIR

Reads every ``GROUP-K-of-N/`` directory of RESULTS_DIR; a group's total row says how many of its N shards are there
(the whole group once all are).
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_compare import outcomes  # noqa: E402  (a sibling script)
from served_summary import served_loads  # noqa: E402

_SHARD = re.compile(r"^(\w+)-(\d+)-of-(\d+)$")
COLUMNS = ("tests", "capture passed", "served passed", "of the capture's passes", "binary loads", "other loads",
           "forbidden compiles", "kernels", "modules", "from the cache", "build s", "build MB", "capture s", "served s")


def shard_row(directory: Path) -> dict[str, float]:
    """One shard's numbers (see COLUMNS)."""
    captured, _ = outcomes(next(directory.glob("capture-*.log")))
    served, _ = outcomes(next(directory.glob("served-*.log")))
    sources, forbidden = served_loads(directory / "served-log")
    build = json.loads((directory / "build.json").read_text() or "{}")
    times = json.loads((directory / "times.json").read_text())
    passed = {t for t, o in captured.items() if o == "PASSED"}
    return {
        "tests": len(captured), "capture passed": len(passed),
        "served passed": sum(o == "PASSED" for o in served.values()),
        "of the capture's passes": sum(served.get(t) == "PASSED" for t in passed),
        "binary loads": sources.get("binary", 0), "other loads": sum(sources.values()) - sources.get("binary", 0),
        "forbidden compiles": len(forbidden), "kernels": times["kernels"], "modules": build.get("modules_built", 0),
        "from the cache": build.get("cache_hits", 0), "build s": times["build_s"],
        "build MB": round(times["build_bytes"] / 1e6, 1), "capture s": times["capture_s"], "served s": times["served_s"],
    }


def main(results: str) -> None:
    groups: dict[str, dict[int, dict[str, float]]] = collections.defaultdict(dict)
    sizes: dict[str, int] = {}
    for directory in sorted(Path(results).iterdir()):
        m = _SHARD.match(directory.name)
        if m is None or not (directory / "times.json").exists():
            continue
        group, k, n = m.group(1), int(m.group(2)), int(m.group(3))
        groups[group][k] = shard_row(directory)
        sizes[group] = n
    print("| group | shard | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for group, shards in sorted(groups.items()):
        for k, row in sorted(shards.items()):
            print(f"| {group} | {k}/{sizes[group]} | " + " | ".join(f"{row[c]:g}" for c in COLUMNS) + " |")
        total = {c: sum(r[c] for r in shards.values()) for c in COLUMNS}
        print(f"| **{group}** | {len(shards)} of {sizes[group]} | " + " | ".join(f"{total[c]:g}" for c in COLUMNS) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
