"""Rendering: one Specialization -> one CUDA module (source, name expressions, launch ABI)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from .._errors import KspecTypeError
from ._abi import EntryAbi
from ._analysis import element_body, is_write_only, uses_cuda_std
from ._env import environment
from ._interface import ReduceItem, module_interface
from ._specialize import AnySpec, Specialization, _code_texts, c_type_of, specialize
from ._variants import VariantKey

if TYPE_CHECKING:
    from ..spec import RawSpec

# Kinds are told apart by KIND, not by model class: a plain spec (kspec.spec.PlainSpec, from a generated
# module or a constructor call) renders without importing Pydantic.
_TYPED = ("elementwise", "reduction")


def _kind(obj: object) -> str | None:
    kind = getattr(type(obj), "KIND", None)
    return kind if isinstance(kind, str) else None


@dataclass(frozen=True, eq=False)
class RenderedModule:
    """What the compiler and the launcher need from one rendered module: the source, the name expressions
    NVRTC resolves, and the :class:`ModuleInterface` fields. Raw modules have no variants and no ABI: their
    entries are ``name_expressions`` (the spec's kernels, then its name_expressions) and the user packs the
    arguments.
    """

    name: str
    kind: str  # "elementwise", "reduction" or "raw"
    key: str  # the specialization's content key
    source: str
    name_expressions: tuple[str, ...]
    variants: Mapping[VariantKey, str]
    abi: Mapping[VariantKey, EntryAbi]
    needs: frozenset[str]
    reduce_item: ReduceItem | None = None


# The templates of each device: CUDA for the GPU; for the CPU device (compiled by a host C++ compiler) the
# host forms in templates/host/, whose entries have the same names and parameter lists, so the launch ABI,
# the planner and the parameter frames serve both.
_TEMPLATES = {
    "cuda": {"elementwise": "elementwise.cu.j2", "reduction": "reduction.cu.j2"},
    "host": {"elementwise": "host/elementwise.cpp.j2", "reduction": "host/reduction.cpp.j2"},
}
# An elementwise body that uses CuPy's n-d indexer (Specialization.indexed) has a template of its own: one
# strided entry that unravels every element's index.
_INDEXED_TEMPLATES = {"cuda": "elementwise_indexed.cu.j2", "host": "host/elementwise_indexed.cpp.j2"}


def render(target: AnySpec | Specialization) -> RenderedModule:
    """Render a Specialization (or a spec without placeholders, or a raw spec) into CUDA source."""
    return _render(target, "cuda")


def render_host(target: AnySpec | Specialization) -> RenderedModule:
    """Render for kspec's CPU device: host C++ whose entries (same name expressions, variants and ABI as
    :func:`render`'s) run the loop on the host's threads. A raw module's source is the same for both."""
    return _render(target, "host")


def _render(target: AnySpec | Specialization, device: str) -> RenderedModule:
    if _kind(target) == "raw":
        return render_raw(cast("RawSpec", target))
    if _kind(target) in _TYPED:
        target = specialize(cast(AnySpec, target))
    if not isinstance(target, Specialization):
        raise KspecTypeError(f"render: expected a Specialization or a kernel spec, got {type(target).__name__}")
    if _kind(target.spec) == "raw":
        return render_raw(cast("RawSpec", target.spec))

    template = _INDEXED_TEMPLATES[device] if target.indexed else _TEMPLATES[device][target.kind]
    context = _elementwise_context(target) if target.kind == "elementwise" else _reduction_context(target)
    source = environment().get_template(template).render(**context)
    interface = module_interface(target)
    return RenderedModule(
        name=interface.name,
        kind=interface.kind,
        key=interface.key,
        source=source,
        name_expressions=target.name_expressions,
        variants=interface.variants,
        abi=interface.abi,
        needs=target.needs,
        reduce_item=interface.reduce_item,
    )


def raw_source(code: str, *, translate_cucomplex: bool = False) -> str:
    """The source NVRTC compiles for a raw module: the user's code behind the kspec headers it asked for.

    The one path for raw code, whether it comes from a spec file or from ``RawModule(code=...)``.
    """
    return environment().get_template("raw.cu.j2").render(
        source=code, translate_cucomplex=translate_cucomplex, cuda_std=uses_cuda_std([code])
    )


def render_raw(spec: RawSpec) -> RenderedModule:
    """A raw module: the spec's source (inline or from its .cu file), with the cuComplex translation header
    first when ``translate_cucomplex`` is set. Name expressions: the spec's kernels, then its name_expressions."""
    from ..spec import RawSpec  # only raw modules need the model (raw specs have no plain form)

    if not isinstance(spec, RawSpec):
        raise KspecTypeError(f"render_raw: expected a RawSpec, got {type(spec).__name__}")
    specialization = specialize(spec)
    source = raw_source(spec.read_source(), translate_cucomplex=spec.translate_cucomplex)
    return RenderedModule(
        name=spec.name,
        kind="raw",
        key=specialization.key,
        source=source,
        name_expressions=specialization.name_expressions,
        variants=MappingProxyType({}),
        abi=MappingProxyType({}),
        needs=specialization.needs,
    )


def _common_context(s: Specialization) -> dict[str, Any]:
    spec = s.spec
    assert spec.KIND in _TYPED
    binding = ", ".join(f"{letter}={dtype}" for letter, dtype in s.types.items())
    if s.scalars:
        binding = ", ".join(filter(None, [binding, "scalars: " + " ".join(sorted(s.scalars))]))
    cupy_headers = bool(getattr(spec, "cupy_headers", False))
    # the kernel's dtypes, for CuPy's float16 / bfloat16 classes (their headers, in CuPy's environment only)
    used = {op.dtype for op in s.operands} | set(s.types.values())
    if s.reduce_type is not None and s.reduce_type.dtype is not None:
        used.add(s.reduce_type.dtype)
    return {
        "name": s.name,
        "kind": s.kind,
        "key": s.key,
        "binding": binding,
        "need_macros": [f"KSPEC_NEED_{need.upper()}" for need in ("fp16", "bf16", "complex", "void") if need in s.needs],
        # the code names cuda::std: <cupy/cuda_workaround.h> is then CuPy's, CCCL's names (KSPEC_CUDA_STD)
        "cuda_std": uses_cuda_std(_code_texts(s.spec)),
        "extra_includes": [],
        # CuPy's implicit environment (M_PI, CArray, atomics...): kernels of the CuPy-style constructors
        "cupy_headers": cupy_headers,
        "cupy_classes": [f"cupy/{dtype}.cuh" for dtype in ("float16", "bfloat16") if cupy_headers and dtype in used],
        "typedefs": [(letter, c_type_of(dtype, cupy_headers)) for letter, dtype in s.types.items()],
        "preamble": spec.preamble.strip("\n"),
        "operands": s.operands,
        "vec": s.vec,
    }


def _elementwise_context(s: Specialization) -> dict[str, Any]:
    spec = s.spec
    assert spec.KIND == "elementwise"
    context = _common_context(s)
    context.update(
        operation=element_body(spec.operation.strip()),
        loop_prep=spec.loop_prep.strip(),
        after_loop=spec.after_loop.strip(),
        # outputs the vector path must load before the body runs (it reads them, or may not assign them)
        read_outputs=[
            op.name for op in s.operands if op.is_output and op.is_array and not is_write_only(spec.operation, op.name)
        ],
        # the strided path may load several elements into registers before running the body on them,
        # unless the body could write an input through its reference
        hoist_loads=not any(op.non_const and op.is_array and not op.is_output for op in s.operands),
        tiled=s.tiled,  # the module holds the tiled entry (transposed operands through shared memory)
        tile_span=s.tile_span if s.tiled else 1,  # tiles per block step of that entry
        # the indexed template's header: the loop's index and the views (no other module includes it)
        extra_includes=["kspec/loop_index.cuh"] if s.indexed else [],
        # the operands whose `_raw_<name>` view the body names (the indexed template declares them)
        views=[op for op in s.operands if op.name in s.indexer.views],
        # the body reads the n-d index itself (`_ind.get()`...): the indexed template's strided entry alone; else
        # its dense entry too (every operand addressed by the flat index)
        reads_index=s.indexer.reads_index,
        # `i` has CuPy's type where the body mixes it with `_ind` (the indexed template always declares it so)
        cupy_i=s.indexer.sized,
    )
    return context


def _reduction_context(s: Specialization) -> dict[str, Any]:
    spec = s.spec
    assert spec.KIND == "reduction" and s.reduce_type is not None
    context = _common_context(s)
    opaque = s.reduce_type.dtype is None
    context.update(
        extra_includes=["kspec/reduce.cuh"],
        # a dtype reduce type is typedef'd with the placeholders (the preamble may use it); a C type from
        # the spec after the preamble, which may be where it is defined
        early_typedefs=[] if opaque else [("_type_reduce", s.reduce_type.c_type)],
        late_reduce_typedef=opaque,
        reduce_c_type=s.reduce_type.c_type,
        map_expr=spec.map_expr.strip(),
        reduce_expr=spec.reduce_expr.strip(),
        post_map_expr=spec.post_map_expr.strip(),
        identity=spec.identity,
    )
    return context
