"""Small, conservative text analyses of kernel code that the templates need.

They never parse C++; each answers a yes/no question where "no" is always safe (it only costs speed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .._named_tuple import NamedTuple

# Patterns are compiled on first use (re caches them): a process serving binaries only specializes, and
# compiling every pattern here at import would cost it ~0.3 ms. Those every specialization runs (the indexer's)
# are compiled at import: a served process needs them too, and kspec.cupy's enable() imports this module, so
# they are compiled at a program's start instead of in its first kernel call (0.4-0.7 ms).

_COMMENT = r"//[^\n]*|/\*.*?\*/"

# Anything that can make an assignment conditional or skip it.
_CONTROL = r"\b(?:if|else|for|while|do|switch|case|goto|return|break|continue)\b"


def is_write_only(operation: str, name: str) -> bool:
    """True when ``operation`` surely assigns ``name`` and never reads it.

    The vectorised elementwise path builds each output in registers and stores whole vectors, so an output
    that the body reads (``z += x``), or may leave unassigned (``if (x > 0) z = x;``), must be loaded first
    to keep CuPy's semantics, where outputs are references into memory. "Surely" means: no control flow
    at all, ``name`` occurs at least once, and every occurrence starts a statement and is followed by a
    plain ``=``. Anything else (``z = z * 2``, ``f(z)``, ``y = z = x``) answers False, which is always correct,
    only slower. Comments are dropped first (``kspec.fuse`` ends each statement with one, which hid every fused
    output's store behind a comment: the output was loaded too), unless the code has string or character
    literals, where ``//`` may not start one.
    """
    if not re.search(r"[\"']", operation):
        operation = re.sub(_COMMENT, " ", operation, flags=re.S)
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


# Only rendering reads these (kspec/render/_render.py): compiled on first use, not by a process serving binaries.
_RETURN = r"\breturn\b"
_BREAK = r"\b(?:break|continue)\b"


def element_body(operation: str) -> str:
    """An elementwise body as the templates place it, so that ``return``, ``break`` and ``continue`` end this
    element's body and no more. CuPy runs a thread per element inside a grid-stride loop, where each ends only
    that element (cupyx.scipy.ndimage's binary erosion: ``if (...) { y = ...; return; }``; cuCIM's Canny
    non-maximum suppression: ``if (...) { break; }``); kspec's threads and host chunks take several elements
    each, which a bare one would skip. So a body that says ``break`` or ``continue`` goes inside
    ``do { } while (0)`` and one that says ``return`` inside a lambda called on the spot; others as written
    (the words are looked for anywhere, comments included: a needless wrapper costs nothing)."""
    if re.search(_BREAK, operation):
        operation = f"do {{\n{operation};\n}} while (0)"
    if re.search(_RETURN, operation):
        operation = f"[&]() {{\n{operation};\n}}()"
    return operation


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
    ``RawKernel(code)`` / ``RawModule(code=...)`` (kspec/kernels/raw/_module.py). CCCL headers (``cuda/...``),
    CuPy's headers, kspec's complex header and ``cuComplex`` need "complex", which names CCCL: the ``cuda/``
    headers and cupy/cuda_workaround.h (<cuda/std/cstdint>; all of CCCL's std headers under
    :func:`uses_cuda_std`) include it, kspec's complex header no longer does. ``translate_cucomplex`` needs
    "complex" too.
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


# Code that names CCCL's libcu++ (``cuda::std``). <cupy/cuda_workaround.h> takes std's names from kspec's own
# header (namespace kspec_std, ~0.03 s of NVRTC time) unless KSPEC_CUDA_STD is defined; then it is CuPy's
# exactly: CCCL's four std headers (~1.1 s), which code written for CuPy may rely on to declare cuda::std::...
# after including only that header. A mention in a comment counts: "yes" is always correct, only slower.
_CUDA_STD = r"\bcuda\s*::\s*std\b"


def uses_cuda_std(texts: Iterable[str]) -> bool:
    """Whether kernel code (a raw source; an elementwise or reduction kernel's preamble and expressions) names
    ``cuda::std``: then the templates define KSPEC_CUDA_STD before it. The one rule, used by the raw template
    and the elementwise / reduction prologue (kspec/render/_render.py)."""
    return any(re.search(_CUDA_STD, text) for text in texts)


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


# CuPy's indexer inside an elementwise body: `_ind.get()` / `_ind.set(j)` (the n-d index of the element over the
# loop's shape), `_ind.ndim` (the loop's rank), `_raw_<name>` (CuPy's CArray of a non-raw array operand over the
# loop), and `_ind.size()`.
_LOOP_INDEX = re.compile(r"\b_ind\s*\.\s*(?:(?:get|set)\s*\(|ndim\b)")
_LOOP_SIZE = re.compile(r"\b_ind\s*\.\s*size\s*\(")
_RAW_VIEW = r"\b_raw_(\w+)\b"
_RAW_VIEWS = re.compile(_RAW_VIEW)
_FLAT_INDEX = re.compile(r"\bi\b")  # the element's flat C-order index (and every other `i`: a loop variable, a field)


class IndexerUse(NamedTuple):
    """What an elementwise body uses of CuPy's indexer (:func:`indexer_use`)."""

    indexed: bool  # `_ind.get()`, `_ind.set()` or a `_raw_<operand>` view: the loop's dims matter
    views: tuple[str, ...]  # the array operands whose `_raw_<name>` view it names
    sized: bool  # `_ind.size()` (a ptrdiff_t, CuPy's type; so `i` is declared with that type too)
    flat: bool = True  # names `i`: the loop must run its elements in C order (kspec/kernels/planning/_plan.py)
    # `loop_prep` / `after_loop` code: what it declares lives per thread, and a body may change it (cupyx.signal's
    # parzen window adds to it). CuPy launches a thread per element, so each element starts from loop_prep's
    # state; a body with such code runs one element per thread here too (no vectors, tiles or chunks).
    thread_state: bool = False
    # `_ind.get()`, `_ind.set()` or `_ind.ndim`: the body reads the n-d index itself. A body that names views only
    # (ndimage's kernels: `_raw_y.shape()`) gets a dense entry too, which the planner launches where every array
    # operand is C-contiguous over the loop: it addresses them by the flat index and unravels nothing
    # (templates/elementwise_indexed.cu.j2)
    reads_index: bool = True


NO_INDEXER = IndexerUse(False, (), False, False)  # reductions, and bodies that use none of it


def indexer_use(
    texts: Iterable[str], array_names: Iterable[str], preamble: str = "", per_thread: Iterable[str] = ()
) -> IndexerUse:
    """What kernel code (operation, loop_prep, after_loop) uses of CuPy's indexer; ``array_names``: the non-raw
    array operands (a ``_raw_<name>`` of another name is the code's own), in the order ``views`` keeps.
    ``flat``: the code or the preamble (whose macros the code may expand) names ``i``; a body that does not may
    run its elements in any order, which the planner uses to put the dims with the smallest strides innermost.

    ``indexed`` picks the template and launch variants that provide the n-d index and the views (the strided
    entry, with the loop's dims as CuPy's kernel sees them); ``indexed`` or ``sized`` declares ``i`` a
    ptrdiff_t, as CuPy does, so that ``i`` and ``_ind.size()`` mix as they do there. A mention in a comment
    counts: "yes" is always correct, only slower. A body that mentions none of them renders as if this did not
    exist. ``per_thread``: the code run once per thread (loop_prep, after_loop), part of the code too.
    """
    per_thread = [text for text in per_thread if text.strip()]
    texts = [*texts, *per_thread]
    named: set[str] = set()
    for text in texts:
        named.update(_RAW_VIEWS.findall(text))
    views = tuple(name for name in array_names if name in named)
    index_named = any(_LOOP_INDEX.search(text) for text in texts)
    indexed = bool(views) or index_named
    sized = any(_LOOP_SIZE.search(text) for text in texts)
    flat = indexed or any(_FLAT_INDEX.search(text) for text in [*texts, preamble])
    reads_index = index_named or bool(_LOOP_INDEX.search(preamble))  # a preamble's macro may read it in the body
    return IndexerUse(indexed, views, sized, flat, bool(per_thread), reads_index)


# What a ReductionKernel's code could name of CuPy's reduction indexer and that kspec does not provide: the n-d
# indices of `_in_ind` / `_out_ind` and `_raw_<operand>` views (kspec orders and merges a reduction's dims its own
# way, so CuPy's layouts would be wrong). `_in_ind.size()` / `_out_ind.size()` and `_J` are provided.
_REDUCTION_INDEX = r"\b_(?:in|out)_ind\s*\.\s*(?:get|set)\s*\("
_REDUCTION_NAMES = re.compile(rf"{_REDUCTION_INDEX}|{_RAW_VIEW}")
_SPACE_OR_PAREN = re.compile(r"\s|\(")


def reduction_indexer_names(texts: Iterable[str], array_names: Iterable[str]) -> list[str]:
    """The names of CuPy's reduction indexer that reduction code (map, reduce and post-map expressions) uses and
    kspec does not provide, as the code spells them (``_raw_x``, ``_in_ind.get``), in order of first use."""
    found: list[str] = []
    arrays = set(array_names)
    for text in texts:
        for match in _REDUCTION_NAMES.finditer(text):
            name = match.group(1)
            if name is not None and name not in arrays:
                continue  # the code's own `_raw_...` name
            spelled = match.group(0) if name is not None else _SPACE_OR_PAREN.sub("", match.group(0))
            if spelled not in found:
                found.append(spelled)
    return found
