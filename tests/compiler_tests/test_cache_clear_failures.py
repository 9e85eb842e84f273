"""`kspec cache clear` says what it could not remove, and why, and exits 1; the others are removed all the
same. It removes only what kspec wrote, never follows a link, and never removes anything outside the cache
directory. No GPU, no NVRTC: entries are written with BinaryCache.put.

These tests run as root here, and root ignores permission bits: refusals are simulated where the OS call is
made (os.open, Path.unlink, the probe's mkstemp), and one test gets real refusals from a child process
that runs without the capabilities that let root ignore them (setpriv), skipping where it cannot."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kspec.cli import main
from kspec.compiler import BinaryCache, ClearReport, CompiledProgram

from helpers.child_env import child_env

POSIX_LINKS = pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="needs POSIX links")


def _key(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()


def _put(directory: Path, *tags: str) -> list[Path]:
    """Entry files for ``tags`` in ``directory``, written as kspec writes them."""
    cache = BinaryCache(directory, max_bytes=0)
    for tag in tags:
        cache.put(_key(tag), CompiledProgram(tag.encode() * 8, "cubin", "sm_90", {"k": tag}, "", (13, 0), 0.0))
    return [directory / f"{_key(tag)}.kbin" for tag in tags]


def _clear(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    code = main(["cache", "clear", "--dir", str(directory)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def _old(path: Path) -> Path:
    past = time.time() - 7200  # older than the orphan age: clear takes kspec's temporary files this old
    os.utime(path, (past, past), follow_symlinks=False)
    return path


# --- entries the OS refuses to remove --------------------------------------------------------------------


def test_a_refused_removal_is_named_and_does_not_stop_the_others(tmp_path, monkeypatch, capsys):
    first, refused, last = _put(tmp_path, "a", "b", "c")
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self == refused:  # another user's entry in a sticky shared directory (as /tmp is)
            raise PermissionError(errno.EPERM, "Operation not permitted", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    code, out, err = _clear(tmp_path, capsys)
    assert code == 1
    assert out == f"removed 2 entries from {tmp_path}\n"
    assert err == [f"kspec: error: could not remove {refused}: Operation not permitted"]
    assert refused.exists() and not first.exists() and not last.exists()
    report = BinaryCache(tmp_path).clear_report()  # the API carries the same (path, reason) pairs
    assert report == ClearReport(0, [(refused, "Operation not permitted")], ())


def test_an_entry_it_cannot_read_is_named_and_left(tmp_path, monkeypatch, capsys):
    # Another user's entry (mode 0o600) in a shared directory: nothing shows that kspec wrote it, so it stays.
    kept, unreadable = _put(tmp_path, "a", "b")
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if os.fspath(path) == str(unreadable):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    code, out, err = _clear(tmp_path, capsys)
    assert code == 1
    assert out == f"removed 1 entry from {tmp_path}\n"
    assert err == [f"kspec: error: could not remove {unreadable}: cannot be read (Permission denied), so kspec "
                   "cannot tell that it wrote it; it was left"]  # fmt: skip
    assert unreadable.exists() and not kept.exists()


def test_a_directory_it_may_not_write_is_named_with_the_reason(tmp_path, monkeypatch, capsys):
    # A foreign-owned or read-only cache directory: the probe that clear makes first is refused.
    import kspec.cli._common as common

    entries = _put(tmp_path, "a")

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(common.tempfile, "mkstemp", refused)
    code, out, err = _clear(tmp_path, capsys)
    assert code == 1 and out == ""
    assert err == [f"kspec: error: cache directory {str(tmp_path)!r} (--dir) cannot be written: Permission denied; "
                   "nothing was removed"]  # fmt: skip
    assert all(p.exists() for p in entries)


def _without_root_overrides() -> list[str] | None:
    """A command prefix that runs a child as this root user without the capabilities that let root ignore
    permission bits and ownership, or None where there is no such way here."""
    setpriv = shutil.which("setpriv")
    if os.name != "posix" or os.geteuid() != 0 or setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-all"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


def test_real_refusals_in_a_shared_sticky_directory(tmp_path):
    """The OS's own refusals, not simulated ones: a directory of mode 1777 (as /tmp) owned by another user,
    holding that user's entries (one readable, one of mode 0o600) and one of ours."""
    prefix = _without_root_overrides()
    if prefix is None:
        pytest.skip("needs root and setpriv to drop the capabilities that let root ignore permissions")
    shared = tmp_path / "shared"
    readable, private, ours = _put(shared, "a", "b", "c")
    other = 65534  # nobody
    for path in (shared, readable, private):
        os.chown(path, other, other)
    shared.chmod(0o1777)
    readable.chmod(0o644)
    private.chmod(0o600)
    done = subprocess.run([*prefix, sys.executable, "-m", "kspec", "cache", "clear", "--dir", str(shared)],
                          capture_output=True, text=True, env=child_env(), timeout=120)  # fmt: skip
    assert done.returncode == 1, done
    assert done.stdout == f"removed 1 entry from {shared}\n"
    assert sorted(done.stderr.splitlines()) == sorted([
        f"kspec: error: could not remove {readable}: Operation not permitted",
        f"kspec: error: could not remove {private}: cannot be read (Permission denied), so kspec cannot tell "
        "that it wrote it; it was left",
    ])  # fmt: skip
    assert readable.exists() and private.exists() and not ours.exists()


