"""``kspec.load``: the kernels of spec files as callables, in a namespace.

``kernels = kspec.load("specs")`` then ``kernels.squared_diff(x, y)``. Elementwise and reduction specs
become :class:`ElementwiseKernel` / :class:`ReductionKernel`; a raw spec becomes a :class:`RawKernel` when
it exposes one plain kernel, else a :class:`RawModule` (``kernels.mod.get_function("fx3<float>")``).
Nothing is compiled here: each kernel compiles on its first call (from the binary cache when it is warm).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._errors import KspecTypeError, KspecValueError
from ..render import specialize
from ..spec import ElementwiseSpec, RawSpec, ReductionSpec, load_library, parse_spec
from ..spec._models import AnySpec
from ._binaries import BinaryStore, binary_store
from ._elementwise import ElementwiseKernel
from ._raw import RawKernel, RawModule
from ._reduction import ReductionKernel


def callable_of(spec: AnySpec, binaries: BinaryStore | None = None) -> Any:
    """The kernel object a spec describes (elementwise and reduction kernels load from ``binaries`` first)."""
    if isinstance(spec, ElementwiseSpec):
        return ElementwiseKernel.from_spec(spec, binaries=binaries)
    if isinstance(spec, ReductionSpec):
        return ReductionKernel.from_spec(spec, binaries=binaries)
    assert isinstance(spec, RawSpec)
    if spec.is_binary:
        return RawModule(path=spec.resolved_path())
    source = spec.read_source()
    kernel: RawKernel | None = None
    if len(spec.kernels) == 1 and not spec.name_expressions:
        kernel = RawKernel(
            source,
            spec.kernels[0],
            options=spec.options,
            translate_cucomplex=spec.translate_cucomplex,
            enable_cooperative_groups=spec.cooperative,
        )
        module = kernel._module
    else:
        module = RawModule(
            code=source,
            options=spec.options,
            translate_cucomplex=spec.translate_cucomplex,
            enable_cooperative_groups=spec.cooperative,
            name_expressions=spec.name_expressions or None,
        )
    if binaries is not None:
        module._use_binaries(binaries, specialize(spec).key)  # the key `kspec build` filed its binary under
    return kernel if kernel is not None else module


class KernelLibrary:
    """The kernels of some spec files by name: attributes (``lib.saxpy``), ``lib["saxpy"]``, iteration."""

    def __init__(self, specs: Iterable[AnySpec], *, binaries: Any = None) -> None:
        store = binary_store(binaries)
        self._specs: dict[str, AnySpec] = {}
        self._kernels: dict[str, Any] = {}
        for spec in specs:
            self._specs[spec.name] = spec
            self._kernels[spec.name] = callable_of(spec, store)

    def __getattr__(self, name: str) -> Any:
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(
            f"no kernel named {name!r} in this library (it has: {', '.join(sorted(kernels)) or 'none'})"
        )

    def __getitem__(self, name: str) -> Any:
        try:
            return self._kernels[name]
        except KeyError:
            raise KspecValueError(
                f"no kernel named {name!r} in this library (it has: {', '.join(sorted(self._kernels)) or 'none'})"
            ) from None

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
        return self._specs[name]

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
    store = binary_store(binaries)  # before reading specs: a wrong binaries= is reported as such
    library = load_library(paths)  # type: ignore[arg-type]
    return KernelLibrary((library[name] for name in library), binaries=store)


def load_specs(specs: Iterable[Mapping[str, Any]], *, binaries: str | os.PathLike[str] | None = None) -> KernelLibrary:
    """A namespace of kernels from spec tables (``kspec.spec.spec_to_data`` of each), as generated modules
    embed them. ``binaries`` as for :func:`load`; a directory without a manifest is ignored (a package
    shipped without binaries compiles on first call)."""
    # binaries=<package>/_binaries may be absent (a wheel built with compiling skipped): then kernels compile
    return KernelLibrary((parse_spec(dict(table)) for table in specs), binaries=binary_store(binaries, optional=True))
