"""A parser for the straight-line C that ``grad = "auto"`` differentiates: statements ``[type] name = expr;``
over ``+ - * /``, unary minus, calls, casts, comparisons and ``?:``.

Anything else (``if``, loops, ``+=``, ``++``, indexing, member access, braces) is a :class:`CExprError` naming the
construct, so that a spec asking for ``auto`` on code it cannot differentiate says where at load time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFlLuU]*)|(?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)"
    r"|(?P<op><=|>=|==|!=|&&|\|\||\+\+|--|\+=|-=|\*=|/=|->|[-+*/%<>=!?:(),;\[\]{}.&|^~]))"
)
_BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, ">": 4, "<=": 4, ">=": 4, "+": 5, "-": 5, "*": 6, "/": 6}
_CONTROL = {"if", "else", "for", "while", "do", "switch", "return", "goto", "break", "continue"}
_TYPE_WORDS = {"const", "unsigned", "signed", "long", "short", "int", "float", "double", "char", "bool", "auto",
               "__half", "half", "size_t", "ptrdiff_t"}


class CExprError(ValueError):
    """The code is not straight-line arithmetic; the message names what was found."""


@dataclass(frozen=True)
class Node:
    kind: str  # num, var, unary, bin, call, cast, cond
    text: str = ""  # the number, name, operator, function or type
    args: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Statement:
    target: str
    expr: Node
    declared: str | None  # the type of a local declared here, else None (an assignment)


def tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise CExprError(f"cannot read {text[pos:pos + 12].strip()!r}")
        out.append(m.group(m.lastgroup or "op"))
        pos = m.end()
    return out


def parse_statements(code: str, type_names: set[str]) -> list[Statement]:
    """The statements of ``code``; ``type_names`` are the names that may start a declaration (placeholders)."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", code, flags=re.S)
    out = []
    for raw in code.split(";"):
        words = tokens(raw)
        if not words:
            continue
        for bad in ("{", "}", "[", "]", ".", "->", "++", "--", "+=", "-=", "*=", "/=", "%", "&", "|", "^", "~"):
            if bad in words:
                raise CExprError(f"{_what(bad)} in {raw.strip()!r}")
        control = next((w for w in words if w in _CONTROL), None)
        if control is not None:
            raise CExprError(f"'{control}' in {raw.strip()!r} (only straight-line statements)")
        if "=" not in words:
            raise CExprError(f"{raw.strip()!r} is not an assignment")
        eq = words.index("=")
        left = words[:eq]
        if len(left) == 1:
            target, declared = left[0], None
        elif len(left) >= 2 and all(w in _TYPE_WORDS or w in type_names or "::" in w for w in left[:-1]):
            target, declared = left[-1], " ".join(left[:-1])
        else:
            raise CExprError(f"cannot read the left side of {raw.strip()!r}")
        parser = _Parser(words[eq + 1:], type_names)
        expr = parser.expression(0)
        if parser.pos != len(parser.words):
            raise CExprError(f"unexpected {parser.words[parser.pos]!r} in {raw.strip()!r}")
        out.append(Statement(target, expr, declared))
    return out


def _what(token: str) -> str:
    return {"[": "indexing '[...]'", "{": "a block '{...}'", "}": "a block '{...}'", ".": "member access '.'",
            "->": "member access '->'", "++": "increment '++'", "--": "decrement '--'"}.get(
        token, f"operator {token!r}")  # fmt: skip


class _Parser:
    """Precedence climbing over the tokens of one expression."""

    def __init__(self, words: list[str], type_names: set[str]) -> None:
        self.words, self.pos, self.types = words, 0, type_names

    def peek(self) -> str | None:
        return self.words[self.pos] if self.pos < len(self.words) else None

    def take(self, expected: str | None = None) -> str:
        word = self.peek()
        if word is None or (expected is not None and word != expected):
            raise CExprError(f"expected {expected or 'more'} but found {word or 'the end'}")
        self.pos += 1
        return word

    def expression(self, floor: int) -> Node:
        left = self.unary()
        while True:
            op = self.peek()
            if op == "?" and floor == 0:
                self.take()
                yes = self.expression(0)
                self.take(":")
                no = self.expression(0)
                return Node("cond", "?", (left, yes, no))
            rank = _BINARY.get(op or "")
            if rank is None or rank <= floor:
                return left
            self.take()
            left = Node("bin", op or "", (left, self.expression(rank)))

    def unary(self) -> Node:
        word = self.take()
        if word in ("-", "+", "!"):
            return Node("unary", word, (self.unary(),))
        if word == "(":
            cast = self._cast_type()
            if cast is not None:
                return Node("cast", cast, (self.unary(),))
            inner = self.expression(0)
            self.take(")")
            return inner
        if word[0].isdigit() or word[0] == ".":
            return Node("num", word)
        if word[0].isalpha() or word[0] == "_":
            word += self._template_args()
            if self.peek() == "(":
                self.take()
                args: list[Node] = []
                while self.peek() != ")":
                    args.append(self.expression(0))
                    if self.peek() == ",":
                        self.take()
                self.take(")")
                if len(args) == 1 and (word in _TYPE_WORDS or word in self.types):  # T(x), float(x): a cast
                    return Node("cast", word, tuple(args))
                return Node("call", word, tuple(args))
            return Node("var", word)
        raise CExprError(f"unexpected {word!r}")

    def _template_args(self) -> str:
        """``<int>`` after a function's name, when a call follows (``float_to_int<int>(x)``): consumed; else ''."""
        if self.peek() != "<":
            return ""
        end = self.pos + 1
        while end < len(self.words) and (self.words[end] in _TYPE_WORDS or self.words[end] in self.types
                                         or self.words[end] == "," or self.words[end].isidentifier()):  # fmt: skip
            end += 1
        if end + 1 < len(self.words) and self.words[end] == ">" and self.words[end + 1] == "(" and end > self.pos + 1:
            args = " ".join(self.words[self.pos + 1:end]).replace(" ,", ",")
            self.pos = end + 1
            return f"<{args}>"
        return ""

    def _cast_type(self) -> str | None:
        """``(type)`` at the cursor (just after '('): the type, consumed; else None."""
        end = self.pos
        while end < len(self.words) and self.words[end] != ")":
            end += 1
        words = self.words[self.pos:end]
        if words and end < len(self.words) and all(w in _TYPE_WORDS or w in self.types for w in words):
            self.pos = end + 1
            return " ".join(words)
        return None
