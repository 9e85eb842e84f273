"""``import kspec.torch`` needs no PyTorch (CI has none) and imports none: PyTorch is imported when a kernel is
registered."""

from __future__ import annotations

import subprocess
import sys


def test_importing_kspec_torch_imports_no_torch():
    code = "import sys, kspec.torch; assert 'torch' not in sys.modules, 'torch imported'; print(kspec.torch.__all__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['call', 'register', 'register_module']"
