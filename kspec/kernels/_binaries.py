"""Precompiled binaries (``kspec build`` output: ``manifest.json`` plus CUBIN/PTX files) as a lookup table.

A kernel given a :class:`BinaryStore` loads the binary of its specialization for the device instead of
compiling: the CUBIN of the same major architecture with the highest minor not above the device's (an
sm_80 CUBIN runs on sm_86; sm_90 runs only on sm_90), else PTX when the store has it (the driver JIT-compiles
it), else nothing, and the caller compiles with NVRTC. NVRTC is never imported when a binary serves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import KspecValueError, LaunchError
from ..build._output import MANIFEST_NAME, read_manifest


@dataclass(frozen=True)
class StoredBinary:
    """One binary of the store: its file, format, architecture and lowered names."""

    path: Path
    format: str
    arch: str
    lowered_names: dict[str, str]

    def read(self) -> bytes:
        data = self.path.read_bytes()
        if self.format == "ptx" and not data.endswith(b"\0"):
            data += b"\0"  # cuModuleLoadData reads PTX as a NUL-terminated string
        return data


def _arch_number(arch: str) -> tuple[int, int] | None:
    digits = arch.removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if not digits.isdigit() or len(digits) < 2:
        return None
    return int(digits[:-1]), int(digits[-1])


class BinaryStore:
    """The binaries of one ``kspec build`` output directory, by specialization key."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        manifest = read_manifest(self.directory)
        if manifest is None:
            raise KspecValueError(
                f"binaries: {str(self.directory)!r} has no kspec {MANIFEST_NAME} (write one with kspec build -o DIR)"
            )
        self._by_key: dict[str, list[StoredBinary]] = {}
        for entry in manifest.get("entries", []):
            key = entry.get("specialization_key")
            if not key:
                continue
            self._by_key.setdefault(key, []).append(
                StoredBinary(self.directory / entry["file"], entry["format"], entry["arch"], dict(entry["lowered_names"]))
            )

    def archs(self, key: str) -> list[str]:
        """The architectures the store has for a specialization (for error messages)."""
        return sorted({b.arch for b in self._by_key.get(key, [])})

    def find(self, key: str, device_arch: str) -> StoredBinary | None:
        """The best binary of a specialization for a device (see the module docstring), or None."""
        device = _arch_number(device_arch)
        if device is None:
            return None
        best: tuple[int, StoredBinary] | None = None
        ptx: tuple[tuple[int, int], StoredBinary] | None = None
        for binary in self._by_key.get(key, []):
            number = _arch_number(binary.arch)
            if number is None or not binary.path.is_file():
                continue
            if binary.format == "cubin" and number[0] == device[0] and number[1] <= device[1]:
                if best is None or number[1] > best[0]:
                    best = (number[1], binary)
            elif binary.format == "ptx" and number <= device and (ptx is None or number > ptx[0]):
                ptx = (number, binary)
        if best is not None:
            return best[1]
        return ptx[1] if ptx is not None else None

    def missing(self, what: str, key: str, device_arch: str, cause: Exception) -> LaunchError:
        """The error for a kernel this store has no binary of for the device, when NVRTC is absent too."""
        archs = self.archs(key)
        return LaunchError(
            f"{what}: no precompiled binary for this device ({device_arch}) in {self.directory} (it has: "
            f"{', '.join(archs) or 'none for this kernel'}) and NVRTC is not installed to compile one ({cause}); "
            f"rebuild the binaries with --arch {device_arch} or install kspec[nvrtc]"
        )

    def __repr__(self) -> str:
        return f"<kspec.BinaryStore {str(self.directory)!r}: {len(self._by_key)} specializations>"


def binary_store(binaries: Any) -> BinaryStore | None:
    """``binaries=`` as given to a kernel or a library: None, a directory, or a BinaryStore.

    A directory without a manifest gives None (a generated module whose package shipped no binaries).
    """
    if binaries is None or isinstance(binaries, BinaryStore):
        return binaries
    if not isinstance(binaries, (str, os.PathLike)):
        raise KspecValueError(f"binaries: expected a directory path, got {type(binaries).__name__}")
    if read_manifest(binaries) is None:
        return None
    return BinaryStore(binaries)
