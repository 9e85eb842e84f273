"""On PYTHONPATH, blocks kspec's NVRTC binding in every Python process (``import cuda.bindings.nvrtc`` fails), to show
that a process is served by precompiled binaries alone (benchmarks/clients/peer_groups.sh's ``served`` mode). CuPy's own
NVRTC (its ufuncs and routines) is CuPy's binding, not this one, and stays."""

import sys

sys.modules["cuda.bindings.nvrtc"] = None  # type: ignore[assignment]
