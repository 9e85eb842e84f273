"""The gradient of a reduction spec: a table written like an elementwise kernel's, or ``"auto"`` for
a sum.

A reduction ``y = post(reduce(map(x)))`` has, per input element, the gradient of the output it went into. The
backward kernel is elementwise over the inputs' shape and reads the inputs, the output ``y`` and its gradient
``grad_y``, both broadcast back along the reduced axes. A table may use all three (a product's
``{x = "grad_y * y / x"}``); ``"auto"`` takes the sums, ``reduce_expr`` ``a + b`` and ``post_map_expr``
``y = a`` (a cast allowed), where the gradient is ``grad_y`` times the derivative of ``map_expr``, and minima
and maxima (``min(a, b)``, ``max(a, b)``, ``a < b ? a : b`` and the like), where it reaches only the elements
whose mapped value equals the result.
"""

from __future__ import annotations

import re
from typing import Any

from .. import dtypes
from .._errors import SpecError
from ._autodiff import derive_backward
from ._grad import table_backward

_SUM = re.compile(r"\s*(?:a\s*\+\s*b|b\s*\+\s*a)\s*;?\s*")
_CHOOSER = re.compile(r"\s*(?:(?:kspec::uf::)?(?:min|max|fmin|fmax|minimum|maximum|fminf|fmaxf)\s*\(\s*a\s*,\s*b\s*\)"
                      r"|\(?\s*a\s*[<>]=?\s*b\s*\)?\s*\?\s*a\s*:\s*b)\s*;?\s*")
_INDEXERS = re.compile(r"\b(_J|_in_ind|_out_ind|_raw_\w+)\b")


def reduction_backward(spec: Any) -> tuple[tuple[str, ...], str]:
    """(the inputs with a gradient, the backward operation) of a reduction spec with ``grad``."""
    if spec.grad != "auto":
        return table_backward(spec.grad)
    (out,) = spec.out_params
    post = re.compile(rf"\s*{re.escape(out.name)}\s*=\s*(?:\(\s*[\w:\s]+\)\s*)?a\s*;?\s*")
    chooser = _CHOOSER.fullmatch(spec.reduce_expr)
    if not (_SUM.fullmatch(spec.reduce_expr) or chooser) or not post.fullmatch(spec.post_map_expr):
        raise SpecError(
            f"'auto' differentiates sums (reduce_expr 'a + b') and minima / maxima ('min(a, b)', 'max(a, b)'), with "
            f"post_map_expr '{out.name} = a'; this kernel's are {spec.reduce_expr!r} and {spec.post_map_expr!r}: "
            "give the grad table by hand",
            field="grad",
        )
    found = _INDEXERS.search(spec.map_expr)
    if found is not None:
        raise SpecError(f"'auto' cannot differentiate a map_expr that reads {found.group(1)!r}", field="grad")
    body = _inlined_map(spec.map_expr, spec.preamble or "")
    operation = f"{out.name} = {spec.map_expr};" if body is None else f"{body[0]}\n{out.name} = {body[1]};"
    # a minimum or maximum: the gradient reaches the elements whose mapped value is the result (every one of a
    # tie gets it whole), none of the others
    zero = f"(({out.type if out.is_placeholder else dtypes.lookup(out.type).c_type})0)"
    seeds = {out.name: f"(({spec.map_expr}) == {out.name} ? grad_{out.name} : {zero})"} if chooser else None
    return derive_backward(operation, spec.in_params, spec.out_params, spec.placeholders, seeds)


# ``NAME(a, b)``: a map_expr that calls a function of the preamble on input names (kspec.fuse writes its maps so)
_CALL = re.compile(r"\s*(\w+)\s*\(\s*(\w+(?:\s*,\s*\w+)*)?\s*\)\s*")
_PARAM = re.compile(r"^.*?(\w+)\s*$")


def _inlined_map(map_expr: str, preamble: str) -> tuple[str, str] | None:
    """(the statements, the returned expression) of the preamble's ``__device__`` function that ``map_expr`` calls
    with its own parameter names as arguments, so that ``auto`` reads through it; None otherwise."""
    call = _CALL.fullmatch(map_expr)
    if call is None:
        return None
    name, args = call.group(1), [a.strip() for a in (call.group(2) or "").split(",") if a.strip()]
    found = re.search(rf"__device__[^;{{}}]*?\b{re.escape(name)}\s*\(([^)]*)\)\s*\{{(.*?)\n\}}", preamble, re.S)
    if found is None:
        return None
    params = [_PARAM.match(p.replace("&", " ")).group(1) for p in found.group(1).split(",") if p.strip()]  # type: ignore[union-attr]
    body = "\n".join(line.split("//")[0].rstrip() for line in found.group(2).splitlines()).strip()
    returned = re.search(r"\breturn\s+(.*?);\s*$", body, re.S)
    if params != args or returned is None or "return" in body[: returned.start()]:
        return None  # parameters renamed, or more than straight-line code: differentiated as a call (refused)
    return body[: returned.start()].strip(), returned.group(1)
