"""Small, conservative text analyses of kernel code that the templates need.

They never parse C++; each answers a yes/no question where "no" is always safe (it only costs speed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Patterns are compiled on first use (re caches them): a process serving binaries only specializes, and
# compiling every pattern here at import would cost it ~0.3 ms.

# Anything that can make an assignment conditional or skip it.
_CONTROL = r"\b(?:if|else|for|while|do|switch|case|goto|return|break|continue)\b"


def is_write_only(operation: str, name: str) -> bool:
    """True when ``operation`` surely assigns ``name`` and never reads it.

    The vectorised elementwise path builds each output in registers and stores whole vectors, so an output
    that the body reads (``z += x``), or may leave unassigned (``if (x > 0) z = x;``), must be loaded first
    to keep CuPy's semantics, where outputs are references into memory. "Surely" means: no control flow
    at all, ``name`` occurs at least once, and every occurrence starts a statement and is followed by a
    plain ``=``. Anything else (``z = z * 2``, ``f(z)``, ``y = z = x``, a comment naming ``z``) answers
    False, which is always correct, only slower.
    """
    if re.search(_CONTROL, operation):
        return False
    found = False
    for match in re.finditer(rf"\b{re.escape(name)}\b", operation):
        before = operation[: match.start()].rstrip()
        after = operation[match.end() :].lstrip()
        starts_statement = not before or before[-1] in ";{}"
        plain_assignment = after.startswith("=") and not after.startswith("==")
        if not (starts_statement and plain_assignment):
            return False
        found = True
    return found


# Type names whose device header a kernel needs even when no parameter has that dtype (a preamble that
# computes in __half, a reduce_type of complex<float>).
_HEADER_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b__half2?\b"), "fp16"),
    (re.compile(r"\b__nv_bfloat162?\b"), "bf16"),
    (re.compile(r"\bcomplex\s*<"), "complex"),
)

# The #include lines of a raw source; what they name is only used to report what it needs (the include
# path is there anyway: kspec/compiler/_includes.py).
_INCLUDE_RE = r'(?m)^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]'


def needs_from_text(texts: Iterable[str]) -> set[str]:
    """Headers that type names used in kernel text (preamble, expressions) call for."""
    found: set[str] = set()
    for text in texts:
        for pattern, need in _HEADER_WORDS:
            if pattern.search(text):
                found.add(need)
    return found


def needs_of_raw_source(source: str, translate_cucomplex: bool = False) -> set[str]:
    """Header packages a raw CUDA source needs, from its #includes, as the compiler's ``needs`` names.

    The one rule for raw sources, whether they come from a spec file (kspec/render/_specialize.py) or from
    ``RawKernel(code)`` / ``RawModule(code=...)`` (kspec/kernels/_raw.py). CCCL headers (``cuda/...``),
    CuPy's and kspec's complex headers and ``cuComplex`` need "complex" (CCCL); ``translate_cucomplex``
    does too.
    """
    needs = set()
    for header in re.findall(_INCLUDE_RE, source):
        if header.startswith(("cupy/", "kspec/complex", "cuda/", "cuComplex")):
            needs.add("complex")
        elif header.startswith("cub/"):
            needs.add("cub")
        elif "fp16" in header:
            needs.add("fp16")
        elif "bf16" in header:
            needs.add("bf16")
    if translate_cucomplex:
        needs.add("complex")
    return needs


# NVRTC's -minimal (12.4+; kspec's NVRTC is 13.x) leaves out textures and surfaces, the device runtime (cuda*
# functions, launches from device code) and the runtime API's types, and compiles a module about 10% faster
# (an elementwise module: 33.5 -> 30.1 ms, NVRTC 13.5, sm_90). kspec's templates and headers use none of them;
# code that names one (a word starting cuda, CU, tex or surf), launches (<<<) or includes a header, which
# might, compiles with the full builtins. CUDART_ words are the constants of <math_constants.h> or of
# <cupy/math_constants.h> (CuPy's implicit environment): bit casts, which -minimal keeps.
_FULL_BUILTINS = r"\b(?:cuda|CU(?!DART_)|tex|surf)|<<<|#[ \t]*include"


def needs_full_builtins(texts: Iterable[str]) -> bool:
    """Whether kernel code (preamble, expressions) may use what NVRTC's ``-minimal`` leaves out."""
    return any(re.search(_FULL_BUILTINS, text) for text in texts)
