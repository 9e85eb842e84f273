"""kspec.jit device functions and cooperative groups on the CPU: the generated C++ (names, prototypes,
recursion, each cooperative-group call), NVRTC compiles of every kernel to CUBIN for sm_90, and the errors."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from helpers import jit_call_kernels as K
from kspec import jit
from kspec.compiler import CompileOptions, compile_source


def _v(dtype, n=8):
    return np.zeros(n, dtype)


CASES = {
    "nested_calls": (K.nested_calls, (_v(np.float32), _v(np.float32))),
    "same_names": (K.same_names, (_v(np.int32), _v(np.int32))),
    "recursion": (K.recursion, (_v(np.int64), _v(np.int64), _v(np.bool_), _v(np.int64))),
    "tree_sum": (K.tree_sum, (_v(np.float64, 128), _v(np.float64, 1))),
    "index_from_call": (K.index_from_call, (_v(np.int64, 2),)),
    "block_facts": (K.block_facts, (np.zeros((8, 15), np.int64),)),
    "grid_facts": (K.grid_facts, (np.zeros((8, 21), np.uint64), _v(np.uint64))),
    "staged_copy": (K.staged_copy, (_v(np.int32, 256), _v(np.int32, 256), True)),
}


def _compile(name):
    kernel, args = CASES[name]
    source = kernel.cuda_source(*args)
    return source, compile_source(source, name=name, options=CompileOptions(arch="sm_90"))


@pytest.fixture(scope="module")
def compiled():
    with ThreadPoolExecutor(max_workers=2) as pool:  # NVRTC releases the GIL
        return dict(zip(CASES, pool.map(_compile, CASES)))


def _functions(source):
    """The device functions' prototypes and the heads of their definitions, in order."""
    body = source[source.index("}  // namespace kspec_jit"):]
    return re.findall(r"^(__device__ [^\n{]*\));$", body, re.M), re.findall(r"^(__device__ [^\n{]*\)) \{$", body, re.M)


def test_every_kernel_compiles_for_sm90(compiled):
    for name, (source, program) in compiled.items():
        assert program.format == "cubin" and len(program.binary) > 0, name
        prototypes, definitions = _functions(source)
        assert sorted(prototypes) == sorted(definitions), name  # each defined function is declared first
        if definitions:
            assert source.index(prototypes[-1] + ";") < source.index(definitions[0] + " {"), name


def test_calls_between_device_functions_in_any_order(compiled):
    source = compiled["nested_calls"][0]
    prototypes, _ = _functions(source)
    assert prototypes == [
        "__device__ float cube_plus_square_float32(float v)",
        "__device__ float cube_float32(float v)",
        "__device__ float square_float32(float v)",
    ]
    assert "return (cube_float32(v) + square_float32(v));" in source
    assert "out[i] = cube_plus_square_float32(x[i]);" in source


def test_functions_of_one_name_get_distinct_c_names(compiled):
    source = compiled["same_names"][0]
    prototypes, _ = _functions(source)
    assert prototypes == [
        "__device__ int adder_g_int32(int v)",
        "__device__ int adder_g_int32_2(int v)",
        "__device__ int adder_g_int32_3(int v)",
        "__device__ int scaler_g_int32(int v)",
    ]
    # each keeps its own closure value
    for name, body in [("adder_g_int32", "(v + 1)"), ("adder_g_int32_2", "(v + 100)"), ("adder_g_int32_3", "(v + 1000)"), ("scaler_g_int32", "(v * 3)")]:
        assert re.search(rf"{name}\(int v\) \{{\n#line \d+ \"[^\"]+\"\n    return {re.escape(body)};", source), name
    assert "scaler_g_int32(adder_g_int32_3(x[i]))" in source


def test_factory_functions_are_kept_alive_while_translating():
    # a factory's device function dies right after its call in Python; its id may come back for the next one.
    # Keyed by the object, each call still gets its own C++ function (the constants 1..6 all appear).
    @jit.rawkernel()
    def many(x):
        x[0] = K.adder(1)(x[0])
        x[0] = K.adder(2)(x[0])
        x[0] = K.adder(3)(x[0])
        x[0] = K.adder(4)(x[0])
        x[0] = K.adder(5)(x[0])
        x[0] = K.adder(6)(x[0])

    source = many.cuda_source(_v(np.int32))
    for k in range(1, 7):
        assert f"return (v + {k});" in source
    assert len(_functions(source)[0]) == 6


