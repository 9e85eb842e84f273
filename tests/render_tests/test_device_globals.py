"""kspec's kernels define no device globals they do not need (real NVRTC, no GPU).

NVRTC makes every static data member that a kernel's code instantiates a device global (``.nv.global``),
constexpr or not, used or not, and the driver allocates, initialises and relocates a module's globals on
every load: on an H200 (driver 580) a one-kernel CUBIN with 14 one-byte globals loads in 79 us against 19 us
without them (benchmarks/NOTES.md v33), which every first call of a kernel pays. So kspec's headers spell
their compile-time constants as enumerators, and a reduction keeps its ``<name>__reduce_type_info`` only
where the launcher reads it (a reduce type that is not one of kspec's dtypes).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import kspec
from helpers import jit_kernels
from helpers.cubin_symbols import device_globals
from kspec.compiler import CompileOptions, compile_source
from kspec.render import render, specialize
from helpers.render_cases import COMPILE_CASES

ARCH = "sm_90"
INCLUDE = Path(kspec.__file__).resolve().parents[1] / "templates" / "include"


def _globals(module, extra=()) -> list[str]:
    program = compile_source(module.source, name=module.name, options=CompileOptions(arch=ARCH, extra=tuple(extra)),
                             name_expressions=module.name_expressions, needs=module.needs)  # fmt: skip
    return device_globals(program.binary)


def test_nvrtc_makes_a_static_data_member_a_device_global():
    """The premise: a constant as a static data member costs a global; as an enumerator it costs none."""
    member = 'template <int N> struct C { static constexpr int value = N; };\n'
    enumerator = 'template <int N> struct C { enum : int { value = N }; };\n'
    body = 'extern "C" __global__ void k(float* x) { for (int i = 0; i < C<2>::value; ++i) x[i] *= 2; }\n'
    found = [device_globals(compile_source(head + body, name="k", options=CompileOptions(arch=ARCH)).binary)
             for head in (member, enumerator)]  # fmt: skip
    assert found == [["_ZN1CILi2EE5valueE"], []]


@pytest.mark.parametrize(("spec", "types", "scalars"), [c[1:] for c in COMPILE_CASES], ids=[c[0] for c in COMPILE_CASES])
def test_elementwise_and_reduction_modules_define_none(spec, types, scalars):
    """Every variant of each module (contiguous, strided, tiled; reductions' rows, cols, slab, split): no
    global, but the reduce type's size for the one reduction whose reduce type is a C struct."""
    s = specialize(spec, types, scalars=scalars)
    opaque = s.reduce_type is not None and s.reduce_type.itemsize is None
    assert _globals(render(s)) == ([f"{s.name}__reduce_type_info"] if opaque else [])


def test_fused_kernels_define_none():
    """kspec.fuse's kernels include the ufunc header (integer traits), half and complex types."""

    @kspec.fuse()
    def mixed(x, y):
        return (x // y) % 7 + (x >> 2), np.sqrt(np.abs(x.astype(np.float16)))

    @kspec.fuse()
    def complex_sum(x):
        return (x * x).sum(axis=0)

    ints = np.ones(4, np.int32)
    specs = [*mixed.specs(ints, ints), *complex_sum.specs(np.ones((4, 4), np.complex64))]
    assert [(s.name, _globals(render(specialize(s)))) for s in specs] == [(s.name, []) for s in specs]


def test_jit_kernels_define_none():
    f32 = np.ones(4, np.float32)
    for kernel, args in [(jit_kernels.saxpy, (np.float32(2), f32, f32, f32, np.int32(4))),
                         (jit_kernels.control_flow, (f32, f32, np.int32(4)))]:  # fmt: skip
        spec = kernel.spec(*args)
        assert _globals(render(spec), getattr(spec, "options", ()) or ()) == [], spec.name


# A static data member in a header: `static const int n = 1;` / `static constexpr T value = v;` (not a function).
_MEMBER = re.compile(r"^\s*static\s+(?:constexpr|const)\s+[\w:<>, ]+?\s+\w+\s*(?:=|;|\[)", re.M)
# The standard library's own API (kspec/std_lite.cuh stands in for it on NVRTC) and CuPy's CArray keep their
# declared members: user code may take their address or their type; kernels using them pay as under CuPy.
_STANDARD_API = {"kspec/std_lite/type_traits.cuh", "kspec/std_lite/limits.cuh", "cupy/carray.cuh"}


def test_headers_declare_constants_as_enumerators():
    """Caught here even where no compiled case above instantiates the header."""
    found = []
    for path in sorted(INCLUDE.rglob("*.cuh")):
        name = path.relative_to(INCLUDE).as_posix()
        if name in _STANDARD_API:
            continue
        found += [f"{name}: {m.group(0).strip()}" for m in _MEMBER.finditer(path.read_text())]
    assert found == []
