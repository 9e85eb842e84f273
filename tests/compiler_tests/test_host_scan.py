"""The CPU device's source scan (kspec/compiler/host/_scan.py): the plain kernels of a CUDA C++ source,
whether it synchronises (fibers on the host), what it refuses with kspec.HostUnsupportedError, and the
rewrite of extern __shared__ arrays. Pure Python: no compiler needed."""

from __future__ import annotations

import pytest

import kspec
from kspec.compiler.host import scan_host_source


def test_scan_finds_plain_kernels_and_sync() -> None:
    source = """
    template <typename T> __global__ void templated(T* x) { __syncthreads(); }
    // __global__ void in_comment() {}
    const char* text = "__global__ void in_string() { __syncwarp(); }";
    __global__ void __launch_bounds__(128, 2) bounded(float* x) { x[0] = 1; }
    #ifndef KSPEC_HOST
    __global__ void gpu_only() { __syncthreads(); asm("trap;"); }
    #endif
    """
    scan = scan_host_source(source.replace("__syncthreads(); }\n    //", "}\n    //"), "m")
    assert scan.kernels == ("bounded",) and not scan.uses_sync
    assert scan_host_source(source, "m").uses_sync  # the template's __syncthreads


@pytest.mark.parametrize("snippet", ["__shfl_xor_sync(~0u, v, 1)", "__syncwarp()", "__ballot_sync(~0u, p)",
                                     "block.sync()", "cg::sync(block)", "cooperative_groups::wait(block)",
                                     "cooperative_groups::wait_prior<0>(block)", "tile.shfl_down(v, 1)",
                                     "__syncthreads_or(p)", "__activemask()"])
def test_scan_sees_each_synchronisation(snippet: str) -> None:
    assert scan_host_source(f"__global__ void k(int v, bool p) {{ {snippet}; }}", "k").uses_sync


@pytest.mark.parametrize(("snippet", "construct"), [
    ("float v = tex1Dfetch<float>(t, 0);", "textures"),
    ("cudaTextureObject_t t;", "textures"),
    ("surf2Dwrite(v, s, 0, 0);", "surfaces"),
    ('asm volatile("membar.gl;");', "inline PTX (asm)"),
    ("auto g = cooperative_groups::this_grid(); g.sync();", "cooperative grid synchronisation (this_grid / grid_group)"),
    ("child<<<1, 1>>>();", "kernel launches from device code (dynamic parallelism)"),
    ("cuda::pipeline<cuda::thread_scope_thread> p = cuda::make_pipeline();", "asynchronous barriers and pipelines (cuda::barrier, cuda::pipeline)"),
])
def test_scan_refuses_what_the_host_cannot_run(snippet: str, construct: str) -> None:
    source = f"extern \"C\" __global__ void k(float* x) {{\n  {snippet}\n}}\n"
    with pytest.raises(kspec.HostUnsupportedError) as info:
        scan_host_source(source, "mod")
    assert str(info.value) == f"kernel 'mod': the CPU device cannot run {construct} (line 2: {snippet}); run it on a GPU"
    assert isinstance(info.value, kspec.KspecNotImplementedError)


def test_scan_ignores_refused_constructs_in_comments_strings_and_gpu_only_regions() -> None:
    source = """
    // asm("trap;") and tex1D(t, 0) in a comment
    /* this_grid() */
    const char* s = "asm volatile(\\"x\\")";
    #if !defined(KSPEC_HOST)
    __device__ unsigned lane() { unsigned l; asm("mov.u32 %0, %%laneid;" : "=r"(l)); return l; }
    #else
    __device__ unsigned lane() { return threadIdx.x % 32; }
    #endif
    #ifdef __CUDA_ARCH__
    __device__ float fetch(cudaTextureObject_t t) { return tex1Dfetch<float>(t, 0); }
    #endif
    extern "C" __global__ void k(unsigned* out) { out[threadIdx.x] = lane(); }
    """
    assert scan_host_source(source, "m").kernels == ("k",)


def test_scan_rewrites_extern_shared() -> None:
    source = ("extern __shared__ float at_namespace[];\n"
              "template <typename T> __global__ void k(T* x) {\n"
              "  extern __shared__ __align__(16) T local[];\n"
              "  static __shared__ int count;\n"
              "}\n")
    rewritten = scan_host_source(source, "m").source
    assert "T* const local = reinterpret_cast<T*>(::kspec_host::dynamic_shared());" in rewritten
    assert "#define at_namespace (reinterpret_cast<float*>(::kspec_host::dynamic_shared()))\n#line 1\n" in rewritten
    assert "  __shared__ int count;" in rewritten and "extern __shared__" not in rewritten
