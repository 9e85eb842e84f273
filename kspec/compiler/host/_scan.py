"""What kspec's CPU device needs to know about a CUDA C++ source before the host compiler builds it.

:func:`scan_host_source` finds the plain ``__global__`` functions, whether any block or warp synchronisation
is used (then a block's threads run as fibers, else one after another), refuses what the host cannot
emulate (textures, inline PTX, grid-wide sync...) with :class:`kspec.HostUnsupportedError`, and rewrites
``extern __shared__ T name[];`` into a pointer to the block's dynamic shared memory.

Comments and string literals are ignored, and so are the regions the host compiler never sees
(``#ifndef KSPEC_HOST``, ``#ifdef __CUDA_ARCH__``, ``#if 0`` up to their ``#else``/``#endif``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..._errors import HostUnsupportedError, about_kernel


@dataclass(frozen=True)
class HostScan:
    """The scan of one source: its plain kernels' names, whether it synchronises, the rewritten source."""

    kernels: tuple[str, ...]
    uses_sync: bool
    source: str


# (construct as the message names it, pattern) for what the CPU device refuses.
_REFUSED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (what, re.compile(pattern))
    for what, pattern in (
        ("textures", r"\btex(?:1D|2D|3D|Cubemap)\w*\s*[<(]|\btexture\s*<|\bcudaTextureObject_t\b"),
        ("surfaces", r"\bsurf(?:1D|2D|3D|Cubemap)\w*(?:read|write)\b|\bsurface\s*<|\bcudaSurfaceObject_t\b"),
        ("inline PTX (asm)", r"\basm\s*(?:volatile\s*|__volatile__\s*|goto\s*)?\(|\b__asm__\b|\b__asm\b"),
        ("cooperative grid synchronisation (this_grid / grid_group)",
         r"\bthis_grid\s*\(|\bgrid_group\b|\bthis_multi_grid\s*\(|\bmulti_grid_group\b"),
        ("thread block clusters (this_cluster / cluster_group)", r"\bthis_cluster\s*\(|\bcluster_group\b"),
        ("kernel launches from device code (dynamic parallelism)", r"<<<|\bcudaLaunchDevice\b|\bcudaGetParameterBuffer\b"),
        ("asynchronous barriers and pipelines (cuda::barrier, cuda::pipeline)",
         r"\bcuda::(?:barrier|pipeline)\s*<|\bcuda::memcpy_async\b|\b__pipeline_\w+|\bmake_pipeline\s*\("),
        ("warp matrix operations (wmma)", r"\bwmma::|\bnvcuda::"),
    )
)

# Block/warp synchronisation and warp-level exchange: a kernel using any of them runs its threads as fibers.
_SYNC = re.compile(
    r"\b(?:__syncthreads(?:_count|_and|_or)?|__syncwarp|__shfl(?:_up|_down|_xor)?(?:_sync)?|__ballot(?:_sync)?"
    r"|__any(?:_sync)?|__all(?:_sync)?|__uni_sync|__activemask|__reduce_\w+_sync|__match_(?:any|all)_sync"
    r"|coalesced_threads)\b"
    # cooperative groups: g.sync(), cg::sync(g), cg::wait(g), cg::reduce(tile, ...), tile.shfl_down(...)...
    r"|(?:::|\.)\s*(?:sync|wait|wait_prior|reduce|inclusive_scan|exclusive_scan|shfl\w*|ballot|any|all|match_\w+)\s*[<(]"
    r"|\b(?:sync|wait|wait_prior)\s*[<(]"
)

