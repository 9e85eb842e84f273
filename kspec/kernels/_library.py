"""``kspec.load``: the kernels of spec files as callables, in a namespace.

``kernels = kspec.load("specs")`` then ``kernels.squared_diff(x, y)``. Elementwise and reduction specs
become :class:`ElementwiseKernel` / :class:`ReductionKernel`; a raw spec becomes a :class:`RawKernel` when
it exposes one plain kernel, else a :class:`RawModule` (``kernels.mod.get_function("fx3<float>")``).
Nothing is compiled here: each kernel compiles on its first call (from the binary cache when it is warm).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._errors import KspecTypeError, KspecValueError
from ..spec import plain_spec
from .binaries import BinaryStore, binary_store


if TYPE_CHECKING:
    from ..spec import AnySpec


def callable_of(spec: AnySpec, binaries: BinaryStore | None = None) -> Any:
    """The kernel object a spec describes (elementwise and reduction kernels load from ``binaries`` first)."""
    from ..render import specialize
    from ..spec import ElementwiseSpec, RawSpec, ReductionSpec
    from ._elementwise import ElementwiseKernel
    from .raw import RawModule, raw_callable
    from ._reduction import ReductionKernel

    if isinstance(spec, ElementwiseSpec):
        return ElementwiseKernel.from_spec(spec, binaries=binaries)
    if isinstance(spec, ReductionSpec):
        return ReductionKernel.from_spec(spec, binaries=binaries)
    assert isinstance(spec, RawSpec)
    if spec.is_binary:
        return RawModule(path=spec.resolved_path())
    if spec.tune is not None:  # a tuning space: each call runs its record's config
        from .planning import records_for
        from .raw import TunedKernel

        return TunedKernel(spec.tuned_table(), binaries, records_for(binaries, spec.origin))
    return raw_callable(spec.read_source(), tuple(spec.kernels), tuple(spec.name_expressions), binaries,
                         lambda: specialize(spec).key, options=tuple(spec.options),
                         translate_cucomplex=spec.translate_cucomplex, enable_cooperative_groups=spec.cooperative)


class KernelLibrary:
    """The kernels of some spec files by name: attributes (``lib.saxpy``), ``lib["saxpy"]``, iteration."""

    def __init__(self, specs: Iterable[AnySpec], *, binaries: Any = None) -> None:
        store = binary_store(binaries)
        self._specs: dict[str, AnySpec] = {}
        self._kernels: dict[str, Any] = {}
        for spec in specs:
            self._specs[spec.name] = spec
            self._kernels[spec.name] = callable_of(spec, store)

    @classmethod
    def _of_kernels(cls, kernels: dict[str, Any], specs: dict[str, Any]) -> "KernelLibrary":
        """A library of ``kernels`` by name, each a kernel object or a :class:`_Deferred` one (made on first
        use: a generated module of many kernels pays at import only for those it calls)."""
        library = object.__new__(cls)
        library._specs, library._kernels = specs, kernels
        return library

    def _kernel(self, name: str) -> Any:
        kernel = self._kernels[name]
        if type(kernel) is _Deferred:
            kernel = self._kernels[name] = kernel.make()
        return kernel

    def __getattr__(self, name: str) -> Any:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return self._kernel(name)
        raise AttributeError(
            f"no kernel named {name!r} in this library (it has: {', '.join(sorted(kernels)) or 'none'})"
        )

    def __getitem__(self, name: str) -> Any:
        if name not in self._kernels:
            raise KspecValueError(
                f"no kernel named {name!r} in this library (it has: {', '.join(sorted(self._kernels)) or 'none'})"
            )
        return self._kernel(name)

    def __contains__(self, name: object) -> bool:
        return name in self._kernels

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self._kernels]

    def spec(self, name: str) -> AnySpec:
        """The spec a kernel was made from."""
        spec = self._specs[name]
        if hasattr(spec, "validated"):  # a plain spec of a generated module: its model, validated now
            spec = self._specs[name] = self._kernel(name).spec
        return spec

    def __repr__(self) -> str:
        return f"<kspec.KernelLibrary {len(self)} kernels: {', '.join(self._kernels)}>"


def load(
    path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *, binaries: str | os.PathLike[str] | None = None
) -> KernelLibrary:
    """Load spec files (a directory, one file, or several) as a namespace of kernel callables.

    ``binaries``: a ``kspec build`` output directory; elementwise and reduction kernels load their binary
    for the device from it (no NVRTC) and compile only what it lacks. Invalid specs raise
    :class:`kspec.SpecErrorGroup` listing every error with its file and kernel.
    """
    if isinstance(path, (str, os.PathLike)):
        paths = [path]
    elif isinstance(path, Iterable) and not isinstance(path, (bytes, Mapping)):
        paths = list(path)
    else:
        raise KspecTypeError(f"path: expected a spec file or directory (str or os.PathLike) or several, got {type(path).__name__}")
    from ..spec import load_library

    store = binary_store(binaries)  # before reading specs: a wrong binaries= is reported as such
    library = load_library(paths)
    return KernelLibrary((library[name] for name in library), binaries=store)


def load_specs(specs: Iterable[Mapping[str, Any]], *, binaries: str | os.PathLike[str] | None = None) -> KernelLibrary:
    """A namespace of kernels from spec tables (``kspec.spec.spec_to_data`` of each), as generated modules
    embed them. ``binaries`` as for :func:`load`; a directory without a manifest is ignored (a package
    shipped without binaries compiles on first call).

    Tables the serving path reads as they are (what ``kspec generate`` writes) become kernel objects on
    first use; any other table is validated by the spec models here, so its errors surface at import."""
    # binaries=<package>/_binaries may be absent (a wheel built with compiling skipped): then kernels compile
    store = binary_store(binaries, optional=True)
    kernels: dict[str, Any] = {}
    found: dict[str, Any] = {}
    for table in specs:
        table = dict(table)
        spec = _served(table, store)
        if spec is None:  # not a table this fast path reads: the spec models validate it
            from ..spec import parse_spec

            spec = parse_spec(table)
            kernel = callable_of(spec, store)
        elif isinstance(spec, _PlainRaw):
            kernel = _Deferred(spec.make_kernel)
        else:
            kernel = _Deferred(lambda spec=spec: _plain_callable(spec, store))
        found[spec.name], kernels[spec.name] = spec, kernel
    # the machinery of a kind (planning, the call path, binary lookup: ~60 modules, ~20 ms on an H200 host) loads
    # at the first call of one of its kernels, not here: importing a deployed package costs little more than
    # numpy. A program that wants its first call to launch at once loads it ahead at its
    # start (kspec.kernels.preload_call_path)
    return KernelLibrary._of_kernels(kernels, found)


class _Deferred:
    """A kernel not made yet: ``make()`` makes it (KernelLibrary replaces the entry with the result)."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make


