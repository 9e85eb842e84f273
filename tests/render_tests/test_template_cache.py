"""kspec's compiled templates are kept once per install (kspec.render's TemplateCodeCache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kspec.render._env import TemplateCodeCache, make_environment


def test_templates_are_compiled_once_then_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = make_environment(code_cache=TemplateCodeCache(tmp_path))
    first.get_template("elementwise.cu.j2")
    written = sorted(tmp_path.glob("*.code"))
    assert written, "the compiled template was not stored"
    compiled: list[str] = []
    second = make_environment(code_cache=TemplateCodeCache(tmp_path))

    def no_compile(*args: object, **kwargs: object) -> None:
        compiled.append("compiled")
        raise AssertionError("template compiled although its code was stored")

    monkeypatch.setattr(second, "compile", no_compile)
    template = second.get_template("elementwise.cu.j2")  # served from the stored code: no compile
    assert template.name == "elementwise.cu.j2" and compiled == []


def test_a_damaged_entry_is_recompiled_and_replaced(tmp_path: Path) -> None:
    make_environment(code_cache=TemplateCodeCache(tmp_path)).get_template("raw.cu.j2")
    for entry in tmp_path.glob("*.code"):
        entry.write_bytes(entry.read_bytes()[:40])  # truncated mid-way, as by a crash
    env = make_environment(code_cache=TemplateCodeCache(tmp_path))
    assert env.get_template("raw.cu.j2").name == "raw.cu.j2"
    assert all(entry.stat().st_size > 40 for entry in tmp_path.glob("*.code"))


def test_an_unwritable_directory_only_skips_storing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = make_environment(code_cache=TemplateCodeCache(blocker / "templates"))
    assert env.get_template("raw.cu.j2").name == "raw.cu.j2"