_GLOBAL = re.compile(r"\b__global__\b")
_LAUNCH_BOUNDS = re.compile(r"\b__(?:launch_bounds|cluster_dims)__\s*\((?:[^()]|\([^()]*\))*\)")
_EXTERN_SHARED = re.compile(r"\bextern\s+(?P<before>[^;{}]*?)\b__shared__\b(?P<after>[^;{}]*?);")
_UNSIZED_ARRAY = re.compile(r"^(?P<type>.*?)\b(?P<name>[A-Za-z_]\w*)\s*\[\s*\]$", re.S)
_ALIGNMENT = re.compile(r"\b(?:__align__|alignas)\s*\([^()]*\)")
_STATIC_SHARED = re.compile(r"\bstatic\s+__shared__\b|\b__shared__\s+static\b")
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)((?:[^\n]*\\\n)*[^\n]*)$", re.M)  # with its continued lines
_LITERAL_OR_COMMENT = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)"
    r'|\b(?:u8|[uUL])?R"(?P<delimiter>[^(\s"]*)\(.*?\)(?P=delimiter)"'
    r'|"(?:\\.|[^"\\\n])*"'
    r"|(?<![0-9])'(?:\\.|[^'\\\n])*'",  # after a digit, ' separates digits (1'000'000)
    re.S,
)
_NOT_NAMESPACE_SCOPE = re.compile(r"\bnamespace\b|\bextern\s*\"[^\"]*\"\s*$|\b(?:struct|class|union|enum)\b[^()]*$")

# Conditions the host compiler sees as false (their #else branch is live) and as true.
_FALSE_ON_HOST = re.compile(
    r"^(?:ifndef\s+KSPEC_HOST|if\s+!\s*defined\s*\(?\s*KSPEC_HOST\s*\)?|ifdef\s+__CUDA_ARCH__"
    r"|if\s+defined\s*\(?\s*__CUDA_ARCH__\s*\)?|if\s+__CUDA_ARCH__\s*(?:>=?\s*[1-9]\d*|!=\s*0)?|if\s+0)\s*$"
)
_TRUE_ON_HOST = re.compile(
    r"^(?:ifdef\s+KSPEC_HOST|if\s+defined\s*\(?\s*KSPEC_HOST\s*\)?|ifndef\s+__CUDA_ARCH__"
    r"|if\s+!\s*defined\s*\(?\s*__CUDA_ARCH__\s*\)?|if\s+1)\s*$"
)


def scan_host_source(source: str, name: str) -> HostScan:
    """Scan ``source`` (of the module or kernel ``name``, which messages name) for the CPU device."""
    code = _live_code(_mask_comments_and_strings(source))
    structure = _blank_directives(code)
    for what, pattern in _REFUSED:
        match = pattern.search(code)
        if match:
            line = source.count("\n", 0, match.start()) + 1
            text = source.splitlines()[line - 1].strip()
            raise HostUnsupportedError(
                about_kernel(name, f"the CPU device cannot run {what} (line {line}: {text}); run it on a GPU")
            )
    return HostScan(
        kernels=_kernel_names(structure),
        uses_sync=bool(_SYNC.search(code)),
        source=_rewrite_shared(source, structure, name),
    )


def _mask_comments_and_strings(source: str) -> str:
    """``source`` with comments and the contents of string and character literals turned into spaces (line
    breaks kept, so positions and line numbers stay those of ``source``)."""

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        if text[0] in "/":
            return re.sub(r"[^\n]", " ", text)
        quote = 0 if text[0] in "\"'" else text.index('"')  # keep the quotes (after a raw string's prefix)
        return text[:quote + 1] + re.sub(r"[^\n]", " ", text[quote + 1:-1]) + text[-1]

    return _LITERAL_OR_COMMENT.sub(blank, source)


def _live_code(masked: str) -> str:
    """``masked`` with the regions the host compiler skips blanked (see the module docstring)."""
    out = list(masked)
    # one frame per open #if: is this branch dead; did an earlier or this branch surely get taken ("taken"),
    # surely not ("not taken"), or is that unknown
    stack: list[tuple[bool, str]] = []
    dead_start: int | None = None
    for match in _DIRECTIVE.finditer(masked):
        keyword, rest = match.group(1), match.group(2)
        directive = f"{keyword} {rest.strip()}".strip()
        was_dead = any(is_dead for is_dead, _ in stack)
        if keyword in ("if", "ifdef", "ifndef"):
            if _FALSE_ON_HOST.match(directive):
                stack.append((True, "not taken"))
            elif _TRUE_ON_HOST.match(directive):
                stack.append((False, "taken"))
            else:
                stack.append((False, "unknown"))
        elif keyword in ("elif", "else") and stack:
            status = stack[-1][1]
            if status == "taken":
                stack[-1] = (True, "taken")
            elif status == "not taken" and keyword == "else":
                stack[-1] = (False, "taken")
            else:
                stack[-1] = (False, "unknown")
        elif keyword == "endif" and stack:
            stack.pop()
        now_dead = any(is_dead for is_dead, _ in stack)
        if not was_dead and now_dead:
            dead_start = match.end()
        elif was_dead and not now_dead and dead_start is not None:
            _blank(out, dead_start, match.start())
            dead_start = None
    if dead_start is not None:
        _blank(out, dead_start, len(out))
    return "".join(out)


