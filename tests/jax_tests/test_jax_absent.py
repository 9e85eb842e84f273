"""kspec.jax without JAX installed (CI's case): importing it and wrapping a kernel work and import nothing of
JAX; a call says what to install. Run in a subprocess in which ``import jax`` fails whether or not JAX is here."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.child_env import child_env

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys

    class _NoJax(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "jax" or name.startswith(("jax.", "jaxlib")):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoJax())
    import kspec, kspec.jax as kj

    kernel = kspec.ElementwiseKernel("T x", "T y", "y = x", "absent_copy")
    wrapped = kj.wrap(kernel)
    assert wrapped is kj.wrap(kernel) and wrapped.__name__ == "absent_copy"
    assert not [m for m in sys.modules if m == "jax" or m.startswith("jax.")]
    try:
        kj.call(kernel, 1.0)
    except ModuleNotFoundError as exc:
        assert exc.name == "jax", exc.name
        print("refused:", exc)
    """
)


def test_without_jax_a_call_says_what_to_install():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, env=child_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refused: kernel 'absent_copy': kspec.jax needs JAX (pip install jax" in done.stdout, done.stdout
