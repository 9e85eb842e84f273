"""Every launch variant of rendered modules compiles with the real NVRTC (no GPU) and every name resolves."""

from __future__ import annotations

import pytest

from kspec.compiler import CompileOptions, compile_source
from kspec.render import VariantKey, render, render_raw, specialize
from kspec.render._variants import DYNAMIC_NDIM, name_expression
from helpers.render_cases import ABS2, COMPILE_CASES, GENERIC, L2NORM, L2NORM_HALF, RAW_CUCOMPLEX, SQUARED_DIFF


def _compile(module, arch, name_expressions=None, extra=()):
    names = module.name_expressions if name_expressions is None else name_expressions
    return compile_source(
        module.source,
        name=module.name,
        options=CompileOptions(arch=arch, extra=tuple(extra)),
        name_expressions=names,
        needs=module.needs,
    )


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("spec", "types", "scalars"), [c[1:] for c in COMPILE_CASES], ids=[c[0] for c in COMPILE_CASES])
def test_every_variant_compiles(spec, types, scalars, arch):
    module = render(specialize(spec, types, scalars=scalars))
    program = _compile(module, arch)
    assert set(program.lowered_names) == set(module.name_expressions) == set(module.variants.values())
    assert all(program.lowered_names.values())
    assert "warning" not in program.log.lower(), program.log


def test_templates_take_every_index_type_and_rank():
    # The module compiles a trimmed list; the templates themselves take any (IndexT, NDIM, VEC).
    s = specialize(SQUARED_DIFF)
    module = render(s)
    every = [VariantKey("contig", index, 0, vec) for index in ("int32", "int64") for vec in (1, s.vec)] + [VariantKey("strided", index, nd) for index in ("int32", "int64") for nd in (1, 2, 3, 4, DYNAMIC_NDIM)]
    names = [name_expression(module.name, v) for v in every]
    assert set(_compile(module, "sm_90", names).lowered_names) == set(names)


def test_reduction_templates_take_int32():
    module = render(specialize(L2NORM, {"T": "float32"}))
    every = [
        VariantKey("rows", "int32", 1, 4),
        VariantKey("rows", "int32", 1, 1),
        VariantKey("rows", "int32", DYNAMIC_NDIM, 1),
        VariantKey("cols", "int32", DYNAMIC_NDIM, 1),
        VariantKey("split_final", "int32", 0, 1),
    ]
    names = [name_expression(module.name, v) for v in every]
    assert set(_compile(module, "sm_90", names).lowered_names) == set(names)


@pytest.mark.parametrize(("spec", "types"), [(L2NORM, {"T": "float32"}), (L2NORM_HALF, {}), (ABS2, {})], ids=["f32", "f16", "c64"])
def test_runtime_rank_cols_comes_with_and_without_vector_loads(spec, types):
    """A reduction module holds the runtime-rank cols entry twice (the planner picks one): VEC = vec loads vectors
    of adjacent outputs where the layout allows, VEC = 1 never does (its vectorised branch compiles out)."""
    import re

    s = specialize(spec, types)
    module = render(s)
    both = [VariantKey("cols", "int64", DYNAMIC_NDIM, vec) for vec in (1, s.vec)]
    assert s.vec > 1 and all(v in module.variants for v in both)
    wide_loads = {}  # 16-byte global loads (wider than one item of these inputs: a complex64 is a .v2.f32)
    for variant in both:  # one entry per program: its PTX is that entry's alone
        ptx = _compile(module, "compute_90", [module.variants[variant]]).binary
        text = ptx.decode() if isinstance(ptx, bytes) else ptx
        assert text.count(".entry ") == 1
        wide_loads[variant.vec] = re.findall(r"ld\.global(?:\.nc)?\.(?:v4\.[bfsu]32|v2\.[bfsu]64)", text)
    assert wide_loads[1] == [] and wide_loads[s.vec]


def test_templates_compile_under_cxx11():
    # CuPy code passes options=('-std=c++11',); kspec's templates and headers must not need C++17.
    module = render(specialize(SQUARED_DIFF))
    assert _compile(module, "sm_90", extra=("-std=c++11",)).lowered_names


