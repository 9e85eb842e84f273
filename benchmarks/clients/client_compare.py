"""Compare CuPy's and kspec's outcomes on CuPy's cupyx.scipy suites (logs of benchmarks/clients/client_suites.sh).

    python3 benchmarks/clients/client_compare.py RESULTS_DIR [RESULTS_DIR ...] [--causes 25]

For each suite and seed with both a ``cupy-...log`` and a ``kspec-...log``: the tests both modes reached, how many
CuPy passes, how many of those kspec passes, and the failures of kspec where CuPy passes, grouped by the first line
of their error (pytest's short summary). Several RESULTS_DIRs are runs of the same selection (runs cut at a time
limit reach different tests): each mode's outcomes are their union, and a test whose outcome differs between runs
of one mode is listed and counted as failing in that mode.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re
import sys

# a test id runs to the end of the line: parameters may hold spaces ("[_param_8_{axis=0, dtype=float32}]"), and ids
# cut at the first space merged (the cupyx group: 3,749 distinct passes counted of pytest's 3,758)
_OUTCOME = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+?)\s*$")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (.+?) - (.*)$")


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


def merged(logs: list[pathlib.Path]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The union of several runs' outcomes: (outcome, error, tests whose outcome differs between the runs)."""
    result: dict[str, str] = {}
    errors: dict[str, str] = {}
    differ: list[str] = []
    for log in logs:
        out, err = outcomes(log)
        for test, outcome in out.items():
            if test in result and result[test] != outcome:
                differ.append(test)
                if result[test] == "PASSED":  # a test that failed in any run counts as failing
                    result[test] = outcome
            else:
                result.setdefault(test, outcome)
        for test, message in err.items():
            errors.setdefault(test, message)
    return result, errors, sorted(set(differ))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--causes", type=int, default=25)
    args = parser.parse_args(argv)
    roots = [pathlib.Path(r) for r in args.results]
    print("| suite | seed | runs | tests reached by both modes | CuPy passes | kspec passes of those | share |")
    print("|---|---|---|---|---|---|---|")
    causes: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    differing: list[str] = []
    names = sorted({log.name for root in roots for log in root.glob("cupy-*.log")})
    for name in names:
        cupy_logs = [root / name for root in roots if (root / name).exists()]
        kspec_logs = [root / name.replace("cupy-", "kspec-", 1) for root in roots]
        kspec_logs = [log for log in kspec_logs if log.exists()]
        if not kspec_logs:
            continue
        suite, seed = pathlib.Path(name).stem.split("-")[1:3]
        cupy_out, _, cupy_differ = merged(cupy_logs)
        kspec_out, kspec_err, kspec_differ = merged(kspec_logs)
        differing += [f"cupy {t}" for t in cupy_differ] + [f"kspec {t}" for t in kspec_differ]
        both = set(cupy_out) & set(kspec_out)
        cupy_pass = {t for t in both if cupy_out[t] == "PASSED"}
        kspec_pass = {t for t in cupy_pass if kspec_out[t] == "PASSED"}
        share = len(kspec_pass) / len(cupy_pass) if cupy_pass else float("nan")
        runs = f"{len(cupy_logs)} / {len(kspec_logs)}"
        print(f"| {suite} | {seed} | {runs} | {len(both)} | {len(cupy_pass)} | {len(kspec_pass)} | {share:.1%} |")
        for test in sorted(cupy_pass - kspec_pass):
            cause = _cause(kspec_err.get(test, kspec_out[test]))
            causes[cause] += 1
            examples.setdefault(cause, test)
    if differing:
        print(f"\noutcomes that differ between runs of one mode ({len(differing)}):")
        for line in differing:
            print(f"  {line}")
    if causes:
        print(f"\nkspec fails where CuPy passes, by cause ({sum(causes.values())}):")
        for cause, n in causes.most_common(args.causes):
            print(f"{n:6d}  {cause}\n        e.g. {examples[cause]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
