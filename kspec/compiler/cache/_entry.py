"""One binary-cache entry file: its name (``<key>.kbin``) and its bytes.

An entry file holds the binary together with its name-expression -> lowered-name map and metadata, so a
cached module is usable on its own. Layout (little-endian)::

    b"KSPECBIN" | u32 entry format | u32 header length | u64 binary length | u32 CRC-32(header + binary)
    | header (UTF-8 JSON: key, format, arch, lowered_names, log, nvrtc_version, kernel) | binary

The lengths catch a torn or short file, the CRC-32 a damaged one (any burst of up to 32 flipped bits, anything
else but for one chance in 2**32), before anything is loaded. It is a check against accidents, as the sha256
of format 1 was (whoever can write the directory can write a matching digest of either): zlib's CRC-32
runs ~15x faster than CPython's own sha256, which was most of a warm cache hit of a 20-40 KB binary (a
kernel's first call in a warm process). zlib is already loaded in a GPU process (cuda.bindings imports it).

``kernel`` (the name the compile was asked for; "" when unknown) is metadata for ``kspec cache info
--by-kernel``: readers ignore keys they do not know, so adding it needed no new entry format.

Shared by the cache (kspec/compiler/cache/_store.py), its LRU trim (kspec/compiler/cache/_stats.py) and the
cache key (kspec/compiler/_key.py, which hashes the entry format in), so none of them imports another for it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:  # built in decode_entry only: the call path's lookup reads an image without it (no dataclasses)
    from .._program import CompiledProgram

# Bump when the cache entry layout changes; part of the key, so old and new kspec never share a file name.
# 2: CRC-32 in place of format 1's sha256.
ENTRY_FORMAT_VERSION = 2

ENTRY_SUFFIX = ".kbin"
KEY_RE = re.compile(r"[0-9A-Za-z_.-]{1,128}")
_MAGIC = b"KSPECBIN"
_PREFIX = struct.Struct("<8sIIQI")


def encode_entry(key: str, program: CompiledProgram, *, kernel: str = "") -> bytes:
    """The bytes of one entry file (``kernel``: the kernel's name, recorded for listings)."""
    header = json.dumps(
        {
            "key": key,
            "kernel": kernel,
            "format": program.format,
            "arch": program.arch,
            "lowered_names": dict(program.lowered_names),
            "log": program.log,
            "nvrtc_version": list(program.nvrtc_version),
        },
        sort_keys=True,
    ).encode("utf-8")
    from zlib import crc32

    prefix = _PREFIX.pack(_MAGIC, ENTRY_FORMAT_VERSION, len(header), len(program.binary), crc32(program.binary, crc32(header)))
    return prefix + header + program.binary


def decode_entry(data: bytes, key: str) -> CompiledProgram | None:
    """The program stored in ``data`` under ``key``, or None when the bytes are not a whole, valid entry."""
    parts = entry_parts(data, key)
    if parts is None:
        return None
    from .._program import CompiledProgram

    header, binary = parts
    try:
        major, minor = header["nvrtc_version"]
        return CompiledProgram(
            binary=binary,
            format=str(header["format"]),
            arch=str(header["arch"]),
            lowered_names={str(k): str(v) for k, v in header["lowered_names"].items()},
            log=str(header["log"]),
            nvrtc_version=(int(major), int(minor)),
            compile_ms=0.0,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def entry_parts(data: bytes, key: str) -> tuple[dict[str, Any], bytes] | None:
    """(the header, the binary) of the entry in ``data`` under ``key``, or None when the bytes are not a whole,
    valid entry (lengths, CRC-32, the key it names)."""
    if len(data) < _PREFIX.size:
        return None
    magic, version, header_len, binary_len, digest = _PREFIX.unpack_from(data)
    if magic != _MAGIC or version != ENTRY_FORMAT_VERSION:
        return None
    if len(data) != _PREFIX.size + header_len + binary_len:
        return None
    from zlib import crc32  # here: a process that reads no entry does not load it

    body = memoryview(data)[_PREFIX.size :]
    if crc32(body) != digest:
        return None
    try:
        header = json.loads(bytes(body[:header_len]).decode("utf-8"))
        if not isinstance(header, dict) or header["key"] != key:  # a file copied or renamed under another key's name
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return header, bytes(body[header_len:])


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading; an OSError when it is not a regular file. A FIFO named like an entry would
    block a plain open() (and its read) forever; O_NONBLOCK changes nothing for a regular file."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({file_kind(mode)})", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular file (``open_regular``'s refusals are OSErrors, as a missing file's are).
    Plain ``os.read`` calls: a buffered file object costs more than reading a small entry does."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({file_kind(st.st_mode)})", str(path))
        chunks = [os.read(fd, max(st.st_size, 1) + 1)]
        while chunks[-1]:  # a file that grew since fstat: read to its end
            chunks.append(os.read(fd, 1 << 20))
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (an ``st_mode``) is, in words: 'a directory', 'a symbolic link', ..."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a regular file")):  # fmt: skip
        if test(mode):
            return words
    return "a file of an unknown kind"


def read_entry_header(path: Path) -> dict[str, object] | None:
    """The JSON header of an entry file, or None when it is not one. Reads the prefix and the header only,
    not the binary, so the digest is not checked: for listings, never for loading."""
    try:
        with open_regular(path) as handle:
            prefix = handle.read(_PREFIX.size)
            if len(prefix) != _PREFIX.size:
                return None
            magic, version, header_len, _binary_len, _digest = _PREFIX.unpack(prefix)
            if magic != _MAGIC or version != ENTRY_FORMAT_VERSION:
                return None
            header = json.loads(handle.read(header_len).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def entry_key(name: str) -> str | None:
    """The key of an entry file's name (``<key>.kbin``), or None for any other name."""
    if name.endswith(ENTRY_SUFFIX) and KEY_RE.fullmatch(name[: -len(ENTRY_SUFFIX)]):
        return name[: -len(ENTRY_SUFFIX)]
    return None


def is_entry_file(path: Path) -> bool:
    """Whether a file named like an entry starts with kspec's magic (what kspec removes)."""
    return has_magic(path, empty_ok=False)


def has_magic(path: Path, *, empty_ok: bool) -> bool:
    """Whether ``path`` starts with kspec's magic (``empty_ok``: or is empty, as a just-created temporary file)."""
    try:
        return starts_with_magic(path, empty_ok=empty_ok)
    except OSError:
        return False


def starts_with_magic(path: Path, *, empty_ok: bool) -> bool:
    """``has_magic``, but a file that cannot be opened or read raises its OSError: ``clear`` says why it
    left a file it could not check, where a lookup only needs a yes or no."""
    with open_regular(path) as handle:
        head = handle.read(len(_MAGIC))
    return head == _MAGIC or (empty_ok and head == b"")
