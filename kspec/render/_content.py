"""What of a spec's data decides its binary: the part of the table a content key hashes.

Fields that name, document, schedule or list builds of a kernel never change the code NVRTC sees, so two tables
that differ only in them share one key: a CuPy-style constructor call then finds the binary a spec file's build
of the same code filed (a captured kernel is served by content), and a spec's doc comment or tuning
cases can be edited without a rebuild.

- typed kernels (elementwise, reduction): without ``doc``, ``tune``, ``instantiations``, ``specializations``;
  ``cuda_name`` (the kernel's name in C++) stands for ``name``, so a captured spec renamed to stay unique in its
  library keys as the constructor call it came from.
- raw modules: the program alone (source text, options, the template instantiations its name expressions make,
  the cuComplex translation) and its ``tune`` space; not its library name, file path, launch defaults or
  attributes (a ``RawKernel(code, name)`` call keys as a spec file's raw kernel of the same code).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import json

from .._digest import sha256_hex
from .._resources import TEMPLATE_VERSION, templates_digest

_NOT_CODE = frozenset({"doc", "tune", "instantiations", "specializations"})


def content_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a spec table (``to_data()``, plus ``source_text`` for a raw one) that decides its binary."""
    if data.get("kind") == "raw":
        return raw_content_data(
            str(data.get("source_text", data.get("source", ""))),
            data.get("options", ()),
            (*data.get("kernels", ()), *data.get("name_expressions", ())),
            bool(data.get("translate_cucomplex", False)),
            data.get("tune"),
        )
    out = {k: v for k, v in data.items() if k not in _NOT_CODE}
    cuda_name = out.pop("cuda_name", None)
    if cuda_name is not None:
        out["name"] = cuda_name
    return out


def raw_content_data(source: str, options: Sequence[str], name_expressions: Sequence[str],
                     translate_cucomplex: bool = False, tune: Any = None) -> dict[str, Any]:  # fmt: skip
    """A raw module's program as key data: what ``RawModule(code=...)`` and a raw spec of that code share.

    Of the name expressions, only template-ids (``f<float>``) are code: they instantiate templates. A plain name
    (``scale``, ``ns::k``) only asks NVRTC for a symbol the module has anyway, so a ``RawModule(code)`` whose
    ``get_function("scale")`` finds it, a ``RawKernel(code, "scale")`` and a spec listing ``kernels = ["scale"]``
    share one key (the spec's build records the lowered names of all of them)."""
    out: dict[str, Any] = {"kind": "raw", "source_text": source}
    if options:
        out["options"] = list(options)
    instantiating = sorted({e for e in name_expressions if "<" in e})
    if instantiating:
        out["name_expressions"] = instantiating
    if translate_cucomplex:
        out["translate_cucomplex"] = True
    if tune is not None:
        out["tune"] = tune
    return out


def content_key(data: Mapping[str, object], binding: Mapping[str, str], scalars: frozenset[str],
                raw_layouts: Mapping[str, tuple[int, bool]] | None = None) -> str:  # fmt: skip
    """The sha256 (hex) naming one specialization of a spec table: what decides its binary (:func:`content_data`),
    the placeholder binding, the inputs passed by value, fixed raw layouts, the templates and their version."""
    payload: dict[str, object] = {
        "template_version": TEMPLATE_VERSION,
        "templates": templates_digest(),
        "spec": content_data(data),
        "types": dict(sorted(binding.items())),
        "scalars": sorted(scalars),
    }
    if raw_layouts:  # only then: the keys of every other specialization stay as they were
        payload["raw_layouts"] = sorted((name, list(layout)) for name, layout in raw_layouts.items())
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return sha256_hex(text.encode())


def raw_module_key(source: str, options: Sequence[str], name_expressions: Sequence[str],
                   translate_cucomplex: bool = False) -> str:  # fmt: skip
    """The content key of a raw module's program, as a ``RawModule(code=...)`` call holds it: the key a raw
    spec of the same code is built under (``kspec build``), so the constructor call finds that binary."""
    return content_key(raw_content_data(source, options, name_expressions, translate_cucomplex), {}, frozenset())
