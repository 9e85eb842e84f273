"""The device globals a CUBIN defines, read from its ELF symbol table (tests only: what a module load
allocates and initialises besides the code; see tests/render_tests/test_device_globals.py)."""

from __future__ import annotations

import struct

_ELF64_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")  # name, type, flags, addr, offset, size, link, info, addralign, entsize
_SYMBOL = struct.Struct("<IBBHQQ")  # name, info, other, section index, value, size
_SHT_SYMTAB = 2
_STT_OBJECT = 1


def device_globals(image: bytes) -> list[str]:
    """Names of the data objects a CUBIN places in ``.nv.global`` / ``.nv.global.init`` (device globals)."""
    assert image[:4] == b"\x7fELF" and image[4] == 2, "not a 64-bit ELF image (a CUBIN)"
    header = _ELF64_HEADER.unpack_from(image)
    shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
    sections = [_SECTION.unpack_from(image, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]

    def text(table_offset: int, at: int) -> str:
        return image[table_offset + at : image.index(b"\0", table_offset + at)].decode()

    section_names = [text(names_at, s[0]) for s in sections]
    global_sections = {i for i, name in enumerate(section_names) if name in (".nv.global", ".nv.global.init")}
    found = []
    for section in sections:
        if section[1] != _SHT_SYMTAB:
            continue
        strings = sections[section[6]][4]
        for at in range(section[4], section[4] + section[5], section[9]):
            name, info, _other, index, _value, _size = _SYMBOL.unpack_from(image, at)
            if info & 0xF == _STT_OBJECT and index in global_sections:
                found.append(text(strings, name))
    return found
