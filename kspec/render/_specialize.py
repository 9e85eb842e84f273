"""Specialization: a spec with its placeholders bound and its scalar inputs chosen, plus a content key.

This is the unit of rendering and compiling: one Specialization -> one CUDA module that holds every
launch variant (see ``_variants``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, TYPE_CHECKING, Union

from .._named_tuple import NamedTuple
from .. import dtypes
from .._errors import KspecTypeError, KspecValueError, about_kernel
from ._analysis import (
    NO_INDEXER,
    IndexerUse,
    indexer_use,
    needs_from_text,
    needs_full_builtins,
    needs_of_raw_source,
)
from ._spec_checks import check_raw_layouts, check_scalars, refuse_reduction_indexer
from ._content import content_key as _key
from ._record import Record
from ._variants import (
    TILE_SMEM_LIMIT,
    VECTOR_BYTES,
    VariantKey,
    elementwise_variants,
    indexed_variants,
    name_expression,
    reduction_variants,
    tile_bytes,
    tile_span,
)

if TYPE_CHECKING:
    from ..spec import ElementwiseSpec, RawSpec, ReductionSpec

    AnySpec = Union[ElementwiseSpec, ReductionSpec, RawSpec]
else:
    # No spec import at run time: a kernel served from binaries specializes a plain spec
    # (kspec.spec.PlainSpec) without loading Pydantic. Kinds are told apart by KIND.
    AnySpec = Any

_KINDS = ("elementwise", "reduction", "raw")

# CuPy's C types where they differ from kspec's, in CuPy's kernel environment (a spec's ``cupy_headers``, the
# constructors' kernels). None today: float16 and bfloat16 values stay CUDA's __half / __nv_bfloat16 there too,
# because kspec's constructor kernels (and kspec's ufunc helpers they call) are written against those; CuPy's
# classes `float16` / `bfloat16` (cupy/float16.cuh, cupy/bfloat16.cuh) are declared beside them for code that
# names them. Making them the parameters' types broke __half code (issue 52's GPU run: `float16*` passed where
# `__half*` is expected). Same size and layout either way: the launch ABI does not depend on it.
CUPY_C_TYPES: dict[str, str] = {}


def c_type_of(dtype: str, cupy_headers: bool = False) -> str:
    """How a kernel spells ``dtype``: kspec's C type, or CuPy's in CuPy's kernel environment."""
    if cupy_headers and dtype in CUPY_C_TYPES:
        return CUPY_C_TYPES[dtype]
    return dtypes.BY_NAME[dtype].c_type

# TEMPLATE_VERSION (kspec/_resources.py) is bumped when the generated code or its ABI changes meaning in a
# way the template files do not show. The key also hashes every file under templates/, so an edited template
# can never reuse an old key.


class Operand(NamedTuple):
    """One kernel parameter as this specialization passes it."""

    name: str
    dtype: str  # canonical dtype name
    c_type: str  # spelling in the kernel: the placeholder letter (typedef'd) or the dtype's C type
    is_output: bool
    raw: bool  # a RawView, indexed by hand, not broadcast
    scalar: bool  # an input passed by value at this call
    non_const: bool
    # A raw operand's rank and C-contiguity when the specialization fixes them (RankedView), else -1 / False
    raw_ndim: int = -1
    raw_c_contiguous: bool = False

    @property
    def view_type(self) -> str:
        """The C type of a raw operand: kspec::RankedView where its rank is fixed, else kspec::RawView."""
        if self.raw_ndim < 0:
            return f"kspec::RawView<{self.c_type}>"
        return f"kspec::RankedView<{self.c_type}, {self.raw_ndim}, {'true' if self.raw_c_contiguous else 'false'}>"

    @property
    def is_array(self) -> bool:
        """An array operand of the loop (not raw, not a scalar): indexed by the kernel, and broadcast."""
        return not self.raw and not self.scalar

    @property
    def itemsize(self) -> int:
        return dtypes.BY_NAME[self.dtype].itemsize


class ReduceType(NamedTuple):
    """The accumulator type of a reduction (``_type_reduce``)."""

    c_type: str  # C spelling: a dtype's C type, or a C type from the spec (a preamble struct)
    dtype: str | None  # canonical dtype when it is one of kspec's dtypes; None for an opaque C type

    @property
    def itemsize(self) -> int | None:
        return None if self.dtype is None else dtypes.BY_NAME[self.dtype].itemsize