def test_recursion(compiled):
    source = compiled["recursion"][0]
    prototypes, _ = _functions(source)
    assert "__device__ long long triangle_int64(long long n)" in prototypes
    assert "return (n + triangle_int64((n - 1LL)));" in source or "return (n + triangle_int64((n - 1)));" in source
    # a void function recursing before any return; mutual recursion through the prototypes
    assert "__device__ void countdown_int64_1d_int64(kspec_jit::array<long long, 1> out, long long i)" in prototypes
    assert "countdown_int64_1d_int64(out, (i - 1));" in source
    assert "__device__ bool is_even_int64(long long n)" in prototypes and "__device__ bool is_odd_int64(long long n)" in prototypes
    assert "return is_odd_int64((n - 1));" in source and "return is_even_int64((n - 1));" in source


def test_recursion_before_the_return_type_is_known_is_a_value_error():
    with pytest.raises(ValueError, match=r"jit_call_kernels.py:\d+: in 'endless': `endless\(v\)`: Recursive function is not supported") as info:
        K.unknown_return_type.cuda_source(_v(np.int32))
    assert isinstance(info.value, jit.JitRecursionError) and "base case" in str(info.value)


def test_recursion_through_a_factory_unfolds_at_compile_time(compiled):
    source = compiled["tree_sum"][0]
    prototypes, _ = _functions(source)
    names = [re.search(r"void (\w+)\(", p).group(1) for p in prototypes]
    assert names == ["pairwise_sum_step_shared_float64"] + [f"pairwise_sum_step_shared_float64_{k}" for k in range(2, 9)]
    for stride in [1, 2, 4, 8, 16, 32, 64]:
        assert f"buf[t] += buf[(t + {stride})];" in source
        assert f"if ((((t % {2 * stride}) == 0))) {{" in source
    # the last level (stride 128) has an empty body: `stride < width` was decided while translating
    assert re.search(r"void pairwise_sum_step_shared_float64_8\(double\* buf\) \{\n\}", source)


def test_value_returns_dropped_at_compile_time_leave_a_void_function():
    def marker(enabled):
        @jit.rawkernel(device=True)
        def mark(x):
            if enabled:
                x[0] = 1
                return x[0]

        return mark

    mark_off = marker(False)

    @jit.rawkernel()
    def marks(x):
        mark_off(x)
        mark_off(x)  # a call of the finished function: its return type is void, not unknown

    source = marks.cuda_source(_v(np.int32))
    name = "test_value_returns_dropped_at_compile_time_leave_a_void_function_marker_mark_int32_1d"
    assert f"__device__ void {name}(kspec_jit::array<int, 1> x);" in source
    assert source.count(f"    {name}(x);") == 2


def test_call_in_an_index_runs_once(compiled):
    source = compiled["index_from_call"][0]
    assert source.count("bump_first_int64_1d(x)") == 1


def test_python_function_with_runtime_arguments_is_a_type_error():
    def plain(v):
        return v

    @jit.rawkernel()
    def calls_plain(x):
        x[0] = plain(x[0])

    with pytest.raises(TypeError, match=r"'plain' is a Python function: inside a kernel it runs at compile time"):
        calls_plain.cuda_source(_v(np.int32))


def test_python_function_errors_say_where_they_were_called():
    def refuses(k):
        raise LookupError(f"no variant for {k}")

    @jit.rawkernel()
    def calls_refuses(x):
        refuses(7)(x)

    with pytest.raises(LookupError, match="no variant for 7") as info:
        calls_refuses.cuda_source(_v(np.int32))
    assert any("called at compile time at" in note and "test_jit_calls.py" in note for note in info.value.__notes__)


def test_device_function_names_are_c_identifiers():
    from kspec.jit._device_functions import device_function_name
    from kspec.jit._types import Array, Group, Scalar, Shared

    def _hidden():
        pass

    types = (Array(Scalar("float32"), 2), Shared(Scalar("int8")), Group("thread_block"), Scalar("uint64"))
    name = device_function_name(_hidden, types)
    assert name == "test_device_function_names_are_c_identifiers_hidden_float32_2d_shared_int8_thread_block_uint64"
    assert "__" not in device_function_name(_hidden, ())


# -- cooperative groups -------------------------------------------------------------------------------------


