"""A CUDA source that checks the C types of ufunc expressions (tests of kspec/fuse's ufunc tables): one array
parameter per dtype, and ``KSPEC_CHECK(T, expr)``, a static_assert that ``expr`` has C type ``T``."""

from __future__ import annotations

from kspec.dtypes import BY_NAME
from kspec.fuse._ufuncs import headers

PRELUDE = """
template <class A, class B> struct kspec_same { static const bool value = false; };
template <class A> struct kspec_same<A, A> { static const bool value = true; };
template <class A> struct kspec_bare { typedef A type; };
template <class A> struct kspec_bare<const A> { typedef A type; };
template <class A> struct kspec_bare<A&> { typedef typename kspec_bare<A>::type type; };
#define KSPEC_CHECK(T, E) static_assert(kspec_same<typename kspec_bare<decltype(E)>::type, T>::value, #T " <- " #E)
"""


def kernel_source(name: str, dtypes: set[str], lines: list[str]) -> tuple[str, tuple[str, ...]]:
    """(source, needs): a kernel with one array parameter per dtype (``p_<dtype>``, its element ``v_<dtype>``)
    whose body is ``lines``."""
    needs = {BY_NAME[d].header for d in dtypes if BY_NAME[d].header}
    macros = "".join(f"#define KSPEC_NEED_{n.upper()} 1\n" for n in sorted(needs))
    params = ", ".join(f"{BY_NAME[d].c_type}* p_{d}" for d in sorted(dtypes))
    loads = "".join(f"  const {BY_NAME[d].c_type} v_{d} = p_{d}[i];\n  (void)v_{d};\n" for d in sorted(dtypes))
    body = "".join(f"  {line}\n" for line in lines)
    source = (f"{macros}#include <kspec/types.cuh>\n{headers(dtypes)}\n{PRELUDE}\n"
              f'extern "C" __global__ void {name}({params}) {{\n  const int i = threadIdx.x;\n{loads}{body}}}\n')
    return source, tuple(sorted(needs))
