"""The placeholder rules a typed spec follows, shared by the Pydantic models and the plain tables that serve
generated modules (so the two can never disagree). Needs only ``in_params``/``out_params`` whose items have
``type`` and ``is_placeholder``, and ``_extra_placeholders()`` (a reduction's placeholder ``reduce_type``)."""

from __future__ import annotations

from typing import Any


class PlaceholderRules:
    in_params: tuple[Any, ...]
    out_params: tuple[Any, ...]

    def _extra_placeholders(self) -> tuple[str, ...]:
        return ()

    @property
    def params(self) -> tuple[Any, ...]:
        return self.in_params + self.out_params

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Placeholder letters in order of first use (inputs, outputs, then reduce_type)."""
        seen: dict[str, None] = {}
        for p in self.params:
            if p.is_placeholder:
                seen.setdefault(p.type)
        for extra in self._extra_placeholders():
            seen.setdefault(extra)
        return tuple(seen)

    @property
    def output_only_placeholders(self) -> tuple[str, ...]:
        """Placeholders no input binds: such a kernel must be called with its outputs given."""
        bound_by_inputs = {p.type for p in self.in_params if p.is_placeholder}
        return tuple(t for t in self.placeholders if t not in bound_by_inputs)

    @property
    def requires_explicit_outputs(self) -> bool:
        return bool(self.output_only_placeholders)
