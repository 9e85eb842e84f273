"""The table of benchmarks/clients/captured_shards.sh's runs: per shard of a peer group, what the capture run passed,
what the run served from its build passed of those, the served run's kernel loads, and the build.

    python3 benchmarks/clients/shard_table.py RESULTS_DIR

Reads every ``GROUP-K-of-N/`` directory of RESULTS_DIR; a group's total row says how many of its N shards are there
(the whole group once all are).
"""

from __future__ import annotations

import collections
import json
import math
import re
import sys
import tarfile
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
    log = directory / "served-log"
    if not log.is_dir() and (directory / "served-log.tgz").is_file():  # packed to keep a device call's files few
        with tarfile.open(directory / "served-log.tgz") as packed:
            packed.extractall(directory, filter="data")
    sources, forbidden = served_loads(log)
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
    groups: dict[str, dict[tuple[int, int], dict[str, float]]] = collections.defaultdict(dict)
    for directory in sorted(Path(results).iterdir()):
        m = _SHARD.match(directory.name)
        if m is None or not (directory / "times.json").exists():
            continue
        group, k, n = m.group(1), int(m.group(2)), int(m.group(3))
        groups[group][(k, n)] = shard_row(directory)
    print("| group | shard | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for group, shards in sorted(groups.items()):
        for (k, n), row in sorted(shards.items(), key=lambda item: item[0][0] / item[0][1]):
            print(f"| {group} | {k}/{n} | " + " | ".join(f"{row[c]:g}" for c in COLUMNS) + " |")
        total = {c: sum(r[c] for r in shards.values()) for c in COLUMNS}
        print(f"| **{group}** | {coverage(list(shards))} | " + " | ".join(f"{total[c]:g}" for c in COLUMNS) + " |")


def coverage(shards: list[tuple[int, int]]) -> str:
    """What shards K/N (every Nth test from the Kth; N may differ between runs: 2/5 is 2/10 and 7/10) cover of the
    group, as a fraction; shards that overlap are named (the total row then counts their tests twice)."""
    whole = math.lcm(*(n for _, n in shards))
    seen: collections.Counter[int] = collections.Counter()
    for k, n in shards:
        seen.update(range(k, whole, n))
    covered = len(seen)
    overlap = " (overlapping)" if any(c > 1 for c in seen.values()) else ""
    if covered == whole:
        return f"whole{overlap}"
    g = math.gcd(covered, whole)
    return f"{covered // g} of {whole // g}{overlap}"


if __name__ == "__main__":
    main(sys.argv[1])
