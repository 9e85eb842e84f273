"""A spec kernel's tuned planner knobs: the record entry a call's layout label is looked up in.

An elementwise or reduction kernel served from a build output reads that output's ``tuning.json``; one loaded
from a spec file reads the record beside it (:func:`records_for`, which tuned raw kernels read theirs with
too); then every kernel reads the records ``KSPEC_TUNING`` names (:func:`process_records`), so that a kernel of a
CuPy-style constructor call takes an entry tuned for its code; without any, the planner's rules. An entry counts only when its digest is
the kernel's code's (kspec/_plan_tuning.py's ``plan_digest``): a record tuned for other code is ignored. The
planner asks once per call signature (kspec/kernels/planning/_planner.py), never per call, and nothing is timed:
the same layout gets the same knobs in every process. ``KSPEC_LOG=tune`` prints each choice once.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...runtime import get_device

Tuning = Callable[[str], "Mapping[str, int] | None"]  # layout label -> knobs (None: the planner's rules)


def printing() -> bool:
    """``KSPEC_LOG`` names ``tune``: print each choice a record gives, once."""
    value = os.environ.get("KSPEC_LOG") or ""
    return "tune" in (part.strip().lower() for part in value.split(","))


def records_for(binaries: Any, spec_file: str | os.PathLike[str] | None) -> list[dict[str, Any]]:
    """The record a kernel reads: a build output's own (``tuning.json``: what that build carried; none: the
    defaults and the rules) when it is served from one, else the record beside its spec file."""
    directory = getattr(binaries, "directory", None)
    if directory is None and spec_file is None:  # a constructor's kernel: no record, nothing imported
        return []
    from ..._tuning import BUILD_RECORD, record_path

    if directory is not None:
        path: Path | None = Path(directory) / BUILD_RECORD
    else:
        path = record_path(spec_file) if spec_file is not None else None
    return _read_record(path) if path is not None else []


def _read_record(path: Path) -> list[dict[str, Any]]:
    """``[record]`` of a file, read once while it is unchanged (a spec file's kernels share one), or ``[]``."""
    from ..._tuning import read_record

    try:
        stat = path.stat()
    except OSError:
        return []
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _READ:
        _READ[key] = read_record(path)
    record = _READ[key]
    return [record] if record is not None else []


_READ: dict[tuple[str, int, int], dict[str, Any] | None] = {}
TUNING_ENV = "KSPEC_TUNING"


def process_records() -> list[dict[str, Any]]:
    """The records ``KSPEC_TUNING`` names (paths separated by ``os.pathsep``), which every elementwise and
    reduction kernel of the process reads after its own: a kernel built by a CuPy-style constructor (code
    written for CuPy, unchanged) takes an entry of its name whose digest is its code's. A path that is not a
    record is a KspecValueError naming the variable, on the first call that reads it."""
    value = os.environ.get(TUNING_ENV)
    if not value:
        return []
    from ..._errors import KspecValueError
    from ..._tuning import TuningError

    found: list[dict[str, Any]] = []
    for part in filter(None, (p.strip() for p in value.split(os.pathsep))):
        try:
            got = _read_record(Path(part))
        except TuningError as exc:
            raise KspecValueError(f"{TUNING_ENV}: {exc}") from None
        if not got:
            raise KspecValueError(f"{TUNING_ENV}: {part!r} is not a file (expected a record written by kspec tune)")
        found += got
    return found


class PlanRecords:
    """The planner entries of one kernel, per arch (read on first use), and the choices made from them."""

    def __init__(self, name: str, table: Callable[[], Mapping[str, Any]], records: Callable[[], list[dict[str, Any]]],
                 forced: Mapping[str, int] | None = None) -> None:  # fmt: skip
        self._name = name
        self._table = table  # the spec's table, asked only when a record has an entry of this name
        self._records = records
        self._forced = None if forced is None else dict(forced)
        self._entries: dict[str, dict[str, Any] | None] | None = None  # arch -> entry
        self._chosen: dict[tuple[str, str], Mapping[str, int] | None] = {}
        self._lock = threading.Lock()
        self.log: list[tuple[str, str, dict[str, int] | None, str]] = []  # (arch, label, knobs, source)
        self.asked: str | None = None  # the label a copy with fixed knobs was asked last (plan_label reads it)

    def tuning(self, device_id: int | None) -> Tuning | None:
        """The lookup a plan on ``device_id`` uses, or None where nothing is tuned (no planner entry)."""
        if self._forced is not None:
            forced = self._forced or None

            def fixed(label: str) -> Mapping[str, int] | None:
                self.asked = label
                return forced

            return fixed
        entries = self._entries if self._entries is not None else self._read()
        if not entries:
            return None
        arch = get_device(device_id).arch
        entry = entries.get(arch)
        if entry is None:
            return None
        return lambda label: self._choose(arch, entry, label)

    def _read(self) -> dict[str, dict[str, Any] | None]:
        with self._lock:
            if self._entries is None:
                entries: dict[str, dict[str, Any] | None] = {}
                digest: str | None = None
                records = self._records()
                if records:
                    from ..._plan_tuning import plan_digest
                    from ..._tuning import kernel_entry
                for record in records:
                    for arch in record.get("archs") or {}:
                        found = kernel_entry(record, arch, self._name)
                        if found is None or arch in entries or found.get("key") != ["layout"]:
                            continue
                        digest = digest or plan_digest(self._table())
                        if found.get("digest") == digest:
                            entries[arch] = found
                self._entries = entries
        return self._entries

    def _choose(self, arch: str, entry: Mapping[str, Any], label: str) -> Mapping[str, int] | None:
        where = (arch, label)
        if where in self._chosen:
            return self._chosen[where]
        from ..._plan_tuning import choose_knobs, knob_label

        knobs, source = choose_knobs(entry, label)
        self._chosen[where] = knobs
        self.log.append((arch, label, knobs, source))
        if printing():
            print(f"kspec tune: {self._name} [{label}] {arch}: {knob_label(knobs)} ({source})", file=sys.stderr, flush=True)
        return knobs


class PlanTuned:
    """What a spec kernel (ElementwiseKernel, ReductionKernel) adds for planner tuning: the lookup its planner
    asks, a copy with the knobs fixed (what ``kspec tune`` times) and the choices made."""

    name: str
    KIND: str
    _records_: PlanRecords

    def _plan_records(self) -> PlanRecords:
        records = self.__dict__.get("_records_")
        if records is None:
            records = self._records_ = PlanRecords(
                self.name, lambda: self._spec.to_data(),  # type: ignore[attr-defined]
                lambda: [*records_for(self._binaries, getattr(self._spec, "origin", None)), *process_records()])  # type: ignore[attr-defined]
        return records

    def _plans_untuned(self) -> bool:
        """Whether no tuning can reach this kernel's plans: no fixed knobs, no build output or spec file whose
        record it reads, no ``KSPEC_TUNING`` (a call record keeps only such plans: kspec/kernels/records/_call_store.py)."""
        records = self.__dict__.get("_records_")
        if records is not None and records._forced is not None:
            return False
        binaries, spec = self.__dict__.get("_binaries"), self.__dict__.get("_spec")
        return binaries is None and getattr(spec, "origin", None) is None and not os.environ.get(TUNING_ENV)

    def _plan_tuning(self, device_id: int | None) -> Tuning | None:
        """The tuned knobs a plan on ``device_id`` looks its layout up in; None: the planner's rules."""
        return self._plan_records().tuning(device_id)

    def with_knobs(self, knobs: Mapping[str, int]) -> Any:
        """This kernel with the planner's knobs fixed for every call, whatever a record says (``{}``: the
        planner's rules): ``block``, ``per_sm``, ``tile`` (elementwise), ``block``, ``per_sm``, ``slab``,
        ``cols``, ``fold``, ``pieces`` (reduction), each one of kspec/_plan_tuning.py's values. A new object with its own prepared
        calls; what ``kspec tune`` times."""
        from ..._errors import KspecTypeError, KspecValueError, about_kernel
        from ..._plan_tuning import KNOBS

        space = KNOBS[self.KIND]
        if not isinstance(knobs, Mapping):
            raise KspecTypeError(about_kernel(self.name, f"knobs: expected a mapping of knob -> int, got {type(knobs).__name__}"))
        for knob, value in knobs.items():
            if knob not in space:
                raise KspecValueError(about_kernel(self.name, f"knobs: {knob!r} is not a {self.KIND} knob ({', '.join(space)})"))
            if type(value) is not int or value not in space[knob]:
                raise KspecValueError(about_kernel(self.name, f"knobs: {knob} must be one of {space[knob]}, got {value!r}"))
        twin = object.__new__(type(self))
        twin._setup(self._spec, self._binaries)  # type: ignore[attr-defined]
        twin._cupy_rules = self._cupy_rules  # type: ignore[attr-defined]
        twin._records_ = PlanRecords(self.name, lambda: {}, lambda: [], forced=knobs)
        return twin

    def choices(self) -> list[tuple[str, str, dict[str, int] | None, str]]:
        """Each (arch, layout label, knobs, source) this kernel's calls took from a tuning record, in order:
        source ``record``, ``record, nearest <label>`` or ``rules`` (knobs None)."""
        return list(self._plan_records().log)

    def plan_label(self, *args: Any, **kwargs: Any) -> str | None:
        """The layout label a tuning record files a call with these arguments under (arrays as ArraySpecs,
        as for :meth:`plan_launch`, which this runs: it loads the kernel's binary), or None where the call
        launches nothing (size 0)."""
        probe = self.with_knobs({})
        probe.plan_launch(*args, **kwargs)
        return probe._records_.asked
