"""``backend="nvcc"``: one compile with a CUDA toolkit's nvcc, to the same CUBIN/PTX + lowered names as NVRTC.

nvcc is found through ``CUDA_PATH``, ``CUDA_HOME``, ``PATH`` or cuda.pathfinder, in that order. It takes
the same option list as NVRTC (``-arch``, ``-std``, ``-D``, ``-I``, the user's options) plus ``-cubin`` /
``-ptx``. Name expressions: nvcc has no ``nvrtcAddNameExpression``, so each expression's address is taken
in an appended host variable (which makes nvcc instantiate a template kernel), and its lowered name comes
from NVRTC parsing the original source (``-fdevice-syntax-only``: no code generation), so the names are
exactly NVRTC's, not guessed back from demangled symbols.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from .._errors import NvccNotFoundError


def _candidates() -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for var in ("CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(var)
        found.append((f"${var}/bin/nvcc", str(Path(root, "bin", "nvcc")) if root else None))
    found.append(("PATH", shutil.which("nvcc")))
    try:
        from cuda import pathfinder

        finder = getattr(pathfinder, "find_nvidia_binary_utility", None)
        found.append(("cuda.pathfinder", finder("nvcc") if finder is not None else None))
    except Exception:  # no cuda.pathfinder, or it failed: one place less to look
        found.append(("cuda.pathfinder", None))
    return found


def find_nvcc() -> str:
    """The nvcc executable to use, or NvccNotFoundError naming every place that was looked at."""
    looked = []
    for where, path in _candidates():
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        looked.append(where)
    raise NvccNotFoundError(
        f"backend='nvcc' is not supported here: no nvcc found (looked at {', '.join(looked)}); install a CUDA toolkit and set "
        "CUDA_PATH, or use the default backend='nvrtc' (it needs no toolkit), or build a .cubin with nvcc elsewhere and load "
        "it with RawModule(path='kernel.cubin')"
    )


@lru_cache(maxsize=8)
def nvcc_version(path: str) -> str:
    """``'13.0.88'`` from ``nvcc --version`` (part of the cache key: another nvcc makes other bytes)."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else out.strip().splitlines()[-1] if out.strip() else "unknown"


def instantiating_source(source: str, name_expressions: Sequence[str]) -> str:
    """``source`` plus one host variable per name expression taking its address (instantiates templates)."""
    if not name_expressions:
        return source
    lines = [source, "", "// kspec: name expressions, instantiated for nvcc"]
    for number, expression in enumerate(name_expressions):
        lines.append(f"static void* const _kspec_name_expression_{number} __attribute__((unused)) = (void*)&{expression};")
    return "\n".join(lines) + "\n"


def run_nvcc(nvcc: str, source: str, program_name: str, args: Sequence[str], *, ptx: bool) -> tuple[str, str, bytes]:
    """Compile once in a private temporary directory: ``(error, log, binary)``; error is "" on success."""
    with tempfile.TemporaryDirectory(prefix="kspec-nvcc-") as tmp:
        src = Path(tmp, program_name)
        out = Path(tmp, "out.ptx" if ptx else "out.cubin")
        src.write_text(source, encoding="utf-8")
        command = [nvcc, "-ptx" if ptx else "-cubin", *args, "-o", str(out), str(src)]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp, timeout=600)
        except subprocess.TimeoutExpired:
            return "nvcc ran past 600 s", "", b""
        log = (proc.stdout + proc.stderr).replace(str(tmp) + os.sep, "")
        if proc.returncode != 0 or not out.is_file():
            return f"nvcc exited with status {proc.returncode}", log, b""
        binary = out.read_bytes()
        if ptx and not binary.endswith(b"\0"):
            binary += b"\0"  # as NVRTC returns PTX: ready for cuModuleLoadData
        return "", log, binary
