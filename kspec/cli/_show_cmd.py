"""`kspec show NAME`: print one kernel's spec as TOML (or JSON)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .._errors import SpecError
from ..spec import dumps_json, dumps_toml, load_library
from ._common import DEFAULT_SPECS, error


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("show", help="print a kernel's spec as TOML")
    p.add_argument("name", help="kernel name")
    p.add_argument(
        "--specs", nargs="+", default=[DEFAULT_SPECS], metavar="PATH", help=f"where to look (default: {DEFAULT_SPECS}/)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        library = load_library(args.specs)
    except SpecError as exc:
        error(str(exc))
        return 1
    if args.name not in library:
        known = ", ".join(sorted(library)) or "none"
        error(f"no kernel named {args.name!r} in {' '.join(args.specs)} (kernels: {known})")
        return 1
    spec = library[args.name]
    print((dumps_json if args.json else dumps_toml)([spec]), end="")
    if getattr(spec, "tune", None) is not None and spec.origin is not None:
        print_record(spec.name, spec.origin)
    return 0


def print_record(name: str, origin: Path) -> None:
    """A tuned kernel's record, per arch and bucket: the winner, the runner-up and the default (a planner
    entry's buckets are layout labels, its configs knobs: kspec/_plan_tuning.py)."""
    from .._plan_tuning import PLANNER_KEY, knob_label
    from .._tuning import TuningError, config_label, read_record, record_path

    path = record_path(origin)
    try:
        record = read_record(path)
    except TuningError as exc:
        error(str(exc))
        return
    entries = [(arch, data["kernels"][name]) for arch, data in sorted((record or {}).get("archs", {}).items())
               if name in data.get("kernels", {})]  # fmt: skip
    if not entries:
        print(f"# tuning record: none for {name} in {path} (run kspec tune): calls run the default (the planner's rules)")
        return
    print(f"# tuning record {path}")
    for arch, entry in entries:
        section = record["archs"][arch]  # type: ignore[index]
        print(f"# {arch} ({section.get('device', '?')}, {section.get('driver', '?')}, kspec {section.get('kspec', '?')}"
              f"{'' if entry.get('complete') else ', incomplete'})")  # fmt: skip
        label_of = knob_label if entry.get("key") == PLANNER_KEY else config_label
        for label, data in entry.get("buckets", {}).items():
            parts = [f"{what} {label_of(data[what]['config'])} {data[what]['ms']:.4f} ms"
                     for what in ("winner", "runner_up", "default") if what in data]  # fmt: skip
            print(f"#   {label}: " + "; ".join(parts) + f" ({len(data.get('skipped', []))} skipped)")
