"""Count what benchmarks/clients/peer_groups.sh's ``served`` mode logged (benchmarks/helpers/_compile_log_plugin.py): kernel loads by
source (``binary``: a precompiled binary; ``cache`` / ``compiled``: not served by the build) and the tests that
failed on a forbidden compile, with the kernels they named.

    python3 benchmarks/clients/served_summary.py DIR
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path


def served_loads(directory: str | Path) -> tuple[collections.Counter[str], list[dict[str, str]]]:
    """(kernel loads by source, the records of tests that failed on a forbidden compile) of a served run's logs."""
    sources: collections.Counter[str] = collections.Counter()
    forbidden: list[dict[str, str]] = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "forbidden" in record:
                forbidden.append(record)
            else:
                sources[record["source"]] += 1
    return sources, forbidden


def main(directory: str) -> None:
    sources, forbidden = served_loads(directory)
    print("kernel loads by source: " + ", ".join(f"{s} {n}" for s, n in sorted(sources.items())) if sources else "no kernel loads")
    print(f"tests failed on a forbidden compile: {len(forbidden)}")
    for record in forbidden:
        print(f"  {record['forbidden']}: {record['message'][:300]}")


if __name__ == "__main__":
    main(sys.argv[1])
