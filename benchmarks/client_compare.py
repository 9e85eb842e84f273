"""Compare CuPy's and kspec's outcomes on CuPy's cupyx.scipy suites (logs of benchmarks/client_suites.sh).

    python3 benchmarks/client_compare.py RESULTS_DIR [--causes 25]

For each suite and seed with both a ``cupy-...log`` and a ``kspec-...log``: the tests both runs reached, how many
CuPy passes, how many of those kspec passes, and the failures of kspec where CuPy passes, grouped by the first line
of their error (pytest's short summary).
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import sys

_OUTCOME = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+) - (.*)$")


def outcomes(path: pathlib.Path) -> tuple[dict[str, str], dict[str, str]]:
    """(test id -> outcome, test id -> first line of its error) of one -v log."""
    result: dict[str, str] = {}
    errors: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = _OUTCOME.match(line)
        if m:
            result[m.group(2)] = m.group(1)
            continue
        m = _SUMMARY.match(line)
        if m:
            errors[m.group(1)] = m.group(2)
    return result, errors


def _cause(message: str) -> str:
    message = re.sub(r"0x[0-9a-f]+", "ADDR", message)
    message = re.sub(r"\d+", "N", message)
    return message[:150]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--causes", type=int, default=25)
    args = parser.parse_args(argv)
    root = pathlib.Path(args.results)
    print("| suite | seed | tests reached by both | CuPy passes | kspec passes of those | share |")
    print("|---|---|---|---|---|---|")
    causes: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    for cupy_log in sorted(root.glob("cupy-*.log")):
        kspec_log = root / cupy_log.name.replace("cupy-", "kspec-", 1)
        if not kspec_log.exists():
            continue
        suite, seed = cupy_log.stem.split("-")[1:3]
        cupy_out, _ = outcomes(cupy_log)
        kspec_out, kspec_err = outcomes(kspec_log)
        both = set(cupy_out) & set(kspec_out)
        cupy_pass = {t for t in both if cupy_out[t] == "PASSED"}
        kspec_pass = {t for t in cupy_pass if kspec_out[t] == "PASSED"}
        share = len(kspec_pass) / len(cupy_pass) if cupy_pass else float("nan")
        print(f"| {suite} | {seed} | {len(both)} | {len(cupy_pass)} | {len(kspec_pass)} | {share:.1%} |")
        for test in sorted(cupy_pass - kspec_pass):
            cause = _cause(kspec_err.get(test, kspec_out[test]))
            causes[cause] += 1
            examples.setdefault(cause, test)
    if causes:
        print(f"\nkspec fails where CuPy passes, by cause ({sum(causes.values())}):")
        for cause, n in causes.most_common(args.causes):
            print(f"{n:6d}  {cause}\n        e.g. {examples[cause]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
