"""The result of a compile: what the runtime loads and what the cache stores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class CompiledProgram:
    """A compiled module.

    ``binary`` is a CUBIN (``format == "cubin"``) or PTX text (``"ptx"``, ending in NUL as NVRTC returns it,
    ready for ``cuModuleLoadData``). ``lowered_names`` maps each name expression (``"fx3<float>"``) to the
    symbol in the binary (``"_Z3fx3IfEvPT_i"``); an ``extern "C"`` name passed as an expression maps to
    itself. It is stored with the binary because mangled names cannot be turned back into expressions.
    ``compile_ms`` is 0.0 when the program came from a cache.
    """

    binary: bytes
    format: str
    arch: str
    lowered_names: Mapping[str, str] = field(hash=False)
    log: str
    nvrtc_version: tuple[int, int]
    compile_ms: float

    def __post_init__(self) -> None:
        # Read-only, so a program shared through the in-memory cache cannot be altered by one caller.
        object.__setattr__(self, "lowered_names", MappingProxyType(dict(self.lowered_names)))
        object.__setattr__(self, "nvrtc_version", tuple(self.nvrtc_version))

    def __reduce__(self):  # type: ignore[no-untyped-def]  # a mappingproxy does not pickle; a dict does
        return (
            CompiledProgram,
            (self.binary, self.format, self.arch, dict(self.lowered_names), self.log, self.nvrtc_version,
             self.compile_ms),
        )
