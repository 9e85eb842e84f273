"""The launch ABI as data matches what NVRTC compiles: struct layouts (static_asserts) and kernel parameter
lists (the PTX), so the launcher can pack arguments byte by byte without parsing C."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kspec import dtypes
from kspec.compiler import CompileOptions, compile_source
from kspec.render._abi import COLS_WIDE_ACC, COLS_WIDE_WARPS
from kspec.render import COLS_MAX_WARPS, MAX_NDIM, VariantKey, render, specialize
from kspec.render._abi import entry_abi
from kspec.render._layout import raw_view_layout
from helpers.render_cases import ARGMAX, AXPY, L2NORM, L2NORM_HALF, MAX_NO_IDENTITY, REVERSE, SQUARED_DIFF

MODULES = [
    (SQUARED_DIFF, {}, ()),
    (REVERSE, {"T": "float64"}, ()),
    (L2NORM, {"T": "float32"}, ()),
    (L2NORM_HALF, {}, ()),
    (MAX_NO_IDENTITY, {"T": "int8"}, ()),
    (ARGMAX, {}, ()),
    *[(AXPY, {"T": name}, ("a",)) for name in dtypes.NAMES],
]


def _rendered():
    return [render(specialize(spec, types, scalars=scalars)) for spec, types, scalars in MODULES]


def _layouts(modules):
    seen = {}
    for module in modules:
        for abi in module.abi.values():
            for slot in abi.slots:
                seen.setdefault(slot.layout.c_type, slot.layout)
    # every variant the templates can take, not only the trimmed lists
    for index in ("int32", "int64"):
        for ndim in (0, 1, 2, 3, 4):
            for kind in ("elementwise", "reduction"):
                entry = "strided" if kind == "elementwise" else "rows"
                operands = specialize(L2NORM, {"T": "float64"}).operands
                for slot in entry_abi(kind, VariantKey(entry, index, ndim, 1), operands).slots:
                    seen.setdefault(slot.layout.c_type, slot.layout)
    for ndim in (0, 1, 2, 3, 4):  # raw views whose rank a specialization fixes (kspec::RankedView)
        for c_contiguous in (True, False):
            layout = raw_view_layout("double", ndim, c_contiguous)
            seen.setdefault(layout.c_type, layout)
    return list(seen.values())


def test_struct_layouts_match_the_headers():
    asserts = [
        f"static_assert(KSPEC_MAX_NDIM == {MAX_NDIM}, \"KSPEC_MAX_NDIM\");",
        f"static_assert(KSPEC_COLS_MAX_WARPS == {COLS_MAX_WARPS}, \"KSPEC_COLS_MAX_WARPS\");",
        f"static_assert(KSPEC_COLS_WIDE_WARPS == {COLS_WIDE_WARPS}, \"KSPEC_COLS_WIDE_WARPS\");",
        f"static_assert(KSPEC_COLS_WIDE_ACC == {COLS_WIDE_ACC}, \"KSPEC_COLS_WIDE_ACC\");",
    ]
    for layout in _layouts(_rendered()):
        c = layout.c_type
        asserts.append(f'static_assert(sizeof({c}) == {layout.size}, "sizeof {c}");')
        asserts.append(f'static_assert(alignof({c}) == {layout.align}, "alignof {c}");')
        if layout.struct:
            for f in layout.fields:
                asserts.append(f'KSPEC_CHECK_OFFSET({f.offset}, {f.name}, {c});')
                asserts.append(f'static_assert(sizeof({c}::{f.name}) == {f.itemsize * f.count}, "{c}::{f.name}");')
    source = "\n".join(
        [
            # NVRTC 13.0 has no __builtin_offsetof (13.5 has): there only sizes and alignments are checked.
            "#if defined(__has_builtin)",
            "#if __has_builtin(__builtin_offsetof)",
            "#define KSPEC_CHECK_OFFSET(OFF, F, ...) static_assert(__builtin_offsetof(__VA_ARGS__, F) == OFF, #F)",
            "#endif",
            "#endif",
            "#ifndef KSPEC_CHECK_OFFSET",
            "#define KSPEC_CHECK_OFFSET(OFF, F, ...)",
            "#endif",
            "#define KSPEC_NEED_FP16 1",
            "#define KSPEC_NEED_BF16 1",
            "#define KSPEC_NEED_COMPLEX 1",
            "#include <kspec/types.cuh>",
            "#include <kspec/array.cuh>",
            "#include <kspec/reduce.cuh>",
            *asserts,
        ]
    )
    compile_source(source, name="abi_layouts", options=CompileOptions(arch="sm_90"), needs=("fp16", "bf16", "complex"))


_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.([a-z])(\d+)\s+[\w$]+(?:\[(\d+)\])?")


def _ptx_params(ptx: str) -> dict[str, list[tuple[int, int]]]:
    """Lowered entry name -> [(size, align)] of each parameter, from the PTX."""
    entries = {}
    for match in re.finditer(r"\.entry\s+([\w$]+)\s*\((.*?)\)", ptx, re.S):
        params = []
        for p in _PARAM.finditer(match.group(2)):
            align, bits, count = p.group(1), int(p.group(3)), p.group(4)
            size = bits // 8 * (int(count) if count else 1)
            params.append((size, int(align) if align else bits // 8))
        entries[match.group(1)] = params
    return entries


@pytest.mark.parametrize("index", range(len(MODULES)), ids=[f"{m[0].name}-{m[1]}" for m in MODULES])
def test_parameter_lists_match_the_ptx(index):
    spec, types, scalars = MODULES[index]
    module = render(specialize(spec, types, scalars=scalars))
    program = compile_source(
        module.source,
        name=module.name,
        options=CompileOptions(arch="compute_90"),
        name_expressions=module.name_expressions,
        needs=module.needs,
    )
    entries = _ptx_params(program.binary.rstrip(b"\0").decode())
    for variant, expression in module.variants.items():
        abi = module.abi[variant]
        expected = [(slot.layout.size, slot.layout.align) for slot in abi.slots]
        assert entries[program.lowered_names[expression]] == expected, expression


def test_parameter_buffer_offsets_follow_c_rules():
    module = render(specialize(AXPY, {"T": "complex128"}, scalars=("a",)))
    abi = module.abi[VariantKey("contig", "int64", 0, 1)]
    # size (8) | a: complex<double> aligned 16 at 16 | x, y, z pointers
    assert [s.name for s in abi.slots] == ["_size", "a", "x", "y", "z"]
    assert abi.offsets == (0, 16, 32, 40, 48) and abi.size == 56
    buffer = np.zeros((), abi.numpy_dtype())
    buffer["a"]["value"] = 1 + 2j
    buffer["z"]["value"] = 0xDEADBEEF
    raw = buffer.tobytes()
    assert len(raw) == 56
    assert np.frombuffer(raw[16:32], np.complex128)[0] == 1 + 2j
    assert int.from_bytes(raw[48:56], "little") == 0xDEADBEEF


def test_numpy_dtypes_reproduce_the_layouts():
    for module in _rendered():
        for abi in module.abi.values():
            whole = abi.numpy_dtype()
            assert whole.itemsize == abi.size
            for slot, offset in zip(abi.slots, abi.offsets):
                assert whole.fields[slot.name][1] == offset
                dt = slot.layout.numpy_dtype()
                assert dt.itemsize == slot.layout.size
                for f in slot.layout.fields:
                    assert dt.fields[f.name][1] == f.offset


def test_reduction_slots():
    module = render(specialize(ARGMAX))
    rows = module.abi[VariantKey("rows", "int64", 1, 4)]
    assert [(s.kind, s.name) for s in rows.slots] == [
        ("reduce_shape", "_reduce_shape"),
        ("group", "_group"),
        ("reduce_array", "x"),
        ("strided_array", "best"),
        ("strided_array", "at"),
        ("workspace", "_workspace"),
    ]
    final = module.abi[VariantKey("split_final", "int64", 0, 1)]
    assert [s.name for s in final.slots] == ["_reduce_shape", "best", "at", "_workspace"]
    cols = module.abi[VariantKey("cols", "int64", 1, 1)]
    assert [s.name for s in cols.slots] == ["_reduce_shape", "x", "best", "at", "_workspace"]
    cols = module.abi[next(v for v in module.abi if v.entry == "cols" and v.ndim == 0)]  # runtime rank: axes (0, 2)
    assert cols.slot("_reduce_shape").layout.field("red_extent").count == MAX_NDIM
    shape = rows.slot("_reduce_shape").layout
    assert [f.name for f in shape.fields] == ["out_size", "red_size", "kept_extent", "red_extent", "kept_ndim", "red_ndim"]
    assert shape.field("red_extent").count == 1 and shape.field("kept_extent").count == MAX_NDIM
    # an opaque reduce type: the launcher reads its size from the module
    assert module.reduce_item.itemsize is None and module.reduce_item.symbol == "argmax_pair__reduce_type_info"
    assert render(specialize(L2NORM_HALF)).reduce_item.itemsize == 4


def test_raw_view_layout():
    module = render(specialize(REVERSE, {"T": "float64"}))
    contig = VariantKey("contig", "int64", 0, 1)  # a body with raw operands has no vector variant
    view = module.abi[contig].slot("x")
    assert view.kind == "raw_view" and view.dtype == "float64"
    assert [(f.name, f.offset, f.count) for f in view.layout.fields] == [
        ("ptr_", 0, 1),
        ("size_", 8, 1),
        ("ndim_", 16, 1),
        ("c_contiguous_", 20, 1),
        ("shape_", 24, MAX_NDIM),
        ("strides_", 24 + 8 * MAX_NDIM, MAX_NDIM),
    ]
    assert view.layout.size == 24 + 16 * MAX_NDIM
    # a view whose rank the specialization fixes (kspec::RankedView) holds that many dims, as CuPy's CArray
    for ndim, c_contiguous, capacity in ((2, False, 2), (3, True, 3), (0, True, 1)):
        ranked = render(specialize(REVERSE, {"T": "float64"}, raw_layouts={"x": (ndim, c_contiguous)}))
        c_type = f"kspec::RankedView<T, {ndim}, {'true' if c_contiguous else 'false'}>"
        assert f"{c_type} x" in ranked.source
        layout = ranked.abi[contig].slot("x").layout
        assert [(f.name, f.offset, f.count) for f in layout.fields][-2:] == [
            ("shape_", 24, capacity), ("strides_", 24 + 8 * capacity, capacity)]
        assert layout.size == 24 + 16 * capacity


@pytest.mark.parametrize("spec_name", ["squared_diff_generic", "l2norm"])
def test_module_interface_is_what_render_gives_without_jinja(spec_name, monkeypatch):
    """Loading a precompiled binary needs only the interface, and it must not touch the templates."""
    from kspec.render import module_interface, render, specialize
    from kspec.render import _render
    from kspec.spec import load_library

    spec = load_library("specs")[spec_name]
    s = specialize(spec, {"T": "float32"})
    rendered = render(s)

    def no_jinja():
        raise AssertionError("module_interface rendered a template")

    monkeypatch.setattr(_render, "environment", no_jinja)
    interface = module_interface(s)
    assert (interface.name, interface.kind, interface.key) == (rendered.name, rendered.kind, rendered.key)
    assert dict(interface.variants) == dict(rendered.variants)
    assert dict(interface.abi) == dict(rendered.abi)
    assert interface.reduce_item == rendered.reduce_item
