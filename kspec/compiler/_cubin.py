"""Facts read from a CUBIN without a driver: the register count of each kernel.

A CUBIN is an ELF64 file. Its ``.nv.info`` section holds attribute records ``(format u8, attribute u8,
size u16, payload)``; an ``EIATTR_REGCOUNT`` record's payload is ``(symbol index u32, registers u32)``, the
symbol being an entry of ``.symtab``. This is what cuobjdump reports, read here with no CUDA tools.
"""

from __future__ import annotations

import struct

from .._named_tuple import NamedTuple

_EIFMT_SVAL = 4  # a record with a payload of `size` bytes
_EIATTR_REGCOUNT = 0x2F
_SHT_SYMTAB = 2


class _Section(NamedTuple):
    name: int
    type: int
    offset: int
    size: int
    link: int


def _sections(elf: bytes) -> list[_Section]:
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff + shnum * shentsize > len(elf):
        return []
    out = []
    for k in range(shnum):
        base = shoff + k * shentsize
        name, type_ = struct.unpack_from("<II", elf, base)
        offset, size = struct.unpack_from("<QQ", elf, base + 0x18)
        link, = struct.unpack_from("<I", elf, base + 0x28)
        out.append(_Section(name, type_, offset, size, link))
    return out


def _string(table: bytes, offset: int) -> str:
    return table[offset : table.find(b"\0", offset)].decode("ascii", "replace")


def register_counts(cubin: bytes) -> dict[str, int]:
    """Kernel symbol -> registers per thread; empty for PTX or anything that is not an ELF64 CUBIN."""
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:  # 2: ELFCLASS64
        return {}
    sections = _sections(cubin)
    if not sections:
        return {}
    shstrndx, = struct.unpack_from("<H", cubin, 0x3E)
    shstr = sections[shstrndx]
    section_names = cubin[shstr.offset : shstr.offset + shstr.size]
    symtab = next((s for s in sections if s.type == _SHT_SYMTAB), None)
    info = next((s for s in sections if _string(section_names, s.name) == ".nv.info"), None)
    if symtab is None or info is None:
        return {}
    strtab = sections[symtab.link]
    symbol_names = cubin[strtab.offset : strtab.offset + strtab.size]

    def symbol(index: int) -> str:
        name_off, = struct.unpack_from("<I", cubin, symtab.offset + 24 * index)  # Elf64_Sym is 24 bytes
        return _string(symbol_names, name_off)

    out: dict[str, int] = {}
    data = cubin[info.offset : info.offset + info.size]
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, size = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt != _EIFMT_SVAL:
            continue  # other formats carry their value in `size` itself
        if attr == _EIATTR_REGCOUNT and size >= 8:
            index, regs = struct.unpack_from("<II", data, pos)
            out[symbol(index)] = regs
        pos += size
    return out
