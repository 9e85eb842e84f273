"""Raw spec tables to kernel objects: a RawKernel for one plain kernel, else a RawModule, with the binary a
``kspec build`` filed under the table's content key (kspec.load, generated modules and tuned kernels)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...render import specialization_key
from ..binaries import BinaryStore


def raw_callable(source: str, kernels: tuple[str, ...], name_expressions: tuple[str, ...], binaries: BinaryStore | None,
                 key: Any, **options: Any) -> Any:
    """A raw spec's kernel object: a RawKernel for one plain kernel, else a RawModule; with ``binaries``, its
    module loads the binary ``kspec build`` filed under ``key()`` first. ``options``: the constructors'."""
    from ._module import RawKernel, RawModule

    from ...compiler import single_kernel  # the rule `kspec warm` follows too (kspec/compiler/_raw_program.py)

    kernel: RawKernel | None = None
    if single_kernel(kernels, name_expressions):
        kernel = RawKernel(source, kernels[0], **options)
        module = kernel._module
    else:
        module = RawModule(code=source, name_expressions=name_expressions or None, **options)
    if binaries is not None:
        (kernel if kernel is not None else module)._use_binaries(binaries, key())
    return kernel if kernel is not None else module


def raw_kernel_of_table(table: Mapping[str, Any], binaries: BinaryStore | None) -> Any:
    """The kernel object of an inline raw spec table, its binary found in ``binaries`` under the table's content
    key (kspec.render.specialize of the same table: what ``kspec build`` files it under)."""
    source = table["source"]
    return raw_callable(
        source, tuple(table.get("kernels", [])), tuple(table.get("name_expressions", [])), binaries,
        lambda: specialization_key({**table, "source_text": source}, {}, frozenset()),
        options=tuple(table.get("options", ())), translate_cucomplex=table.get("translate_cucomplex", False),
        enable_cooperative_groups=table.get("cooperative", False),
    )
