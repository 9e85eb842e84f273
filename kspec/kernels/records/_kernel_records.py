"""What a spec kernel adds for call records (kspec/kernels/records/_call_store.py): its records, the lookup the call
path makes before planning, the record a plan leaves, and a constructor call whose spec waits for its first
need because a record proves its arguments valid."""

from __future__ import annotations

import json
from typing import Any

from ..._digest import sha256_hex
from ...compiler import cached_binary
from ...runtime import initialized_device_count
from ._call_store import CallRecords, records_enabled, signature_text
from ._call_restore import DEVICE, USED, describe, restore
from ._constructor_memo import UNKEYED


def spec_digest(spec: Any) -> str:
    """SHA-256 (hex) of a spec's content: the same for the same spec in every process."""
    return sha256_hex(json.dumps(spec.to_data(), sort_keys=True, separators=(",", ":"), default=str).encode())


class RecordedCalls:
    """Call records for :class:`~.._spec_kernel.SpecKernel` (a mixin over its ``_spec``, ``_key``, ``_nin``,
    ``_nout``, ``_used``, ``_cupy_rules``, ``KIND`` and ``_plans_untuned``)."""

    KIND: str
    _nin: int
    _nout: int
    _cupy_rules: bool
    _used: dict[Any, Any]
    _plans_untuned: Any

    # what an identical constructor call adopts from a kernel whose spec waits (SpecKernel._SHARED's, the spec
    # and its key replaced by what makes them, and the records that proved the arguments valid)
    _LAZY_STATE = ("_lazy_spec", "_call_records_", "_ctor_key")

    def _constructor_records(self, key: Any) -> CallRecords | None:
        """The call records of a constructor call's exact arguments, where they may serve (a one-device process
        whose driver is up, records on, no tuning record named): None otherwise."""
        if key is UNKEYED or not records_enabled() or initialized_device_count() != 1 or not self._plans_untuned():
            return None
        try:
            identity = "constructor " + sha256_hex(repr(key).encode())
        except Exception:  # an argument whose repr fails: not recorded
            return None
        return CallRecords(identity)

    def __getattr__(self, name: str) -> Any:
        """``_spec`` and ``_key`` of a kernel whose constructor call a record proved valid: made on first need."""
        build = self.__dict__.get("_lazy_spec") if name in ("_spec", "_key") else None
        if build is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        spec = build()
        self._spec, self._key = spec, spec_digest(spec)
        return self.__dict__[name]

    def _call_records(self) -> CallRecords | None:
        """This kernel's call records (kspec/kernels/records/_call_store.py), or None where its plans are not
        recorded (records off, a tuned or precompiled kernel); decided on its first miss. A constructor call's
        kernel files them under its exact arguments (a later process finds them before building the spec)."""
        records = self.__dict__.get("_call_records_", UNKEYED)
        if records is UNKEYED:
            records = None
            key = self.__dict__.get("_ctor_key", UNKEYED)
            if key is not UNKEYED:
                records = self._constructor_records(key)
            elif records_enabled() and self._plans_untuned():
                records = CallRecords(f"{self.KIND} {type(self).__module__}.{type(self).__qualname__} {self._key} "
                                      f"{self._cupy_rules}")  # fmt: skip
            if records is not None:
                records.arity = (self._nin, self._nout)
            self._call_records_ = records
        return records

    def _recall(self, types: tuple[type, ...], items: tuple[Any, ...], stream: object) -> Any:
        """The prepared call a call record holds for a signature, or None (the call plans)."""
        records = self._call_records()
        signature = signature_text(types, items) if records is not None else None
        described = records.find(signature) if signature is not None else None  # type: ignore[union-attr]
        if described is None:
            return None
        prepared = restore(described, types, stream, records.binary)  # type: ignore[union-attr]
        if prepared is not None and described[USED] is not None:
            self._used.setdefault(described[USED], None)  # made when _cached_codes is read
        return prepared

    def _remember(self, types: tuple[type, ...], items: tuple[Any, ...], prepared: Any) -> None:
        """Record a planned call for the next process (kspec/kernels/records/_call_store.py)."""
        used = self.__dict__.pop("_last_used", None)
        records = self._call_records()
        signature = signature_text(types, items) if records is not None else None
        if signature is None:
            return
        described = describe(prepared, used)
        if described is None:
            return
        binaries = {step.binary[0]: cached_binary(step.binary[0]) for step in prepared.parts[1]}
        if all(image is not None for image in binaries.values()):
            records.add(signature, described, described[DEVICE], binaries)  # type: ignore[union-attr]
