"""Python literals of spec data, one item per line, black-like and deterministic."""

from __future__ import annotations

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
        return py_str(value)
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as a literal")


# Escapes of the characters a double-quoted Python literal cannot hold as themselves.
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def py_str(text: str) -> str:
    """``text`` as a double-quoted Python string literal (black's quotes) that evaluates to ``text`` exactly.

    Like ``repr`` (every character that is not printable, NUL, a lone surrogate, U+2028, is written as an
    escape), so whatever a spec holds stays inside the literal: spec text is never spliced into code.
    """
    if not isinstance(text, str):
        raise TypeError(f"cannot write {type(text).__name__} {text!r} as a string literal")
    out = []
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])  # \x00, \ud800, \u2028: Python's own escape of the character
    return '"' + "".join(out) + '"'


def comment_text(text: str) -> str:
    """``text`` for a ``#`` comment: as it is when every character is printable (nothing can end the
    comment), else its string literal (a newline or NUL in a path or a name cannot start a line of code)."""
    return text if text.isprintable() else py_str(text)


def docstring_text(text: str) -> str:
    """``text`` for the inside of a triple-quoted docstring: backslashes and quotes escaped, every
    character that is not printable escaped except the newlines, which stay line breaks."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append(ch)
        elif ch in ("\\", '"'):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return "".join(out)
