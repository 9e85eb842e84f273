"""Which names a kernel or parameter may have.

CuPy only rejects ``i``; a C/C++ keyword then fails deep inside NVRTC. kspec checks up front.
"""

from __future__ import annotations

import re

from .._errors import InvalidNameError, ReservedNameError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# C11 and C++20 keywords plus the alternative operator spellings: none of them can name a variable.
CPP_KEYWORDS = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t
    class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
    decltype default delete do double dynamic_cast else enum explicit export extern false float for friend
    goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private
    protected public register reinterpret_cast requires restrict return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    """.split()
)

# Names kspec's templates define inside every kernel body (``n`` is deliberately NOT here: CuPy code in
# the wild names parameters ``n`` and kspec's templates never define it).
RESERVED_PARAM_NAMES = frozenset({"i"})


def check_identifier(name: object, *, what: str, field: str) -> str:
    """Return ``name`` if it can name a C variable or function, else raise ``InvalidNameError``."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise InvalidNameError(
            f"{what} {name!r} is not a valid C identifier (letters, digits and '_', not starting with a digit)",
            field=field,
        )
    if name in CPP_KEYWORDS:
        raise InvalidNameError(f"{what} {name!r} is a C/C++ keyword; choose another name", field=field)
    return name


# Macros the headers a kernel may include define (NVRTC's built-ins, the CUDA runtime headers, fp16/bf16,
# libcu++ <cuda/std/complex>, kspec's own headers, CuPy's that kspec provides: M_PI, CUPY_FOR, CUPY_TYPE_*):
# a parameter of that name is rewritten by the
# preprocessor and fails to compile far from its cause. Found by compiling a probe that includes all of
# them (tests/spec_tests/test_hostile_specs.py repeats the probe and checks this rule still covers what it finds).
_MACRO_PATTERN = re.compile(
    r"(?:NV|CCCL|KSPEC|LIBCUDACXX|CUDART|CUDA|CUPY|CU)_\w*|cuda[A-Z]\w*"
    r"|U?INT\w*_(?:MAX|MIN|C)|(?:FLT|DBL|LDBL|FP)_\w+"
    r"|[SU]?(?:CHAR|SHRT|INT|LONG|LLONG)_(?:MAX|MIN|BIT)|(?:SIZE|PTRDIFF|INTPTR|UINTPTR)_(?:MAX|MIN)\Z"
)
_MACRO_NAMES = frozenset(
    "NULL INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL EOF assert offsetof DECIMAL_DIG IF_DEVICE_OR_CUDACC M_PI".split()
)


def is_macro_name(name: str) -> bool:
    """Whether ``name`` is (or may be) a macro of the headers kspec kernels include."""
    return name in _MACRO_NAMES or _MACRO_PATTERN.match(name) is not None


def check_param_name(name: object, *, field: str) -> str:
    """A parameter name: an identifier, not a keyword, not ``i``, not starting with ``_``, not a macro."""
    check_identifier(name, what="parameter name", field=field)
    assert isinstance(name, str)
    if is_macro_name(name):
        raise ReservedNameError(
            f"parameter name {name!r} is a macro of the CUDA headers kernels include; the preprocessor would "
            "replace it (choose another name)",
            field=field,
        )
    if name in RESERVED_PARAM_NAMES:
        raise ReservedNameError(
            f"parameter name {name!r} is reserved: 'i' is the loop index inside the kernel", field=field
        )
    if name.startswith("_"):
        raise ReservedNameError(
            f"parameter name {name!r} is reserved: names starting with '_' are kspec's internals", field=field
        )
    return name
