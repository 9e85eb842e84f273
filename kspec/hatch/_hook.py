"""``KspecBuildHook``: typed modules and precompiled kernels in a wheel, configured in pyproject.toml.

```toml
[tool.hatch.build.hooks.kspec]
specs = "specs"                          # spec files, relative to the project root
output = "src/my_package/kernels"        # the generated package, as a source path
archs = ["sm_80", "sm_90"]               # default: kspec's DEFAULT_ARCHS that the installed NVRTC supports
ptx = false                              # also ship PTX of the highest arch (forward compatibility)
skip-env = "KSPEC_SKIP_COMPILE"          # set to 1/true/yes/on: typed modules only, no binaries
jobs = 8                                 # parallel compiles (default: CPU count)
compile-timeout = 600                    # seconds per kernel compile, 0: none (default: KSPEC_COMPILE_TIMEOUT, else 600)
```

Wheel target only (an sdist ships the spec files, and a wheel built from it compiles them). A standard wheel
gets the generated modules and ``_binaries/`` (CUBINs + manifest.json) from a temporary directory, file by
file through ``force_include``; the wheel stays pure (``py3-none-any``): a CUBIN does not depend on the
Python version or the OS. An editable install imports from the source tree, so there the hook writes
into ``root/output`` itself (only files whose bytes changed) and :meth:`clean` removes what it wrote.
Needs NVRTC, never a GPU; never imports :mod:`kspec.runtime` or :mod:`kspec.kernels`.
"""

from __future__ import annotations

import difflib
import json
import keyword
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

from .._version import __version__
from .._errors import BuildHookError, CompileError, KspecValueError, SpecError, SpecErrorGroup
from ..build import (
    BINARY_SUFFIXES,
    INTERFACE_SUFFIX,
    MANIFEST_NAME,
    REGISTRATION_DIR,
    BuildResult,
    confined_file,
    plan_build,
    precompile_with_progress,
    read_manifest,
    registration_document,
    write_output,
)
from ..codegen import Generation, generate, sync_files
from ..compiler import HOST_ARCH, HOST_MARCH_ENV, arch_number, portable_host_march, check_arch, compile_timeout, default_archs, supported_archs
from ..spec import RawSpec, spec_files

OPTION = "tool.hatch.build.hooks.kspec"
COMMAND = f"kspec hatch build hook ([{OPTION}])"  # recorded in each generated module's header
BINARIES = "_binaries"  # next to the generated modules: they load with binaries=<their dir>/_binaries
DEFAULT_SKIP_ENV = "KSPEC_SKIP_COMPILE"

