"""A module compiled once to PTX and linked per arch by nvJitLink (kspec/compiler/_link.py,
kspec/build/_front_end.py): which modules qualify, that the linked CUBINs are real binaries for their arch with
the PTX compile's lowered names, that a build marks and caches them under the keys a per-arch compile would use,
and that a module whose source fails reports the failure per arch. No GPU (tests/build_tests/test_linked_build_gpu.py runs
the binaries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kspec.build import plan_build, precompile
from kspec.compiler import BinaryCache, CompileOptions, cache_key, compile_source, link_available, link_ptx, one_front_end
from kspec.compiler._cubin import register_counts
from kspec.spec import load_library, parse_spec

REPO = Path(__file__).resolve().parents[2]
SOURCE = 'extern "C" __global__ void twice(float* y, const float* x, int n) { int i = threadIdx.x; if (i < n) y[i] = 2 * x[i]; }'

pytestmark = pytest.mark.skipif(not link_available(), reason="nvJitLink is not installed (kspec[nvrtc] brings it)")


def test_which_modules_take_one_front_end():
    assert one_front_end(SOURCE, ["sm_90", "sm_80", "sm_120"], ()) == "compute_80"  # the lowest arch's PTX
    assert one_front_end(SOURCE, ["sm_90"], ()) is None  # one arch: nothing to share
    assert one_front_end(SOURCE, ["sm_90a", "sm_100"], ()) is None  # arch-specific features
    assert one_front_end(SOURCE, ["sm_80", "sm_90"], ("-arch=sm_90",)) is None  # the user chose the arch
    assert one_front_end(SOURCE, ["sm_80", "sm_90"], ("-rdc=true",)) is None
    branching = SOURCE.replace("2 * x[i]", "\n#if __CUDA_ARCH__ >= 900\n 3 * x[i]\n#else\n 2 * x[i]\n#endif\n")
    assert one_front_end(branching, ["sm_80", "sm_90"], ()) is None  # would see sm_80's branch on sm_90


def test_a_linked_cubin_is_a_binary_for_its_arch():
    ptx = compile_source(SOURCE, name="twice", options=CompileOptions(arch="compute_80"), name_expressions=("twice",))
    assert ptx.format == "ptx"
    for arch in ("sm_80", "sm_90", "sm_120"):
        linked = link_ptx(ptx, arch, "twice")
        assert linked.format == "cubin" and linked.arch == arch and linked.binary[:4] == b"\x7fELF"
        assert dict(linked.lowered_names) == dict(ptx.lowered_names)
        assert register_counts(linked.binary)  # the build's report reads its registers
    with pytest.raises(Exception, match="no PTX was given"):
        link_ptx(link_ptx(ptx, "sm_90", "twice"), "sm_90", "twice")


def test_a_build_links_each_arch_from_one_ptx_and_caches_it_for_per_arch_lookups(tmp_path):
    library = load_library(REPO / "specs" / "elementwise.toml")
    spec = library["squared_diff"]
    plan = plan_build([spec], ("sm_80", "sm_90"))
    cache = BinaryCache(tmp_path / "cache")
    results = precompile(plan.units, cache=cache)
    assert results and all(r.ok for r in results)
    assert all(r.linked and not r.cache_hit for r in results)
    assert {r.unit.arch for r in results} == {"sm_80", "sm_90"}
    again = precompile(plan.units, cache=cache)
    assert all(r.cache_hit and not r.linked for r in again)
    assert [r.program.binary for r in again] == [r.program.binary for r in results]
    # the key a lazily compiled call computes for one arch finds the linked binary
    from kspec.render import render, specialize

    unit = plan.units[0]
    specialization = specialize(unit.spec, unit.types, scalars=unit.scalars)
    module = render(specialization)
    key = cache_key(module.source, options=CompileOptions(arch=unit.arch, extra=specialization.nvrtc_options),
                    name_expressions=tuple(module.name_expressions), needs=tuple(module.needs))  # fmt: skip
    assert cache.get(key) is not None and cache.get(key).binary == results[0].program.binary


def test_a_failing_module_fails_for_every_arch_with_nvrtcs_log(tmp_path):
    spec = parse_spec({"kind": "elementwise", "name": "broken_op", "in_params": "float32 x", "out_params": "float32 y",
                       "operation": "y = x +* ;"})  # fmt: skip
    results = precompile(plan_build([spec], ("sm_80", "sm_90")).units, cache=BinaryCache(tmp_path / "cache"))
    assert len(results) == 2 and not any(r.ok or r.linked for r in results)
    assert all("broken_op" in str(r.error) for r in results)