def test_thread_block_methods(compiled):
    source = compiled["block_facts"][0]
    block = "cooperative_groups::this_thread_block()"
    for method in ("thread_rank()", "size()", "num_threads()", "group_index().x", "thread_index().y", "group_dim().z", "dim_threads().x", "sync()"):
        assert f"{block}.{method}" in source, method
    assert f"cooperative_groups::sync({block});" in source
    assert not K.block_facts.is_cooperative(np.zeros((8, 15), np.int64))


def test_grid_group_methods(compiled):
    source = compiled["grid_facts"][0]
    grid = "cooperative_groups::this_grid()"
    for method in ("thread_rank()", "size()", "num_threads()", "num_blocks()", "block_rank()", "is_valid()", "block_index().x",
                   "dim_blocks().y", "group_dim().z", "dim_threads().x", "thread_index().z", "sync()"):
        assert f"{grid}.{method}" in source, method
    assert f"cooperative_groups::sync({grid});" in source
    assert K.grid_facts.is_cooperative(np.zeros((8, 21), np.uint64), _v(np.uint64))


def test_memcpy_async_wait_and_aligned_size(compiled):
    source = compiled["staged_copy"][0]
    assert "#include <cooperative_groups/memcpy_async.h>" in source and "#include <cuda/barrier>" in source
    assert "cooperative_groups::memcpy_async(cooperative_groups::this_thread_block(), &smem[0], &x[base], cuda::aligned_size_t<16>(static_cast<size_t>(512)));" in source
    assert "cooperative_groups::memcpy_async(cooperative_groups::this_thread_block(), &smem[128], &x[(base + 128)], static_cast<size_t>(512));" in source
    assert "cooperative_groups::wait_prior<1>(cooperative_groups::this_thread_block());" in source
    assert "cooperative_groups::wait(cooperative_groups::this_thread_block());" in source
    # a group passed to a device function
    assert "__device__ unsigned int rank_in_thread_block(cooperative_groups::thread_block g);" in source


def test_memcpy_async_without_aligned_size_needs_no_cccl_memory_header():
    @jit.rawkernel()
    def plain_copy(x):
        smem = jit.shared_memory(numpy_float32, 32)
        g = jit.cg.this_thread_block()
        jit.cg.memcpy_async(g, smem, 0, x, 0, 128)
        jit.cg.wait(g)

    source = plain_copy.cuda_source(_v(np.float32, 32))
    assert "#include <cooperative_groups/memcpy_async.h>" in source and "<cuda/barrier>" not in source


numpy_float32 = np.float32


def _copy_kernel(variant):
    @jit.rawkernel()
    def bad_copy(x, y):
        smem = jit.shared_memory(numpy_float32, 32)
        g = jit.cg.this_thread_block()
        if variant == "dtypes":
            jit.cg.memcpy_async(g, smem, 0, y, 0, 128)
        elif variant == "aligned":
            jit.cg.memcpy_async(g, smem, 0, x, 0, 128, aligned_size=12)
        elif variant == "float_size":
            jit.cg.memcpy_async(g, smem, 0, x, 0, 128.0)
        elif variant == "not_a_group":
            jit.cg.wait(x)
        elif variant == "wait_prior":
            jit.cg.wait_prior(g, x[0])
        elif variant == "method":
            g.block_rank()
        elif variant == "dim3":
            x[0] = g.group_index().w

    return bad_copy


@pytest.mark.parametrize("variant, error, message", [
    ("dtypes", TypeError, "dst holds float32 but src holds int32"),
    ("aligned", TypeError, "aligned_size must be a power of two (4, 8, 16...), got 12"),
    ("float_size", TypeError, "size (in bytes) must be an integer"),
    ("not_a_group", TypeError, "cg.wait takes a group"),
    ("wait_prior", TypeError, "step is an int >= 0 known at compile time"),
    ("method", NotImplementedError, "a thread_block has the methods dim_threads, group_dim, group_index, num_threads, size, sync, thread_index, thread_rank, not block_rank()"),
    ("dim3", NotImplementedError, "a dim3 has .x, .y and .z, not .w"),
])
def test_cooperative_group_errors(variant, error, message):
    with pytest.raises(error, match=re.escape(message)) as info:
        _copy_kernel(variant).cuda_source(_v(np.float32, 32), _v(np.int32, 32))
    assert "test_jit_calls.py:" in str(info.value)