def _plain_callable(spec: Any, binaries: BinaryStore | None) -> Any:
    if spec.KIND == "elementwise":
        from ._elementwise import ElementwiseKernel

        return ElementwiseKernel.from_plain(spec, binaries=binaries)
    from ._reduction import ReductionKernel  # only a module that calls a reduction loads its machinery

    return ReductionKernel.from_plain(spec, binaries=binaries)


def _served(table: dict[str, Any], binaries: BinaryStore | None) -> Any:
    """A generated module's table as the serving path takes it, without the spec models: a plain spec
    (elementwise, reduction), or None (validate with the models). The tables were written from validated
    specs by ``kspec generate``; kspec/spec/_plain.py says why a table edited by hand is still safe."""
    if table.get("kind") == "raw":
        return _plain_raw(table, binaries)
    return plain_spec(table)


_RAW_FIELDS = {"kind": str, "name": str, "doc": str, "source": str, "kernels": list, "name_expressions": list,
               "options": list, "translate_cucomplex": bool, "cooperative": bool,
               "launch": dict, "attributes": dict,  # launch and attributes: data callable_of does not use either
               "tune": dict}  # a tuning space: a TunedKernel (kspec/kernels/raw/_tuned.py)


class _PlainRaw:
    """A raw table served without the spec models: the table (for ``library.spec``) and how to make its
    kernel object (deferred: see load_specs)."""

    KIND = "raw"

    def __init__(self, table: dict[str, Any], binaries: BinaryStore | None) -> None:
        self.name, self._table, self._binaries = table["name"], table, binaries

    def validated(self) -> Any:
        from ..spec import parse_spec

        return parse_spec(dict(self._table))

    def make_kernel(self) -> Any:
        """What :func:`callable_of` makes of the table (the key: kspec.render.specialize of the same table)."""
        if "tune" in self._table:
            from .planning import records_for
            from .raw import TunedKernel

            return TunedKernel(self._table, self._binaries, records_for(self._binaries, None))
        from .raw import raw_kernel_of_table

        return raw_kernel_of_table(self._table, self._binaries)


def _plain_raw(table: dict[str, Any], binaries: BinaryStore | None) -> _PlainRaw | None:
    """An inline raw table as the serving path takes it (a generated module's raw kernels are inline), or
    None for anything else (a path, launch defaults, attributes: the spec models take those)."""
    if not all(k in _RAW_FIELDS and isinstance(v, _RAW_FIELDS[k]) for k, v in table.items()) or "source" not in table:
        return None
    if not all(isinstance(x, str) for k in ("kernels", "name_expressions", "options") for x in table.get(k, [])):
        return None
    return _PlainRaw(table, binaries)