# --- what kspec did not write: links, directories ---------------------------------------------------------


@POSIX_LINKS
def test_links_named_like_entries_are_left_and_never_followed(tmp_path, capsys):
    cache_dir, outside = tmp_path / "cache", tmp_path / "outside"
    (entry,) = _put(cache_dir, "a")
    (outside_entry,) = _put(outside, "b")  # a link must not lead clear into this directory
    to_outside_dir = cache_dir / f"{_key('c')}.kbin"
    to_outside_dir.symlink_to(outside, target_is_directory=True)
    to_entry = cache_dir / f"{_key('d')}.kbin"
    to_entry.symlink_to(entry)
    code, out, err = _clear(cache_dir, capsys)
    assert code == 1
    assert out == f"removed 1 entry from {cache_dir}\n"
    why = "not a regular file but a symbolic link; kspec writes none, so it was left"
    assert sorted(err) == sorted(f"kspec: error: could not remove {p}: {why}" for p in (to_outside_dir, to_entry))
    assert not entry.exists()  # the real entry went; the link that led to it stays, dangling
    assert to_entry.is_symlink() and to_outside_dir.is_symlink()
    assert outside_entry.exists() and BinaryCache(outside).info().entries == 1


# --- kspec's own old temporary files ---------------------------------------------------------------------


def _orphan(directory: Path, data: bytes) -> Path:
    """An old temporary file named as write_atomic names them (a writer killed mid-write)."""
    path = directory / f".{'e' * 16}.abcd1234.tmp"
    path.write_bytes(data)
    return _old(path)


def test_an_orphan_temporary_file_it_cannot_remove_is_named(tmp_path, monkeypatch, capsys):
    (entry,) = _put(tmp_path, "a")
    orphan = _orphan(tmp_path, entry.read_bytes()[:40])
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self == orphan:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    code, out, err = _clear(tmp_path, capsys)
    assert code == 1 and out == f"removed 1 entry from {tmp_path}\n"
    assert err == [f"kspec: error: could not remove {orphan}: Read-only file system"]
    assert orphan.exists() and not entry.exists()


def test_an_orphan_temporary_file_is_still_removed(tmp_path, capsys):
    (entry,) = _put(tmp_path, "a")
    orphan = _orphan(tmp_path, entry.read_bytes()[:40])
    assert _clear(tmp_path, capsys) == (0, f"removed 1 entry from {tmp_path}\n", [])
    assert not orphan.exists() and not entry.exists()


@POSIX_LINKS
def test_a_link_named_like_a_temporary_file_is_not_followed(tmp_path, capsys):
    cache_dir = tmp_path / "cache"
    (entry,) = _put(cache_dir, "a")
    head = entry.read_bytes()[:40]
    target = tmp_path / "mine.tmp"
    target.write_bytes(head)  # kspec's magic, old, outside the cache directory
    _old(target)
    link = cache_dir / f".{'e' * 16}.abcd1234.tmp"
    link.symlink_to(target)
    _old(link)
    assert _clear(cache_dir, capsys) == (0, f"removed 1 entry from {cache_dir}\n", [])
    assert link.is_symlink() and target.read_bytes() == head  # kspec writes no links: not its own to remove


# --- the Python API ----------------------------------------------------------------------------------------


def test_clear_report_keeps_its_shape(tmp_path, monkeypatch):
    """ClearReport stays a 3-tuple (removed, failed, skipped) with ``skipped`` defaulting to (); clear() still
    returns the count, also when something was left."""
    assert ClearReport(1, []) == (1, [], ())
    kept, gone = _put(tmp_path, "a", "b")
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self == kept:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    removed, failed, skipped = BinaryCache(tmp_path).clear_report()
    assert (removed, failed, skipped) == (1, [(kept, "Permission denied")], ())
    assert BinaryCache(tmp_path).clear() == 0 and kept.exists() and not gone.exists()