def _blank(out: list[str], start: int, end: int) -> None:
    for k in range(start, end):
        if out[k] != "\n":
            out[k] = " "


def _blank_directives(code: str) -> str:
    """``code`` without its preprocessor lines and launch bounds: the C++ structure alone."""
    out = list(code)
    for match in _DIRECTIVE.finditer(code):
        _blank(out, match.start(), match.end())
    for match in _LAUNCH_BOUNDS.finditer(code):
        _blank(out, match.start(), match.end())
    return "".join(out)


def _statement_start(structure: str, position: int) -> int:
    """Where the declaration holding ``position`` starts: after the last ``;``, ``{`` or ``}`` before it."""
    return max(structure.rfind(c, 0, position) for c in ";{}") + 1


def _kernel_names(structure: str) -> tuple[str, ...]:
    names: list[str] = []
    for match in _GLOBAL.finditer(structure):
        if re.search(r"\btemplate\b", structure[_statement_start(structure, match.start()):match.start()]):
            continue
        paren = structure.find("(", match.end())
        head = re.search(r"([A-Za-z_]\w*)\s*$", structure[match.end():paren]) if paren >= 0 else None
        if head and head.group(1) not in names:
            names.append(head.group(1))
    return tuple(names)


def _in_function(structure: str, position: int) -> bool:
    """Whether ``position`` is inside a function body (not at namespace, extern "C" or class scope)."""
    stack: list[bool] = []  # per open brace: is it a function or block body
    for k, c in enumerate(structure[:position]):
        if c == "{":
            head = structure[_statement_start(structure, k):k]
            stack.append(not _NOT_NAMESPACE_SCOPE.search(head))
        elif c == "}" and stack:
            stack.pop()
    return any(stack)


def _rewrite_shared(source: str, structure: str, name: str) -> str:
    """``extern __shared__ T name[];`` -> a pointer to the block's dynamic shared memory (a local constant in
    a function; a macro at namespace scope, followed by a #line so that line numbers stay the source's);
    ``static __shared__`` -> ``__shared__`` (the host's __shared__ is already static)."""
    edits: list[tuple[int, int, str]] = []
    for match in _EXTERN_SHARED.finditer(structure):
        declaration = _ALIGNMENT.sub(" ", match.group("before") + " " + match.group("after")).strip()
        array = _UNSIZED_ARRAY.match(declaration)
        if not array or not array.group("type").strip():
            line = source.count("\n", 0, match.start()) + 1
            raise HostUnsupportedError(about_kernel(
                name, f"the CPU device cannot run this extern __shared__ declaration, which is not `extern __shared__ "
                f"T name[];` (line {line}: {source.splitlines()[line - 1].strip()}); run it on a GPU"))
        ctype, variable = " ".join(array.group("type").split()), array.group("name")
        pointer = f"reinterpret_cast<{ctype}*>(::kspec_host::dynamic_shared())"
        if _in_function(structure, match.start()):
            text = f"{ctype}* const {variable} = {pointer};"
        else:
            line = source.count("\n", 0, match.start()) + 1
            text = f"\n#define {variable} ({pointer})\n#line {line}\n"
        edits.append((match.start(), match.end(), text))
    for match in _STATIC_SHARED.finditer(structure):
        edits.append((match.start(), match.end(), "__shared__"))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source
