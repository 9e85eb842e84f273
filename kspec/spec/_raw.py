"""Raw kernel specs (CuPy's RawModule / RawKernel as data) and their launch defaults and attributes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import StrictBool, StrictInt, StrictStr, field_validator, model_validator

from .._binfmt import HEAD_BYTES, content_problem
from .._tuning import TuningError, check_space, config_table
from .._errors import DuplicateNameError, SpecError
from ._base import _is_int, _KernelSpec, _shown, _SpecModel
from ._names import check_identifier


class LaunchDefaults(_SpecModel):
    """Launch configuration a raw kernel uses when the caller gives none."""

    block: int | tuple[int, ...] = 128
    shared_mem: StrictInt = 0

    @field_validator("block", mode="before")
    @classmethod
    def _check_block(cls, v: object) -> int | tuple[int, ...]:
        # Checked by hand before Pydantic sees it: spec values are never converted ("128", 128.0, true).
        dims = (v,) if _is_int(v) else tuple(v) if isinstance(v, (list, tuple)) else None
        if dims is None or not all(_is_int(d) for d in dims):
            raise SpecError(f"block must be an int or a list of 1 to 3 ints, got {_shown(v)}", field="launch.block")
        if not 1 <= len(dims) <= 3 or any(d <= 0 for d in dims):
            raise SpecError(f"block must be a positive int or 1 to 3 positive ints, got {v!r}", field="launch.block")
        if len(dims) == 3 and dims[2] > 64:
            raise SpecError(f"block {v!r}: CUDA allows at most 64 threads along z", field="launch.block")
        total = 1
        for d in dims:
            total *= d
        if total > 1024:
            raise SpecError(f"block {v!r} has {total} threads; CUDA allows at most 1024", field="launch.block")
        return v if _is_int(v) else tuple(dims)  # type: ignore[return-value]

    @field_validator("shared_mem")
    @classmethod
    def _check_shared(cls, v: int) -> int:
        if v < 0:
            raise SpecError(f"shared_mem must be >= 0 bytes, got {v}", field="launch.shared_mem")
        if v > MAX_SHARED_MEM:
            raise SpecError(
                f"shared_mem must be at most {MAX_SHARED_MEM} bytes (the driver takes an unsigned 32-bit count), got {v}",
                field="launch.shared_mem",
            )
        return v


# The largest values the driver API can take: cuLaunchKernel's sharedMemBytes is an unsigned int, function
# attributes are ints. Whether a device has that much shared memory is checked by the driver at launch.
MAX_SHARED_MEM = 2**32 - 1
MAX_ATTRIBUTE = 2**31 - 1


class KernelAttributes(_SpecModel):
    """Function attributes a raw kernel sets before its first launch."""

    max_dynamic_shared_size_bytes: StrictInt | None = None
    preferred_shared_memory_carveout: StrictInt | None = None

    @model_validator(mode="after")
    def _check(self) -> "KernelAttributes":
        m = self.max_dynamic_shared_size_bytes
        if m is not None and not 0 <= m <= MAX_ATTRIBUTE:
            raise SpecError(f"must be 0 to {MAX_ATTRIBUTE} bytes, got {m}", field="attributes.max_dynamic_shared_size_bytes")
        c = self.preferred_shared_memory_carveout
        if c is not None and not -1 <= c <= 100:
            raise SpecError(
                f"must be a percentage 0..100 or -1 (no preference), got {c}",
                field="attributes.preferred_shared_memory_carveout",
            )
        return self


_BINARY_SUFFIXES = (".cubin", ".ptx", ".fatbin")
_SOURCE_SUFFIXES = (".cu", ".cuh")


class RawSpec(_KernelSpec):
    """A raw CUDA module (CuPy's RawModule / RawKernel): source text or a path to .cu/.cubin/.ptx/.fatbin."""

    KIND: ClassVar[str] = "raw"
    kind: Literal["raw"] = "raw"
    source: StrictStr | None = None
    path: StrictStr | None = None
    kernels: tuple[StrictStr, ...] = ()
    name_expressions: tuple[StrictStr, ...] = ()
    cooperative: StrictBool = False
    translate_cucomplex: StrictBool = False
    launch: LaunchDefaults = LaunchDefaults()
    attributes: KernelAttributes = KernelAttributes()
    # the tuning space: kspec/_tuning.py gives its fields and rules; kspec tune times it
    tune: dict[str, Any] | None = None
    # kspec capture wrote it: the source failed to compile where it was captured, and the code that built it
    # relies on that (cuCIM's filters fall back to another kernel on CompileException); kspec build stores the
    # compiler's message in place of a binary, and a served call raises that compile error, with no compiler
    compile_fails: StrictBool = False

    @field_validator("kernels")
    @classmethod
    def _check_kernels(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for k, name in enumerate(v):
            check_identifier(name, what="kernel function name", field=f"kernels[{k}]")
        if len(set(v)) != len(v):
            raise DuplicateNameError("a kernel function is listed twice", field="kernels")
        return v

    @field_validator("name_expressions")
    @classmethod
    def _check_name_expressions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for k, expr in enumerate(v):
            if not expr.strip():
                raise SpecError("name expressions must be non-empty, like 'fx3<float>'", field="name_expressions")
            if not expr.isprintable():  # C++ names hold no newline or control character
                raise SpecError(f"{expr!r} holds a control character; a name expression is one line of C++, like "
                                "'fx3<float>'", field=f"name_expressions[{k}]")
        if len(set(v)) != len(v):
            raise DuplicateNameError("a name expression is listed twice", field="name_expressions")
        return v

    @model_validator(mode="after")
    def _check_source(self) -> "RawSpec":
        if (self.source is None) == (self.path is None):
            which = "both" if self.source is not None else "neither"
            raise SpecError(f"give exactly one of 'source' and 'path' ({which} given)", field="source")
        if self.source is not None and not self.source.strip():
            raise SpecError("source is empty", field="source")
        if self.path is not None:
            suffix = Path(self.path).suffix
            if suffix not in _BINARY_SUFFIXES + _SOURCE_SUFFIXES:
                allowed = ", ".join(_SOURCE_SUFFIXES + _BINARY_SUFFIXES)
                raise SpecError(f"path {self.path!r} must end in one of {allowed}", field="path")
            if self.is_binary and self.name_expressions:
                raise SpecError(
                    "name_expressions need a source to compile; a precompiled binary has fixed names", field="name_expressions"
                )
        if self.compile_fails and self.source is None:
            raise SpecError("compile_fails is for a source that fails to compile; give the source", field="compile_fails")
        if self.tune is not None:
            if self.is_binary:
                raise SpecError("a precompiled binary has nothing to tune; give the source", field="tune")
            try:
                check_space(self.tune, self.kernels, self.name_expressions)
            except TuningError as exc:
                raise SpecError(str(exc), field=exc.field) from None
        elif not self.kernels and not self.name_expressions:
            raise SpecError("list the kernel functions to expose in 'kernels' or 'name_expressions'", field="kernels")
        return self

    def config_spec(self, config: dict[str, int]) -> "RawSpec":
        """The spec of one config of the tuning space: what ``kspec build`` compiles and a tuned call loads
        (kspec/_tuning.py's config_table, the same table the serving path makes)."""
        if self.tune is None:
            raise SpecError("has no tuning space", field="tune", kernel=self.name)
        spec = RawSpec(**{k: v for k, v in config_table(self.tuned_table(), config).items() if k != "kind"})
        return spec.with_origin(self._origin)  # type: ignore[return-value]

    def tuned_table(self) -> dict[str, Any]:
        """The spec's table with its source inline (a ``path`` read): what a tuned kernel object keeps and each
        config's table is made from, so that the build and the runtime file a config under one key."""
        return {k: v for k, v in self.to_data().items() if k != "path"} | {"source": self.read_source()}

    @property
    def is_binary(self) -> bool:
        return self.path is not None and Path(self.path).suffix in _BINARY_SUFFIXES

    def resolved_path(self) -> Path | None:
        """``path`` relative to the spec file it came from (or the working directory)."""
        if self.path is None:
            return None
        p = Path(self.path)
        if not p.is_absolute() and self._origin is not None:
            p = self._origin.parent / p
        return p

    def check_path(self) -> None:
        """At validate, for a spec from a file: ``path`` lies under the spec file's directory, exists, and
        holds what its suffix says (an ELF CUBIN, a fatbin, PTX text, UTF-8 source). Builds and generated
        modules embed or ship this file, so a path out of the tree or a garbage binary is a spec error."""
        if self.path is None or self._origin is None:
            return
        root = self._origin.parent.resolve()
        resolved = self.resolved_path()
        assert resolved is not None
        target = resolved.resolve()
        if Path(self.path).is_absolute() or not target.is_relative_to(root):
            raise SpecError(
                f"path {self.path!r} leads out of the spec file's directory {str(root)!r}; raw kernel files must "
                "lie beside the spec file or under its directory",
                field="path",
            )
        if not target.is_file():
            what = "is not a file" if target.exists() else "does not exist"
            raise SpecError(f"path {self.path!r} {what} ({str(resolved)!r})", field="path")
        try:
            with target.open("rb") as handle:
                head = handle.read(HEAD_BYTES)
        except OSError as exc:
            raise SpecError(f"cannot read {self.path!r}: {exc.strerror}", field="path") from None
        problem = content_problem(Path(self.path).suffix, head)
        if problem:
            raise SpecError(f"path {self.path!r}: {problem}", field="path")

    def read_source(self) -> str:
        """The CUDA source: inline, or read from a .cu path."""
        if self.source is not None:
            return self.source
        path = self.resolved_path()
        assert path is not None
        if self.is_binary:
            raise SpecError(f"{self.path!r} is a binary, it has no source", field="path", kernel=self.name)
        try:
            return path.read_text()
        except OSError as exc:
            raise SpecError(f"cannot read {str(path)!r}: {exc.strerror}", field="path", kernel=self.name) from None

    def to_data(self) -> dict[str, Any]:
        data = super().to_data()
        for key in ("kernels", "name_expressions"):
            if key in data:
                data[key] = list(data[key])
        launch = data.get("launch")
        if isinstance(launch, dict) and isinstance(launch.get("block"), tuple):
            launch["block"] = list(launch["block"])
        return data