def test_raw_module_with_cucomplex_translation_compiles():
    module = render_raw(RAW_CUCOMPLEX)
    program = _compile(module, "sm_90")
    assert program.lowered_names == {"cscale": "cscale"}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tiled_entry_compiles_for_every_operand_kind(arch):
    """The tiled entry (issue 17) with a read output, a write-only output, a scalar, a raw input and 16-bit,
    complex and bool operands; for (x - y)^2 in float32, no spills and two tiles of 32 x 33 floats per operand
    (three) of static shared memory. (A body with loop_prep / after_loop has no tiled entry: a thread per element.)"""
    from kspec.spec import ElementwiseSpec

    spec = ElementwiseSpec(
        name="tiled_mix",
        in_params="T x, raw T r, float32 s, bool m",
        out_params="T acc, U w",
        operation="acc = acc + (m ? x : r[i]) * (T)s; w = (U)acc",
    )
    assert not specialize(spec.model_copy(update={"loop_prep": "int calls = 0;"}), {"T": "float32", "U": "float16"}).tiled
    for types in ({"T": "float32", "U": "float16"}, {"T": "complex64", "U": "complex64"}, {"T": "float64", "U": "bfloat16"}):
        s = specialize(spec, types, scalars=("s",))
        module = render(s)
        tiled = VariantKey("tiled", "int32", DYNAMIC_NDIM, 32)
        assert tiled in module.variants
        assert _compile(module, arch, [module.variants[tiled]]).lowered_names[module.variants[tiled]]
    # the plain case: no spills (the tiles are static shared memory, the per-thread elements registers)
    module = render(specialize(GENERIC, {"T": "float32"}))
    name = module.variants[VariantKey("tiled", "int32", DYNAMIC_NDIM, 32)]
    program = _compile(module, arch, [name], extra=("--ptxas-options=-v",))
    assert "0 bytes spill stores" in program.log and "25344 bytes smem" in program.log, program.log


@pytest.mark.parametrize("arch", ["sm_90", "host"])
def test_tiled_entry_leaves_a_body_its_own_type_names(arch):
    """A body naming a type W or Z (cupyx.scipy.ndimage's interpolation kernels, interp1d): the tiled entry's
    own template parameters must not shadow them (its tile width is `_W`)."""
    import io

    import numpy as np

    import kspec

    k = kspec.ElementwiseKernel("W x, Z y", "W z", "W t = x - (W)y; z = t * t", "names_w_and_z")
    a, b = np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float64)
    assert any(v.entry == "tiled" for v in k.specialization(a, b, a).variants)
    k.compile(a, b, a, arch=arch, log_stream=io.StringIO())  # every entry, the tiled ones too (the host's: loops)


def test_tiled_entry_only_where_its_tiles_fit():
    from kspec.render._variants import TILE_SMEM_LIMIT, tile_bytes

    three_c128 = specialize(GENERIC, {"T": "complex128"})  # 3 x 16.5 KiB of tiles: over the limit
    assert tile_bytes([16, 16, 16]) > TILE_SMEM_LIMIT
    assert all(v.entry != "tiled" for v in three_c128.variants)
    assert any(v.entry == "tiled" for v in specialize(GENERIC, {"T": "float64"}).variants)
    assert all(v.entry != "tiled" for v in specialize(L2NORM, {"T": "float32"}).variants)  # reductions: none


def test_minimal_builtins_unless_the_code_may_need_them() -> None:
    """Elementwise and reduction modules compile with NVRTC's -minimal (about 10% faster) unless their code
    names a texture, surface or runtime API word, launches or includes a header; raw modules never."""
    import kspec

    def options(operation: str, preamble: str = "", spec_options: tuple[str, ...] = ()) -> tuple[str, ...]:
        k = kspec.ElementwiseKernel("float32 x", "float32 y", operation, "minimal_k", preamble=preamble,
                                    options=spec_options)
        return specialize(k.spec, {}).nvrtc_options

    assert options("y = x * 2") == ("-minimal",)
    assert options("y = tex1D<float>(t, x)") == ()
    assert options("y = x", preamble="#include <cuda_fp16.h>") == ()
    assert options("cudaError_t e = cudaSuccess; y = x") == ()
    assert options("y = x * 2", spec_options=("--minimal",)) == ("--minimal",)
    assert options("y = x * 2", spec_options=("-lineinfo",)) == ("-lineinfo", "-minimal")
