"""Python literals of spec data, one item per line, black-like and deterministic."""

from __future__ import annotations

import json
from typing import Any

_INDENT = "    "


def literal(value: Any, level: int = 0) -> str:
    """Source text of ``value`` (dicts, lists, tuples, strings, numbers, bools, None), indented at ``level``."""
    pad, inner = _INDENT * level, _INDENT * (level + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        if all(not isinstance(v, (dict, list, tuple)) for v in value.values()):
            flat = "{" + ", ".join(f"{_scalar(k)}: {_scalar(v)}" for k, v in value.items()) + "}"
            if len(pad) + len(flat) <= 80:
                return flat
        items = [f"{inner}{_scalar(k)}: {literal(v, level + 1)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + f"\n{pad}}}"
    if isinstance(value, (list, tuple)):
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        if not value:
            return open_ + close
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            flat = open_ + ", ".join(_scalar(v) for v in value) + ("," if len(value) == 1 and close == ")" else "") + close
            if len(pad) + len(flat) <= 100:
                return flat
        items = [f"{inner}{literal(v, level + 1)}," for v in value]
        return open_ + "\n" + "\n".join(items) + f"\n{pad}{close}"
    return _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        # Double quotes as black writes them; a JSON string is a valid Python string with the same value.
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as a literal")
