"""The static checks run with the tests, so CI runs them: mypy on kspec/ and ruff on the repository, each as
configured in pyproject.toml ([tool.mypy], [tool.ruff]). Both tools are in the test extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_EXTRA = "the test extra is not installed: pip install -e '.[test]'"


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_mypy(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason=_EXTRA)
    # A fresh cache (~10 s cold): a stale one left in the checkout cannot hide an error, and none is written there.
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy-cache"), timeout=300)
    if done.returncode != 0:
        pytest.fail(f"mypy (pyproject.toml [tool.mypy]) failed:\n{done.stdout}{done.stderr}", pytrace=False)


def test_ruff() -> None:
    pytest.importorskip("ruff", reason=_EXTRA)
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".", timeout=120)
    if done.returncode != 0:
        pytest.fail(f"ruff (pyproject.toml [tool.ruff]) failed:\n{done.stdout}{done.stderr}", pytrace=False)


def test_code_says_why_in_words_not_issue_tags() -> None:
    """A comment or docstring of kspec/ explains itself: an issue tag ("issue [AD]") means something only to a
    reader of the CHANGELOG."""
    import re

    tag = re.compile(r"\b[Ii]ssues? \[[A-Z][A-Z0-9]*\]")
    found = [f"{path.relative_to(REPO)}:{n}" for path in sorted((REPO / "kspec").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if tag.search(line)]  # fmt: skip
    assert not found, f"say it in words: {found}"
