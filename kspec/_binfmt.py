"""What a CUDA binary file holds, from its first bytes: shared by spec validation (a raw spec's ``path``)
and ``RawModule(path=...)``, which must not import the spec layer (the serving path stays light)."""

from __future__ import annotations

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190  # ELF e_machine of a CUBIN: what the CPU device cannot load
FATBIN_MAGIC = (0xBA55ED50).to_bytes(4, "little")
HEAD_BYTES = 4096


def loadable_image(data: bytes, fmt: str) -> bytes:
    """``data`` as ``cuModuleLoadData`` takes it: PTX (``fmt`` "ptx" or ".ptx") gets the NUL that ends the
    string it reads; a CUBIN or fatbin is returned as it is."""
    if fmt in ("ptx", ".ptx") and not data.endswith(b"\0"):
        return data + b"\0"
    return data


def content_problem(suffix: str, head: bytes) -> str | None:
    """Why ``head`` (a file's first bytes) does not hold what ``suffix`` says, or None."""
    if suffix == ".cubin" and not head.startswith(ELF_MAGIC):
        return "is not a CUBIN (an ELF file starts with 7f 45 4c 46)"
    if suffix == ".fatbin" and not head.startswith(FATBIN_MAGIC):
        return "is not a fatbin (one starts with 50 ed 55 ba)"
    if suffix in (".ptx", ".cu", ".cuh"):
        if b"\0" in head.rstrip(b"\0"):
            return "is binary data, not text"
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:  # a character cut at the end of the head is fine
                return "is not UTF-8 text"
        if suffix == ".ptx" and b".version" not in head and b".target" not in head:
            return f"is not PTX (no .version or .target directive in its first {HEAD_BYTES // 1024} KiB)"
    return None


def host_symbol(expression: str, kind: str = "entry") -> str:
    """The exported symbol of a name expression in a CPU-device module: its entry (``kind="entry"``) or its
    parameter sizes (``"sizes"``). The host compiler writes it (kspec/compiler/host/_compiler.py), the host driver
    looks it up (kspec/runtime/host/_driver.py)."""
    from ._digest import sha256_hex

    return f"kspec_{kind}_" + sha256_hex(expression.encode())[:16]
