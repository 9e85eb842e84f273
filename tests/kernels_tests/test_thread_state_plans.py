"""An elementwise body with ``loop_prep`` / ``after_loop`` keeps state per thread; CuPy launches a thread per
element, so each element sees loop_prep's state afresh. kspec's module for such a body has no vector or tiled
variant, and its plans launch a thread per element on every path (the results: test_elementwise.py, both devices).
No GPU needed: specializations and plans."""

from __future__ import annotations

import numpy as np
import pytest

import kspec
from helpers.host_loops_support import _bound
from kspec.kernels.planning._plan import plan_elementwise
from kspec.render import specialize

BODY = "shift += T(1); y = x + shift"


@pytest.mark.parametrize("code", [dict(loop_prep="T shift = T(0)"), dict(loop_prep="T shift = T(0)", after_loop="(void)shift")])
def test_a_body_with_state_per_thread_has_no_vector_or_tiled_variant(code):
    stateful = kspec.ElementwiseKernel("T x", "T y", BODY, "state_variants", **code)
    plain = kspec.ElementwiseKernel("T x", "T y", "y = x + T(1)", "plain_variants")
    for dtype in ("float32", "float64", "int8"):
        with_state, without = (specialize(k.spec, {"T": dtype}) for k in (stateful, plain))
        assert with_state.indexer.thread_state and not without.indexer.thread_state
        assert with_state.vec == 1 and without.vec > 1 and without.tiled and not with_state.tiled
        assert {v.vec for v in with_state.variants} == {1} and all(v.entry != "tiled" for v in with_state.variants)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_plans_of_a_body_with_state_launch_a_thread_per_element(layout):
    stateful = kspec.ElementwiseKernel("T x", "T y", BODY, "state_plans", loop_prep="T shift = T(0)")
    plain = kspec.ElementwiseKernel("T x", "T y", "y = x + T(1)", "plain_plans")
    x = np.zeros((1024, 2048), np.float32)
    x = x if layout == "contiguous" else x.T if layout == "transposed" else np.zeros(2048, np.float32)[None, :]
    args = (x, np.empty((1024, 2048) if layout != "transposed" else (2048, 1024), np.float32))
    size = args[1].size
    for kernel in (stateful, plain):
        plan = plan_elementwise(kernel.spec, _bound(kernel, args), kernel._specializer)
        threads = plan.grid(132) * plan.block * (plan.variant.vec if plan.variant.entry == "contig" else 1)
        if kernel is stateful:
            assert plan.variant.vec == 1 and plan.variant.entry != "tiled"
            assert plan.grid(132) * plan.block >= size > (plan.grid(132) - 1) * plan.block  # a thread per element
        else:
            assert threads < size or plan.variant.vec > 1 or plan.variant.entry == "tiled"  # several per thread