_OPTIONS = ("archs", "compile-timeout", "jobs", "output", "ptx", "skip-env", "specs")
# Keys hatchling itself reads from every hook's table.
_HATCH_KEYS = frozenset({"dependencies", "enable-by-default", "require-runtime-dependencies", "require-runtime-features"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _error(option: str, message: str) -> BuildHookError:
    return BuildHookError(f"{OPTION}.{option}: {message}")


def _project_path(value: object, option: str) -> str:
    """A relative path inside the project, normalized to POSIX form (``./src/x/`` -> ``src/x``)."""
    if not isinstance(value, str) or not value.strip():
        raise _error(option, f"expected a path relative to the project root (a string), got {value!r}")
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise _error(option, f"expected a path inside the project, relative to its root, got {value!r}")
    return path.as_posix()


@dataclass(frozen=True)
class HookOptions:
    """The validated ``[tool.hatch.build.hooks.kspec]`` table."""

    specs: str = "specs"
    output: str = ""
    archs: tuple[str, ...] | None = None  # None: the defaults, resolved when compiling (that needs NVRTC)
    ptx: bool = False
    skip_env: str = DEFAULT_SKIP_ENV
    jobs: int | None = None
    compile_timeout: float | None = None  # None: KSPEC_COMPILE_TIMEOUT, else the default (read when compiling)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], root: Path) -> "HookOptions":
        """Check every option; a :class:`BuildHookError` names the first wrong one in full."""
        if not isinstance(config, Mapping):
            raise BuildHookError(f"{OPTION}: expected a table, got {type(config).__name__}")
        for key in config:
            if key not in _OPTIONS and key not in _HATCH_KEYS:
                close = difflib.get_close_matches(str(key), _OPTIONS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise _error(str(key), f"unknown option{hint}; the options are {', '.join(_OPTIONS)}")

        specs = _project_path(config.get("specs", "specs"), "specs")
        if not (root / specs).is_dir():
            raise _error("specs", f"no directory {specs!r} in the project root {root} (the directory of spec files)")

        if "output" not in config:
            raise _error("output", "required: the source path of the generated package, e.g. 'src/my_package/kernels'")
        output = _project_path(config["output"], "output")
        name = PurePosixPath(output).name
        if not name.isidentifier() or keyword.iskeyword(name):
            raise _error("output", f"the generated package's name {name!r} is not a Python identifier")

        archs: tuple[str, ...] | None = None
        if "archs" in config:
            raw = config["archs"]
            if not isinstance(raw, list) or not raw:
                raise _error("archs", f"expected a non-empty list of targets such as ['sm_80', 'sm_90'], got {raw!r}")
            checked = []
            for i, arch in enumerate(raw):
                try:
                    checked.append(check_arch(arch, param=f"{OPTION}.archs[{i}]"))
                except KspecValueError as exc:
                    raise BuildHookError(str(exc)) from None
            archs = tuple(dict.fromkeys(checked))

        ptx = config.get("ptx", False)
        if not isinstance(ptx, bool):
            raise _error("ptx", f"expected true or false, got {ptx!r}")

        skip_env = config.get("skip-env", DEFAULT_SKIP_ENV)
        if not isinstance(skip_env, str) or not _ENV_NAME.fullmatch(skip_env):
            raise _error("skip-env", f"expected an environment variable name, got {skip_env!r}")

        jobs = config.get("jobs")
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise _error("jobs", f"expected a positive integer (parallel compiles), got {jobs!r}")

        timeout = config.get("compile-timeout")
        if timeout is not None:
            if isinstance(timeout, str) or not isinstance(timeout, (int, float)):  # a number in TOML, not its text
                raise _error("compile-timeout", f"expected seconds >= 0 (0: no limit), got {timeout!r}")
            try:
                timeout = compile_timeout(timeout, param=f"{OPTION}.compile-timeout")
            except KspecValueError as exc:
                raise BuildHookError(str(exc)) from None

        return cls(specs=specs, output=output, archs=archs, ptx=ptx, skip_env=skip_env, jobs=jobs,
                   compile_timeout=timeout)  # fmt: skip

    def skip_requested(self, environ: Mapping[str, str] = os.environ) -> bool:
        """Whether the ``skip-env`` variable asks for no compiling (1/true/yes/on; unset or 0/false/no/off: no)."""
        value = environ.get(self.skip_env, "").strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise BuildHookError(
            f"environment variable {self.skip_env}={environ[self.skip_env]!r} (named by {OPTION}.skip-env): "
            "expected 1/true/yes/on to skip compiling, or 0/false/no/off"
        )

    def compile_archs(self) -> list[str]:
        """The targets to compile: the configured ones (checked against the installed NVRTC) or the defaults,
        plus ``compute_XX`` of the highest one when ``ptx`` is set."""
        supported = supported_archs()
        numbers = {arch_number(a) for a in supported}
        if self.archs is None:
            archs: list[str] = default_archs()
        else:
            archs = list(self.archs)
            for i, arch in enumerate(archs):
                if arch != HOST_ARCH and arch_number(arch) not in numbers:  # "host": the CPU device's modules
                    raise _error(
                        f"archs[{i}]",
                        f"{arch!r} is not a target of the installed NVRTC (it supports {', '.join(supported)})",
                    )
        if HOST_ARCH in archs:  # modules for the CPU devices of the wheel's users, not this machine's
            os.environ.setdefault(HOST_MARCH_ENV, portable_host_march())
        gpu_archs = [a for a in archs if a != HOST_ARCH]
        if self.ptx and gpu_archs:
            ptx = f"compute_{max(arch_number(a) for a in gpu_archs)}"
            if ptx not in archs:
                archs.append(ptx)
        return archs


class KspecBuildHook(BuildHookInterface[BuilderConfig]):
    """The ``kspec`` build hook of hatchling (see the module docstring)."""

    PLUGIN_NAME = "kspec"
    _staging: tempfile.TemporaryDirectory[str] | None = None  # removed in finalize, or at exit if the build failed
    _marker: Path | None  # the py.typed written next to the staging directory; set in initialize
    _registration: Path | None  # the binaries registration written next to the staging directory; set in initialize

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":  # an sdist ships the spec files; its wheel compiles them
            return
        root = Path(self.root)
        options = HookOptions.from_config(self.config, root)
        package = self.build_config.get_distribution_path(options.output)
        if not all(part.isidentifier() for part in PurePosixPath(package).parts):
            raise _error("output", f"{options.output!r} goes to {package!r} in the wheel, which is not an importable package path")
        generation = self._generate(options, root)

        results: list[BuildResult] | None = None
        if options.skip_requested():
            self.app.display_info(
                f"kspec: {options.skip_env} is set: compiling nothing; the {version} wheel gets the typed modules "
                "without binaries, and kernels compile with NVRTC on first call"
            )
        else:
            results = self._compile(options, generation)

        if version == "editable":  # an editable install imports from the source tree: write there
            self._write_tree(options, root, generation, results)
            return
        build_data["pure_python"] = True  # CUBINs do not depend on the Python version or the OS: py3-none-any
        build_data["infer_tag"] = False
        self._staging = tempfile.TemporaryDirectory(prefix="kspec-hatch-")
        staging = Path(self._staging.name)
        for name, text in generation.files.items():
            (staging / name).write_bytes(text.encode())  # the bytes `kspec generate` writes, on every OS
        (staging / "py.typed").write_bytes(b"")  # PEP 561: the generated API is typed
        if results is not None:
            write_output(results, staging / BINARIES)
        self._mark_typed(options, root, build_data)
        # File by file, each target given as its source path: hatchling maps it with get_distribution_path
        # (src/pkg/... -> pkg/...) and reserves it, so a copy an editable build left in the tree is not
        # added a second time.
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            rel = path.relative_to(staging).as_posix()
            build_data["force_include"][str(path)] = f"{options.output}/{rel}"
        if results is not None:
            self._register_binaries(f"{package}/{BINARIES}", build_data)

    def _register_binaries(self, binaries: str, build_data: dict[str, Any]) -> None:
        """Install ``<prefix>/share/kspec/binaries/<distribution>.json`` naming the wheel's binaries (shared data),
        so that a constructor call of the same code in any program finds them by content
        (kspec/kernels/binaries/_stores.py), not only the generated modules."""
        assert self._staging is not None
        name = re.sub(r"[^A-Za-z0-9.]+", "_", self.metadata.name).lower()
        registration = Path(self._staging.name).parent / f"{Path(self._staging.name).name}-{name}.json"
        registration.write_text(json.dumps(registration_document(binaries), sort_keys=True) + "\n", encoding="utf-8")
        build_data.setdefault("shared_data", {})[str(registration)] = "/".join((*REGISTRATION_DIR, f"{name}.json"))
        self._registration = registration

    def _mark_typed(self, options: HookOptions, root: Path, build_data: dict[str, Any]) -> None:
        """Type checkers read ``py.typed`` only in a top-level package: when the generated package sits inside
        one that has none, the wheel gets an empty marker there (the source tree is left alone)."""
        parts = PurePosixPath(options.output).parts
        package = PurePosixPath(self.build_config.get_distribution_path(options.output)).parts
        top_source = PurePosixPath(*parts[: len(parts) - len(package) + 1])
        if len(package) > 1 and not (root / top_source / "py.typed").exists():
            assert self._staging is not None
            marker = Path(self._staging.name).parent / f"{Path(self._staging.name).name}-py.typed"
            marker.write_bytes(b"")
            build_data["force_include"][str(marker)] = f"{top_source}/py.typed"
            self._marker = marker

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        registration = getattr(self, "_registration", None)
        if registration is not None:
            registration.unlink(missing_ok=True)
            self._registration = None
        marker = getattr(self, "_marker", None)
        if marker is not None:
            marker.unlink(missing_ok=True)
            self._marker = None
        if self._staging is not None:
            self._staging.cleanup()
            self._staging = None

    def clean(self, versions: list[str]) -> None:
        """Remove what an editable build wrote into the source tree: the generated modules and ``_binaries/``."""
        root = Path(self.root)
        out = root / HookOptions.from_config(self.config, root).output
        for path in _generated_modules(out):
            path.unlink()
        binaries = out / BINARIES
        manifest = read_manifest(binaries, any_version=True)
        if manifest is not None:
            entries = manifest.get("entries")
            for entry in entries if isinstance(entries, list) else []:
                # only files inside _binaries/: a manifest is data from disk, not a list of paths to trust
                for field, suffixes in (("file", BINARY_SUFFIXES), ("interface", (INTERFACE_SUFFIX,))):
                    entry_file = confined_file(binaries, entry.get(field) if isinstance(entry, dict) else None, suffixes)
                    if entry_file is not None:
                        entry_file.unlink(missing_ok=True)
            (binaries / MANIFEST_NAME).unlink()
        for directory in sorted((d for d in [out, *out.rglob("*")] if d.is_dir()), key=lambda d: -len(d.parts)):
            if not any(directory.iterdir()):
                directory.rmdir()

    # -- steps ---------------------------------------------------------------------------------------------

    def _generate(self, options: HookOptions, root: Path) -> Generation:
        files = spec_files([root / options.specs])
        if not files:
            raise _error("specs", f"no spec files (*.toml, *.json) in {root / options.specs}")
        generation = generate(files, command=COMMAND, version=__version__, out_dir=root / options.output, root=root)
        errors = [err for _, errs in generation.errors for err in errs]
        for spec in generation.specs:
            if isinstance(spec, RawSpec) and spec.is_binary:
                errors.append(SpecError(
                    f"a raw kernel from a binary file ({spec.path}) is not shipped by the build hook; "
                    "put the file in the package and load it with kspec.RawModule(path=...)",
                    kernel=spec.name, field="path",
                ))  # fmt: skip
        if errors:
            raise errors[0] if len(errors) == 1 else SpecErrorGroup(errors)
        return generation

    def _compile(self, options: HookOptions, generation: Generation) -> list[BuildResult]:
        archs = options.compile_archs()
        plan = plan_build(generation.specs, archs)
        try:
            timeout = compile_timeout(options.compile_timeout)
        except KspecValueError as exc:  # KSPEC_COMPILE_TIMEOUT
            raise BuildHookError(str(exc)) from None
        results, wall = precompile_with_progress(plan.units, jobs=options.jobs, timeout=timeout)
        failures = [r for r in results if not r.ok]
        if failures:
            details = "\n".join(f"FAILED {r.what}: {r.error}" for r in failures)
            raise CompileError(
                f"kspec build hook: {len(failures)} of {len(results)} kernel modules failed to compile:\n{details}",
                kernel=failures[0].unit.spec.name if len({r.unit.spec.name for r in failures}) == 1 else None,
                log="\n\n".join(getattr(r.error, "log", "") for r in failures),
            )
        hits = sum(r.cache_hit for r in results)
        self.app.display_info(
            f"kspec: {len(results)} modules for {','.join(archs)} in {wall:.2f} s ({hits} from the cache)"
        )
        for spec, why in plan.skipped:
            self.app.display_info(f"kspec: not precompiled: {spec.name} ({why})")
        return results

    def _write_tree(self, options: HookOptions, root: Path, generation: Generation, results: list[BuildResult] | None) -> None:
        out = root / options.output
        written = sync_files(generation.files, out, check=False)
        stale = [p for p in _generated_modules(out) if p.name not in generation.files]
        for path in stale:
            path.unlink()
        if results is not None:
            write_output(results, out / BINARIES)  # rewrites only changed binaries, drops ones no longer built
        binaries = "" if results is not None else f"; {BINARIES}/ left as it is"
        self.app.display_info(
            f"kspec: {options.output}: {len(written)} of {len(generation.files)} modules written, "
            f"{len(stale)} stale removed{binaries}"
        )


def _generated_modules(out: Path) -> list[Path]:
    """The modules in ``out`` that this hook generated (their first line names its command)."""
    found = []
    for path in sorted(out.glob("*.py")) if out.is_dir() else []:
        try:
            with path.open(encoding="utf-8") as handle:
                first = handle.readline().rstrip("\n")
        except (OSError, UnicodeDecodeError):
            continue
        if first.startswith("# Generated by kspec ") and first.endswith(f" with: {COMMAND}"):
            found.append(path)
    return found