class Specialization(Record):
    """A spec, its placeholder binding and its scalar inputs: everything the rendered source depends on.

    Equal (and hashed) by :attr:`key` alone. Build with :func:`specialize`. A :class:`Record`
    (kspec/render/_record.py), not a dataclass: every process that launches a kernel defines the class.
    """

    __slots__ = ("spec", "types", "scalars", "key", "needs", "operands", "reduce_type", "indexer")
    spec: AnySpec
    types: Mapping[str, str]  # placeholder letter -> canonical dtype name
    scalars: frozenset[str]  # inputs passed by value at this call
    key: str  # sha256 hex over spec data, binding, scalars, TEMPLATE_VERSION and the templates
    needs: frozenset[str]  # heavy headers: "fp16", "bf16", "complex"
    operands: tuple[Operand, ...]
    reduce_type: ReduceType | None
    indexer: IndexerUse  # elementwise: what the body uses of CuPy's indexer (kspec/render/_analysis.py)

    def __init__(
        self,
        spec: AnySpec,
        types: Mapping[str, str],
        scalars: frozenset[str],
        key: str,
        needs: frozenset[str],
        operands: tuple[Operand, ...],
        reduce_type: ReduceType | None = None,
        indexer: IndexerUse = NO_INDEXER,
    ) -> None:
        self._store(spec, types, scalars, key, needs, operands, reduce_type, indexer)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Specialization) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return (f"Specialization(spec={self.spec!r}, types={self.types!r}, scalars={self.scalars!r}, "
                f"key={self.key!r}, needs={self.needs!r})")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # the binding is a read-only view, which does not pickle: it travels as a dict
        return _unpickle, (self.spec, dict(self.types), self.scalars, self.key, self.needs, self.operands,
                           self.reduce_type, self.indexer)

    @property
    def nvrtc_options(self) -> tuple[str, ...]:
        """The NVRTC options the module compiles with: the spec's, plus ``-minimal`` for an elementwise or
        reduction module whose code needs none of what that leaves out (``needs_full_builtins``)."""
        options = tuple(self.spec.options)
        if self.kind == "raw" or {"-minimal", "--minimal"} & set(options) or needs_full_builtins(_code_texts(self.spec)):
            return options
        return (*options, "-minimal")

    @property
    def name(self) -> str:
        """The kernel's name in its source: ``cuda_name`` where a spec gives one (a captured kernel renamed to
        stay unique in its library), else its name."""
        return getattr(self.spec, "cuda_name", None) or self.spec.name

    @property
    def kind(self) -> str:
        return self.spec.KIND

    @property
    def indexed(self) -> bool:
        """An elementwise body that uses CuPy's n-d indexer (``_ind.get()``, ``_ind.set()``, ``_raw_<operand>``):
        the module holds the indexed strided entry (and, for a body that reads no n-d index, the dense one:
        templates/elementwise_indexed.cu.j2), which the planner gives the loop's dims as CuPy's kernel sees them."""
        return self.indexer.indexed

    @property
    def vec(self) -> int:
        """Elements per 16-byte vector access of the contiguous paths (1: no vector variant).

        Sized by the widest element among the operands moved in vectors (elementwise: array inputs and
        outputs; reductions: array inputs), so that one moves 16 bytes and the others fewer. No vector
        variant when an array input is ``_non_const``: the body could write it through its reference, and
        a vector copy in registers would lose that write.
        None either for an elementwise body with raw operands (it gathers through them, and one element per
        thread keeps more of those loads in flight) or with state per thread (``IndexerUse.thread_state``).
        """
        moved = [op for op in self.operands if op.is_array and (self.kind == "elementwise" or not op.is_output)]
        if not moved or any(op.non_const and not op.is_output for op in moved):
            return 1
        if self.kind == "elementwise" and (self.indexer.thread_state or any(op.raw for op in self.operands)):
            return 1  # state per thread, or gathers through raw arrays: one element per thread (kspec/kernels/planning)
        if any(op.itemsize & (op.itemsize - 1) for op in moved):
            return 1  # an unstructured void of 3 or 5 bytes: a vector of them has no alignment to load it by
        return max(1, VECTOR_BYTES // max(op.itemsize for op in moved))

    @property
    def tiled(self) -> bool:
        """Whether the elementwise module holds the tiled entry: it has array operands, none of its array
        inputs is ``_non_const`` (the entry copies inputs to registers and tiles, where a write through the
        body's reference would be lost), it keeps no state per thread, and one tile per array operand fits in
        static shared memory."""
        arrays = [op for op in self.operands if op.is_array]
        return (
            self.kind == "elementwise"
            and not (self.indexed or self.contiguous_calls or self.indexer.thread_state)
            and bool(arrays)
            and not any(op.non_const and not op.is_output for op in arrays)
            and tile_bytes([op.itemsize for op in arrays]) <= TILE_SMEM_LIMIT
        )

    @property
    def contiguous_calls(self) -> bool:
        """The spec's ``layouts = "contiguous"``: no tiled entry, one strided one (:func:`elementwise_variants`)."""
        return getattr(self.spec, "layouts", "any") == "contiguous"

    @property
    def tile_span(self) -> int:
        """Tiles a block of the tiled entry takes per step (kspec/render/_variants.py, ``tile_span``)."""
        return tile_span([op.itemsize for op in self.operands if op.is_array])

    @property
    def variants(self) -> tuple[VariantKey, ...]:
        """Every launch variant the rendered module holds (none for a raw module)."""
        if self.kind == "elementwise":
            if self.indexed:
                return indexed_variants(dense=not self.indexer.reads_index)
            return elementwise_variants(self.vec, self.tiled, self.contiguous_calls)
        if self.kind == "reduction":
            return reduction_variants(self.vec)
        return ()

    def name_expression(self, variant: VariantKey) -> str:
        if variant not in self.variants:
            raise KspecValueError(about_kernel(self.name, f"no launch variant {variant}"))
        return name_expression(self.name, variant)

    @property
    def name_expressions(self) -> tuple[str, ...]:
        if self.kind == "raw":
            return (*self.spec.kernels, *self.spec.name_expressions)
        return tuple(name_expression(self.name, v) for v in self.variants)


def specialize(
    spec: AnySpec,
    types: Mapping[str, str] = MappingProxyType({}),
    *,
    scalars: Iterable[str] = (),
    raw_layouts: Mapping[str, tuple[int, bool]] = MappingProxyType({}),
) -> Specialization:
    """Bind ``spec``'s placeholders to dtypes (``{"T": "float32"}``) and mark the inputs passed as scalars.

    Every placeholder must be bound and no other letter given (KspecTypeError / KspecValueError naming the
    letter); dtype names go through kspec's table (aliases such as ``"f4"`` are accepted). ``scalars``
    names input parameters passed by value at this call (CuPy specialises ``f(x, 5)`` on it); a raw one
    among them is a plain value of its type there, as CuPy passes a scalar given for a raw parameter.
    ``raw_layouts`` fixes raw parameters' rank and C-contiguity (``{"x": (2, True)}``): the kernel then sees
    them as ``kspec::RankedView`` (CuPy compiles its kernels per rank and contiguity of each array; the
    CuPy-style constructors specialize so), and every call of the module must pass arrays of that layout.
    """
    if getattr(type(spec), "KIND", None) not in _KINDS:
        raise KspecTypeError(f"spec: expected an ElementwiseSpec, ReductionSpec or RawSpec, got {type(spec).__name__}")
    if isinstance(scalars, str):  # one name, not its letters
        scalars = (scalars,)
    scalar_set = frozenset(scalars)
    if spec.KIND == "raw":
        return _specialize_raw(spec, types, scalar_set)

    binding = _bind(spec, types)
    check_scalars(spec, scalar_set)
    layouts = check_raw_layouts(spec, raw_layouts, scalar_set)
    cupy_headers = bool(getattr(spec, "cupy_headers", False))
    operands = tuple(
        Operand(
            name=p.name,
            dtype=binding[p.type] if p.is_placeholder else p.type,
            c_type=p.type if p.is_placeholder else c_type_of(p.type, cupy_headers),
            is_output=is_output,
            raw=p.raw and p.name not in scalar_set,  # a raw input given a scalar is a plain value (CuPy's rule)
            scalar=p.name in scalar_set,
            non_const=p.non_const,
            raw_ndim=layouts[p.name][0] if p.name in layouts else -1,
            raw_c_contiguous=p.name in layouts and layouts[p.name][1],
        )
        for is_output, params in ((False, spec.in_params), (True, spec.out_params))
        for p in params
    )
    reduce_type = _reduce_type(spec, binding, operands, cupy_headers) if spec.KIND == "reduction" else None
    if spec.KIND == "reduction":
        refuse_reduction_indexer(spec, [op.name for op in operands if op.is_array])

    needs: set[str] = set(dtypes.headers_for({op.dtype for op in operands}))
    if reduce_type is not None and reduce_type.dtype is not None:
        needs |= dtypes.headers_for([reduce_type.dtype])
    needs |= needs_from_text(_code_texts(spec))
    # tune.cases (the calls kspec tune times) are not code: editing them recompiles nothing
    key = _key(spec.to_data(), binding, scalar_set, layouts)
    indexer = NO_INDEXER
    if spec.KIND == "elementwise":
        arrays = [op.name for op in operands if op.is_array]
        indexer = indexer_use([spec.operation], arrays, spec.preamble or "", (spec.loop_prep, spec.after_loop))
    return Specialization(
        spec=spec,
        types=MappingProxyType(binding),
        scalars=scalar_set,
        key=key,
        needs=frozenset(needs),
        operands=operands,
        reduce_type=reduce_type,
        indexer=indexer,
    )


def _specialize_raw(spec: RawSpec, types: Mapping[str, str], scalars: frozenset[str]) -> Specialization:
    if types:
        letter = next(iter(types))
        raise KspecValueError(about_kernel(spec.name, f"a raw kernel has no placeholders, got one for {letter!r}"))
    if scalars:
        raise KspecValueError(about_kernel(spec.name, "a raw kernel has no declared inputs to pass as scalars"))
    source = spec.read_source()
    needs = needs_of_raw_source(source, spec.translate_cucomplex)
    data = spec.to_data()
    data["source_text"] = source  # a spec that points at a .cu file must change key with the file
    return Specialization(
        spec=spec,
        types=MappingProxyType({}),
        scalars=scalars,
        key=_key(data, {}, scalars),
        needs=frozenset(needs),
        operands=(),
    )



def _unpickle(spec: AnySpec, types: dict[str, str], *rest: Any) -> Specialization:
    return Specialization(spec, MappingProxyType(types), *rest)

def _bind(spec: ElementwiseSpec | ReductionSpec, types: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(types, Mapping):
        raise KspecTypeError(f"types: expected a mapping of placeholder to dtype, got {type(types).__name__}")
    placeholders = spec.placeholders
    known = ", ".join(repr(p) for p in placeholders) or "none"
    binding: dict[str, str] = {}
    for letter, type_name in types.items():
        if letter not in placeholders:
            raise KspecValueError(
                about_kernel(spec.name, f"{letter!r} is not a type placeholder of this kernel (its placeholders: {known})")
            )
        name = dtypes.canonical_name(str(type_name)) if isinstance(type_name, str) else None
        if name is None:
            try:  # a NumPy dtype or scalar type
                name = dtypes.from_numpy(type_name).name
            except (KeyError, TypeError):
                raise KspecValueError(
                    about_kernel(
                        spec.name,
                        f"placeholder {letter!r} bound to {type_name!r}, which is not a dtype "
                        f"kspec supports ({', '.join(dtypes.NAMES)})",
                    )
                ) from None
        binding[letter] = name
    missing = [p for p in placeholders if p not in binding]
    if missing:
        users = [p.name for p in spec.params if p.type == missing[0]]
        used_by = f" (type of {', '.join(users)})" if users else " (the reduce_type)"
        raise KspecTypeError(
            about_kernel(spec.name, f"type placeholder {missing[0]!r}{used_by} is not bound; give it a dtype")
        )
    return {letter: binding[letter] for letter in placeholders}  # order of first use, for stable output


def _reduce_type(spec: ReductionSpec, binding: Mapping[str, str], operands: tuple[Operand, ...],
                 cupy_headers: bool) -> ReduceType:  # fmt: skip
    rt = spec.reduce_type
    if rt is None:  # CuPy's default: the first output's type
        first = next(op for op in operands if op.is_output)
        return ReduceType(first.c_type, first.dtype)
    if rt in dtypes.BY_C_TYPE:  # a C spelling of one of kspec's dtypes ("float", "complex<float>")
        return ReduceType(rt, dtypes.BY_C_TYPE[rt].name)
    if dtypes.is_placeholder(rt):
        return ReduceType(rt, binding[rt])
    name = dtypes.canonical_name(rt)
    if name is not None:  # a dtype name ("float16": CuPy's class in CuPy's environment)
        return ReduceType(c_type_of(name, cupy_headers), name)
    return ReduceType(rt, None)


def _code_texts(spec: ElementwiseSpec | ReductionSpec) -> list[str]:
    if spec.KIND == "elementwise":
        return [spec.preamble, spec.operation, spec.loop_prep, spec.after_loop]
    return [spec.preamble, spec.map_expr, spec.reduce_expr, spec.post_map_expr, spec.identity or "", spec.reduce_type or ""]


# The content key of a spec table (``to_data()``), a binding and scalar inputs, for callers that hold the
# table but no spec model (a generated module's raw kernels, served without Pydantic).
specialization_key = _key
