"""<cupy/cuda_workaround.h> under NVRTC: exactly the std:: names CuPy's header exports, from kspec's own
kspec/std_lite.cuh (namespace kspec_std) in place of CCCL's libcu++ (CCCL's headers: ~1.1 s of NVRTC time
per module; kspec's ~0.03 s), and CuPy's header itself where the code names cuda::std.

- std gets CuPy's list (v14.2.0), no more, no less: each name resolves, names outside it do not, so code
  written for CuPy can define them (cupyx.signal's channelizer defines std::is_same_v). The list is checked
  against CuPy's own header where CuPy is installed.
- As under CuPy (CCCL under NVRTC), the fixed-width integer types are global with their limit macros.
- Code naming cuda::std after including only this header compiles: the renderer defines KSPEC_CUDA_STD
  (kspec/render/_analysis.py) and the header is then CuPy's exactly (CCCL's four std headers).
- The exported names behave, by static_assert in constant expressions (no GPU needed): the traits,
  numeric_limits against NumPy's iinfo / finfo, pair, tuple, get, make_tuple, structured bindings, integer
  sequences; an explicit specialization through std (CuPy's ndimage); CCCL's headers before or after it.
- A kernel using it runs on kspec's CPU device (the host branch: the real standard library) and on a GPU
  where there is one, with results checked against NumPy.
"""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest

import kspec
import kspec.compiler._compile as compile_module
import kspec.compiler._includes as includes
from kspec import CompileError
from kspec.compiler import CompileOptions, compile_source
from kspec.render import raw_source, render, specialize
from kspec.render._analysis import uses_cuda_std
from kspec.spec import ElementwiseSpec, ReductionSpec

HEADER = "#include <cupy/cuda_workaround.h>\n#define SA(...) static_assert(__VA_ARGS__, #__VA_ARGS__)\n"
PTX = "compute_90"  # the front end's checks without ptxas, where nothing runs


def compiles(source: str, std: str = "c++17", arch: str = PTX, extra: tuple[str, ...] = ()):
    return compile_source(source, name="std_lite", options=CompileOptions(arch=arch, std=std, extra=extra))


# -- exactly CuPy's names ---------------------------------------------------------------------------------------

# CuPy v14.2.0's <cupy/cuda_workaround.h>, in its order; the integer sequences only from C++14.
CUPY_TRAITS = ["add_const", "add_cv", "add_lvalue_reference", "add_volatile", "alignment_of", "conditional",
               "enable_if", "false_type", "integral_constant", "is_array", "is_base_of", "is_convertible", "is_enum",
               "is_floating_point", "is_function", "is_integral", "is_lvalue_reference", "is_same", "is_signed",
               "is_pointer", "is_unsigned", "is_volatile", "make_signed", "make_unsigned", "remove_cv",
               "remove_reference", "remove_pointer", "result_of", "true_type"]  # fmt: skip
CUPY_SEQUENCES = ["index_sequence", "integer_sequence", "make_index_sequence", "make_integer_sequence"]
CUPY_NAMES = [*CUPY_TRAITS, "numeric_limits", "declval", *CUPY_SEQUENCES, "make_pair", "pair", "get", "tuple",
              "make_tuple"]  # fmt: skip
# What kspec_std also defines (and kspec's header exported before): CuPy code may define these in std itself.
OUTSIDE = ["is_same_v", "enable_if_t", "decay", "bool_constant", "remove_const", "common_type", "is_arithmetic",
           "swap", "tie", "ignore", "tuple_element_t", "index_sequence_for", "underlying_type"]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]


def _probe(names: list[str]) -> str:  # a using-declaration of a name compiles iff std declares it
    return "#include <cupy/cuda_workaround.h>\nnamespace probe {\n" + "".join(f"using std::{n};\n" for n in names) + "}\n"


def test_the_headers_list_is_cupys() -> None:
    text = (ROOT / "templates/include/cupy/cuda_workaround.h").read_text()
    body = text[text.index("#define KSPEC_CUPY_STD_NAMES(X)") : text.index("#if defined(KSPEC_CUDA_STD)")]
    listed = re.findall(r"\bX\((\w+)\)", body.replace("KSPEC_CUPY_STD_NAMES_CXX14(X)", "X(@)"))
    cxx14 = re.findall(r"\bX\((\w+)\)", text[text.index("#define KSPEC_CUPY_STD_NAMES_CXX14(X)") :].split("\n")[0])
    at = listed.index("declval") + 1
    assert listed[:at] + cxx14 + listed[at:] == CUPY_NAMES


def test_cupys_own_header_has_this_list() -> None:
    spec = importlib.util.find_spec("cupy")  # finds the package without importing it (no GPU needed)
    if spec is None or spec.origin is None:
        pytest.skip("CuPy is not installed here")
    header = Path(spec.origin).parent / "_core/include/cupy/cuda_workaround.h"
    assert re.findall(r"using cuda::std::(\w+);", header.read_text()) == CUPY_NAMES


@pytest.mark.parametrize("std", ["c++14", "c++17", "c++20"])
def test_every_cupy_name_resolves_in_std(std: str) -> None:
    compiles(_probe(CUPY_NAMES), std=std)


def test_cxx11_has_no_integer_sequences_as_cupy() -> None:
    compiles(_probe([n for n in CUPY_NAMES if n not in CUPY_SEQUENCES]), std="c++11")
    with pytest.raises(CompileError, match='namespace "std" has no member "index_sequence"'):
        compiles(_probe(["index_sequence"]), std="c++11")


@pytest.mark.parametrize("name", OUTSIDE)
def test_names_outside_cupys_list_are_not_in_std(name: str) -> None:
    with pytest.raises(CompileError, match=f'namespace "std" has no member "{name}"'):
        compiles(_probe([name]))


# cupyx.signal's channelizer (a RawModule, -std=c++17): CuPy's header, then its own std::is_same_v.
CHANNELIZER = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cupy/complex.cuh>
#include <cupy/float16.cuh>
#include <cupy/cuda_workaround.h>
namespace std {
template< class T, class U >
inline constexpr bool is_same_v = is_same<T, U>::value;
}
namespace cg = cooperative_groups;
template <typename T, typename U>
__device__ void channelize(const T* x, U* y) {
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cg::this_thread_block());
  U v = static_cast<U>(x[threadIdx.x]);
  if constexpr (std::is_same_v<U, complex<float>> || std::is_same_v<U, complex<double>>) v *= U(0, 1);
  y[threadIdx.x] = cg::reduce(tile, v, cg::plus<U>());
}
template <typename T, typename U> __global__ void channelize_kernel(const T* x, U* y) { channelize<T, U>(x, y); }
"""


def test_cupyx_signal_channelizer_defines_is_same_v() -> None:
    kspec.RawModule(code=CHANNELIZER, options=("-std=c++17",),
                    name_expressions=["channelize_kernel<float, complex<float>>", "channelize_kernel<double, double>"],
                    ).compile(arch="sm_90")  # fmt: skip


# Code written for CuPy may define in std whatever CuPy's list leaves out; a name kspec exported would clash.
POLYFILLS = HEADER + r"""
namespace std {
template <class T, class U> inline constexpr bool is_same_v = is_same<T, U>::value;
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <bool B> using bool_constant = integral_constant<bool, B>;
template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct decay { typedef typename remove_cv<typename remove_reference<T>::type>::type type; };
template <class T> struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};
template <class T> __host__ __device__ void swap(T& a, T& b) { T t = a; a = b; b = t; }
template <size_t I, class T> using tuple_element_t = typename tuple_element<I, T>::type;
}
SA(std::is_same_v<std::decay<const int&>::type, int> && std::is_arithmetic<float>::value);
SA(std::is_same_v<std::enable_if_t<true, int>, int> && std::is_same_v<std::remove_const<const int>::type, int>);
SA(std::is_same_v<std::tuple_element_t<1, std::tuple<int, char>>, char>);
extern "C" __global__ void k(int* p) { std::swap(p[0], p[1]); }
"""


def test_user_polyfills_of_other_names_compile() -> None:
    compiles(POLYFILLS, arch="sm_90")


# -- the fixed-width integers, global as CCCL declares them under NVRTC -------------------------------------------

FIXED_WIDTH = HEADER + r"""
SA(sizeof(int8_t) == 1 && sizeof(::int16_t) == 2 && sizeof(int32_t) == 4 && sizeof(int64_t) == 8);
SA(std::is_same<uint8_t, unsigned char>::value && std::is_same<uint16_t, unsigned short>::value);
SA(std::is_same<::uint32_t, unsigned int>::value && std::is_same<uint64_t, unsigned long long>::value);
SA(std::is_signed<int64_t>::value && std::is_unsigned<uintptr_t>::value && sizeof(intptr_t) == 8 && sizeof(uintmax_t) == 8);
SA(INT8_MIN == -128 && INT8_MAX == 127 && UINT8_MAX == 255 && INT16_MIN == -32768 && UINT16_MAX == 65535);
SA(INT32_MAX == 2147483647 && INT32_MIN == -INT32_MAX - 1 && UINT32_MAX == 4294967295u);
SA(INT64_MAX == 9223372036854775807LL && UINT64_MAX == ~0ull && SIZE_MAX == ~0ull && INT_MAX == INT32_MAX && CHAR_BIT == 8);
SA(std::numeric_limits<int32_t>::max() == INT32_MAX && std::numeric_limits<uint64_t>::max() == UINT64_MAX);
extern "C" __global__ void k(const uint8_t* a, uint32_t* b, int64_t* c) {
  b[threadIdx.x] = a[threadIdx.x] + UINT32_C(1);
  c[threadIdx.x] = INT64_MIN + (int64_t)b[threadIdx.x];
}
"""


@pytest.mark.parametrize("std", ["c++11", "c++17"])
def test_fixed_width_integers_and_their_macros(std: str) -> None:
    compiles(FIXED_WIDTH, std=std)
    kspec.RawKernel(FIXED_WIDTH, "k").compile(arch="sm_90")


def test_includes_none_of_cccls_std_headers_by_default(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what costs a second: CCCL's type_traits / limits / utility / tuple, or the standard library's
    names = ["limits", "tuple", "type_traits", "utility", "cstdint", "cstddef", "initializer_list", "new",
             "cuda/std/limits", "cuda/std/tuple", "cuda/std/type_traits", "cuda/std/utility"]  # fmt: skip
    for name in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'#error "{name} was included"\n')
    dirs = [str(tmp_path), *includes.include_dirs()]
    monkeypatch.setattr(compile_module, "include_dirs", lambda needs=(): list(dirs))
    with pytest.raises(CompileError, match=r"cuda/std/\w+ was included"):  # the control: the directory is searched
        compiles("#define KSPEC_CUDA_STD 1\n" + HEADER)
    assert compiles(FIXED_WIDTH, arch="sm_90").log.strip() == ""


# -- cuda::std: CuPy's header exactly ---------------------------------------------------------------------------

CUDA_STD = r"""
#include <cupy/cuda_workaround.h>
namespace std {  // still CuPy's list: this polyfill must not clash
template <class T, class U> inline constexpr bool is_same_v = is_same<T, U>::value;
}
static_assert(std::is_same<std::numeric_limits<int>, cuda::std::numeric_limits<int>>::value, "CCCL's");
static_assert(std::is_same_v<std::tuple<int>, cuda::std::tuple<int>> && cuda::std::is_same_v<uint32_t, unsigned>, "");
extern "C" __global__ void k(float* out) {
  out[0] = cuda::std::numeric_limits<float>::max() + std::get<0>(cuda::std::make_tuple(1.0f));
}
"""


def test_code_naming_cuda_std_gets_cupys_header() -> None:
    assert "#define KSPEC_CUDA_STD 1" in raw_source(CUDA_STD)
    kspec.RawKernel(CUDA_STD, "k").compile(arch="sm_90")
    kspec.RawModule(code=CUDA_STD).compile(arch="sm_90")
    with pytest.raises(CompileError, match="numeric_limits"):  # the control: kspec's names, without the rule
        compiles(CUDA_STD)


def test_the_cuda_std_rule() -> None:
    assert uses_cuda_std(["x = cuda::std::max(a, b);"]) and uses_cuda_std(["", "cuda :: std::tuple<int> t;"])
    assert not uses_cuda_std(["std::max(a, b); mycuda::std::x; cuda::stdx", ""])
    assert "KSPEC_CUDA_STD" not in raw_source("#include <cupy/cuda_workaround.h>\nstd::tuple<int> t;\n")


def test_elementwise_and_reduction_code_naming_cuda_std() -> None:
    preamble = "#include <cupy/cuda_workaround.h>"
    top = ElementwiseSpec(name="top", in_params="T x", out_params="T y", preamble=preamble,
                          operation="y = x < cuda::std::numeric_limits<T>::max() ? x : T(0)")  # fmt: skip
    module = render(specialize(top, {"T": "float32"}))
    assert "#define KSPEC_CUDA_STD 1" in module.source.split(preamble)[0]
    compile_source(module.source, name="top", options=CompileOptions(arch="sm_90"),
                   name_expressions=module.name_expressions)  # fmt: skip
    plain = ElementwiseSpec(name="plain", in_params="T x", out_params="T y", preamble=preamble,
                            operation="y = std::numeric_limits<T>::max()")  # fmt: skip
    assert "KSPEC_CUDA_STD" not in render(specialize(plain, {"T": "float32"})).source
    least = ReductionSpec(name="least", in_params="T x", out_params="T y", map_expr="x", reduce_expr="min(a, b)",
                          post_map_expr="y = a", identity="cuda::std::numeric_limits<T>::max()", preamble=preamble)  # fmt: skip
    module = render(specialize(least, {"T": "float32"}))
    assert "#define KSPEC_CUDA_STD 1" in module.source
    compile_source(module.source, name="least", options=CompileOptions(arch="sm_90"),
                   name_expressions=module.name_expressions)  # fmt: skip


# -- the exported traits behave ---------------------------------------------------------------------------------

TRAITS = (
    HEADER
    + r"""
enum E8 : unsigned char { e8 };
enum class E64 : long long { e64 };
struct Base {};
struct Derived : Base {};
struct Callable { __host__ __device__ double operator()(int) const; __host__ __device__ char operator()(float*); };
struct Obj { int data; __host__ __device__ long fn(short) const; };
SA(std::integral_constant<int, 3>::value == 3 && std::integral_constant<int, 3>() == 3 && std::integral_constant<int, 3>()() == 3);
SA(std::is_same<std::integral_constant<int, 3>::value_type, int>::value);
SA(std::is_same<std::true_type, std::integral_constant<bool, true>>::value && std::true_type::value && !std::false_type::value);
SA(std::is_same<std::enable_if<true, int>::type, int>::value && std::is_same<std::enable_if<true>::type, void>::value);
SA(std::is_same<std::conditional<true, int, float>::type, int>::value && std::is_same<std::conditional<false, int, float>::type, float>::value);
SA(!std::is_same<int, long>::value && !std::is_same<long, long long>::value && !std::is_same<int, const int>::value);
SA(std::is_same<std::remove_cv<const volatile int>::type, int>::value && std::is_same<std::remove_cv<const int*>::type, const int*>::value);
SA(std::is_same<std::add_const<int>::type, const int>::value && std::is_same<std::add_volatile<int>::type, volatile int>::value);
SA(std::is_same<std::add_cv<int>::type, const volatile int>::value && std::is_same<std::add_const<int&>::type, int&>::value);
SA(std::is_same<std::remove_reference<int&>::type, int>::value && std::is_same<std::remove_reference<int&&>::type, int>::value);
SA(std::is_same<std::add_lvalue_reference<int>::type, int&>::value && std::is_same<std::add_lvalue_reference<int&&>::type, int&>::value);
SA(std::is_same<std::add_lvalue_reference<void>::type, void>::value);
SA(std::is_same<std::remove_pointer<int* const>::type, int>::value && std::is_same<std::remove_pointer<int>::type, int>::value);
SA(std::is_same<decltype(std::declval<int>()), int&&>::value && std::is_same<decltype(std::declval<Obj&>()), Obj&>::value);
SA(std::is_integral<bool>::value && std::is_integral<const char>::value && std::is_integral<unsigned long long>::value && std::is_integral<wchar_t>::value);
SA(std::is_integral<char16_t>::value && std::is_integral<char32_t>::value && !std::is_integral<float>::value && !std::is_integral<E8>::value && !std::is_integral<int&>::value);
SA(std::is_floating_point<volatile double>::value && std::is_floating_point<long double>::value && !std::is_floating_point<int>::value);
SA(std::is_volatile<volatile int>::value && !std::is_volatile<int>::value);
SA(std::is_pointer<int*>::value && std::is_pointer<const int* const>::value && !std::is_pointer<int Obj::*>::value && !std::is_pointer<int[3]>::value);
SA(std::is_lvalue_reference<int&>::value && !std::is_lvalue_reference<int&&>::value);
SA(std::is_array<int[3]>::value && std::is_array<int[]>::value && !std::is_array<int*>::value);
SA(std::is_function<void(int)>::value && std::is_function<int() const>::value && !std::is_function<void(*)()>::value && !std::is_function<Callable>::value);
SA(std::is_enum<E8>::value && std::is_enum<E64>::value && !std::is_enum<int>::value);
SA(std::is_base_of<Base, Derived>::value && std::is_base_of<Base, Base>::value && !std::is_base_of<Derived, Base>::value && !std::is_base_of<int, int>::value);
SA(std::is_convertible<Derived*, Base*>::value && !std::is_convertible<Base*, Derived*>::value && std::is_convertible<int, double>::value);
SA(std::is_convertible<void, void>::value && !std::is_convertible<int, int&>::value && std::is_convertible<int, const int&>::value);
SA(std::is_signed<int>::value && std::is_signed<float>::value && !std::is_signed<unsigned>::value && !std::is_signed<bool>::value && !std::is_signed<E8>::value);
SA(std::is_unsigned<unsigned char>::value && std::is_unsigned<bool>::value && !std::is_unsigned<double>::value && !std::is_unsigned<Base>::value);
SA(std::is_signed<signed char>::value && std::is_signed<const long long>::value && std::is_unsigned<const unsigned long long>::value);
SA(std::alignment_of<double>::value == 8 && std::alignment_of<char>::value == 1 && std::alignment_of<float4>::value == 16);
SA(std::is_same<std::make_signed<unsigned>::type, int>::value && std::is_same<std::make_signed<const unsigned long>::type, const long>::value);
SA(std::is_same<std::make_signed<char>::type, signed char>::value && std::is_same<std::make_unsigned<char>::type, unsigned char>::value);
SA(std::is_same<std::make_unsigned<long long>::type, unsigned long long>::value && std::is_same<std::make_unsigned<volatile short>::type, volatile unsigned short>::value);
SA(std::is_same<std::make_unsigned<E8>::type, unsigned char>::value && std::is_same<std::make_signed<E64>::type, long>::value && std::is_same<std::make_unsigned<wchar_t>::type, unsigned>::value);
SA(std::is_same<std::make_signed<int>::type, int>::value && std::is_same<std::make_unsigned<unsigned long>::type, unsigned long>::value);
template <class T, class = void> struct has_type : std::false_type {};
template <class T> struct has_type<T, typename std::enable_if<sizeof(typename T::type) != 0>::type> : std::true_type {};
SA(!has_type<std::make_signed<bool>>::value && !has_type<std::make_signed<float>>::value);
SA(std::is_same<std::result_of<Callable(int)>::type, double>::value && std::is_same<std::result_of<Callable(float*)>::type, char>::value);
SA(std::is_same<std::result_of<long (Obj::*(const Obj&, int))(short) const>::type, long>::value);
SA(std::is_same<std::result_of<long (Obj::*(Obj*, int))(short) const>::type, long>::value);
SA(std::is_same<std::result_of<int Obj::*(Obj&)>::type, int&>::value && std::is_same<std::result_of<int Obj::*(Obj&&)>::type, int&&>::value);
SA(std::is_same<std::result_of<int Obj::*(const Obj*)>::type, const int&>::value && std::is_same<std::result_of<int (*(float))(double)>::type, int>::value);
SA(!has_type<std::result_of<Callable(Base)>>::value && !has_type<std::result_of<int(int)>>::value);
extern "C" __global__ void k(int* out) {
  constexpr bool b = std::is_same<int, int>{};
  out[0] = b + std::is_integral<long>::value + std::alignment_of<short>::value;
}
"""
)


@pytest.mark.parametrize("std", ["c++11", "c++14", "c++17", "c++20"])
def test_type_traits(std: str) -> None:
    compiles(TRAITS, std=std)


# -- numeric_limits against NumPy ---------------------------------------------------------------------------------

# C++ type -> NumPy type of the same size and signedness (char and wchar_t are signed on CUDA's targets)
INTEGERS = {"char": np.int8, "signed char": np.int8, "unsigned char": np.uint8, "short": np.int16,
            "unsigned short": np.uint16, "int": np.int32, "unsigned int": np.uint32, "long": np.int64,
            "unsigned long": np.uint64, "long long": np.int64, "unsigned long long": np.uint64,
            "wchar_t": np.int32, "char16_t": np.uint16, "char32_t": np.uint32}  # fmt: skip
FLOATS = {
    "float": (np.float32, np.uint32, "f", "unsigned int"),
    "double": (np.float64, np.uint64, "", "unsigned long long"),
}
# std::float_round_style / float_denorm_style are not in CuPy's list: compared by value
ROUND_TOWARD_ZERO, ROUND_TO_NEAREST, DENORM_ABSENT, DENORM_PRESENT = 0, 1, 0, 1


def _int_literal(value: int, signed: bool) -> str:
    if value < 0:
        return f"({value + 1}LL - 1)"
    return f"{value}{'LL' if signed else 'ULL'}"


def limits_source() -> str:
    lines = [HEADER]
    for c_type, np_type in INTEGERS.items():
        info, signed = np.iinfo(np_type), np.issubdtype(np_type, np.signedinteger)
        digits = info.bits - signed
        lim = f"std::numeric_limits<{c_type}>"
        lines += [
            f"SA({lim}::min() == ({c_type}){_int_literal(int(info.min), signed)});",
            f"SA({lim}::max() == ({c_type}){_int_literal(int(info.max), signed)} && {lim}::lowest() == {lim}::min());",
            f"SA({lim}::digits == {digits} && {lim}::digits10 == {len(str(2**digits)) - 1} && {lim}::radix == 2);",
            f"SA({lim}::is_specialized && {lim}::is_integer && {lim}::is_exact && {lim}::is_bounded);",
            f"SA({lim}::is_signed == {str(signed).lower()} && {lim}::is_modulo == {str(not signed).lower()});",
            f"SA(!{lim}::has_infinity && !{lim}::has_quiet_NaN && !{lim}::has_signaling_NaN && !{lim}::is_iec559);",
            f"SA({lim}::epsilon() == 0 && {lim}::round_error() == 0 && {lim}::infinity() == 0 && {lim}::denorm_min() == 0);",
            f"SA(int({lim}::round_style) == {ROUND_TOWARD_ZERO} && int({lim}::has_denorm) == {DENORM_ABSENT});",
            f"SA(std::numeric_limits<const volatile {c_type}>::max() == {lim}::max());",
        ]
    for c_type, (np_type, bits_type, suffix, c_bits) in FLOATS.items():
        info = np.finfo(np_type)
        lim = f"std::numeric_limits<{c_type}>"

        def literal(x, suffix=suffix):  # decimal, exact on the way back (C++11 has no hexadecimal floats)
            return repr(float(x)) + suffix

        def bits(x, np_type=np_type, bits_type=bits_type):
            return hex(int(np.array(x, np_type).view(bits_type)))

        digits = info.nmant + 1
        quiet = 1 << (info.nmant - 1)
        lines += [
            f"SA({lim}::max() == {literal(info.max)} && {lim}::lowest() == -{literal(info.max)});",
            f"SA({lim}::min() == {literal(info.tiny)} && {lim}::denorm_min() == {literal(info.smallest_subnormal)});",
            f"SA({lim}::epsilon() == {literal(info.eps)} && {lim}::round_error() == 0.5);",
            f"SA(__builtin_bit_cast({c_bits}, {lim}::infinity()) == {bits(np.inf)});",
            f"SA(__builtin_bit_cast({c_bits}, {lim}::quiet_NaN()) == {bits(np.nan)});",
            f"SA({lim}::signaling_NaN() != {lim}::signaling_NaN() && "
            f"(__builtin_bit_cast({c_bits}, {lim}::signaling_NaN()) & {hex(quiet)}) == 0);",
            f"SA({lim}::digits == {digits} && {lim}::digits10 == {info.precision} && "
            f"{lim}::max_digits10 == {math.ceil(1 + digits * math.log10(2))});",
            f"SA({lim}::min_exponent == {info.minexp + 1} && {lim}::max_exponent == {info.maxexp});",
            f"SA({lim}::min_exponent10 == {math.ceil(math.log10(info.tiny))} && "
            f"{lim}::max_exponent10 == {math.floor(math.log10(info.max))});",
            f"SA({lim}::is_specialized && {lim}::is_signed && !{lim}::is_integer && !{lim}::is_exact && {lim}::is_iec559);",
            f"SA({lim}::has_infinity && {lim}::has_quiet_NaN && {lim}::has_signaling_NaN && {lim}::radix == 2);",
            f"SA(int({lim}::has_denorm) == {DENORM_PRESENT} && int({lim}::round_style) == {ROUND_TO_NEAREST} && {lim}::is_bounded);",
        ]
    lines += [
        "SA(std::numeric_limits<bool>::max() && !std::numeric_limits<bool>::min() && std::numeric_limits<bool>::digits == 1);",
        "SA(std::numeric_limits<bool>::is_specialized && !std::numeric_limits<bool>::is_signed && !std::numeric_limits<bool>::is_modulo);",
        "struct NotANumber {};",
        "SA(!std::numeric_limits<NotANumber>::is_specialized && std::numeric_limits<NotANumber>::digits == 0);",
        # in device code, as kernels use them
        'extern "C" __global__ void k(double* d, long long* i) {',
        "  d[0] = std::numeric_limits<float>::infinity(); d[1] = std::numeric_limits<double>::lowest();",
        "  i[0] = std::numeric_limits<long long>::min(); i[1] = std::numeric_limits<unsigned short>::max();",
        "}",
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("std", ["c++11", "c++17"])
def test_numeric_limits_match_numpy(std: str) -> None:
    compiles(limits_source(), std=std)
DEVICE_VALUES = {  # expression -> (NumPy value, the integer type of its bits)
    "std::numeric_limits<float>::max()": (np.finfo(np.float32).max, np.uint32),
    "std::numeric_limits<float>::lowest()": (np.finfo(np.float32).min, np.uint32),
    "std::numeric_limits<float>::infinity()": (np.float32(np.inf), np.uint32),
    "std::numeric_limits<double>::min()": (np.finfo(np.float64).tiny, np.uint64),
    "std::numeric_limits<double>::epsilon()": (np.finfo(np.float64).eps, np.uint64),
    "std::numeric_limits<double>::quiet_NaN()": (np.float64(np.nan), np.uint64),
}


def test_numeric_limits_in_device_code_store_numpys_bits() -> None:
    # what the kernel stores is in the PTX: its bits as an unsigned or signed integer, or as 0fXXXXXXXX / 0dXXXX...
    stores = "".join(
        f"  out{np.dtype(b).itemsize * 8}[{k}] = {expr};\n" for k, (expr, (_, b)) in enumerate(DEVICE_VALUES.items())
    )
    ptx = compiles(
        HEADER + f'extern "C" __global__ void k(float* out32, double* out64) {{\n{stores}}}\n'
    ).binary.decode()
    for expr, (value, bits_type) in DEVICE_VALUES.items():
        width = np.dtype(bits_type).itemsize * 8
        bits = int(np.array(value).astype(f"f{width // 8}").view(bits_type))
        forms = [str(bits), str(bits - (1 << width)), f"0{'f' if width == 32 else 'd'}{bits:0{width // 4}X}"]
        assert re.search(rf", (?:{'|'.join(forms)});", ptx), f"{expr}: none of {forms} in the PTX"


def test_int128_with_nvrtc_device_int128() -> None:
    compiles(
        HEADER
        + r"""
SA(std::is_integral<__int128>::value && std::is_signed<__int128>::value && std::is_unsigned<unsigned __int128>::value);
SA(std::numeric_limits<unsigned __int128>::digits == 128 && std::numeric_limits<__int128>::digits10 == 38);
SA(std::numeric_limits<__int128>::max() == (__int128)(~(unsigned __int128)0 >> 1));
SA(std::numeric_limits<__int128>::min() == -std::numeric_limits<__int128>::max() - 1);
SA(std::is_same<std::make_unsigned<__int128>::type, unsigned __int128>::value);
""",
        extra=("--device-int128",),
    )


# -- utility and tuple ----------------------------------------------------------------------------------------

UTILITY = (
    HEADER
    + r"""
struct Move { int v; __host__ __device__ Move(int x) : v(x) {} Move(Move&&) = default; Move& operator=(Move&&) = default; };
// pair
SA(std::is_same<std::pair<int, float>::first_type, int>::value && std::is_same<std::pair<int, float>::second_type, float>::value);
SA(std::make_pair(2, 3.5).first == 2 && std::make_pair(2, 3.5).second == 3.5);
SA(std::is_same<decltype(std::make_pair(1, "s")), std::pair<int, const char*>>::value);
SA(std::pair<int, int>(1, 2) == std::pair<long, int>(1, 2) && std::pair<int, int>(1, 2) < std::pair<int, int>(1, 3) && std::pair<int, int>(2, 0) > std::pair<int, int>(1, 9));
SA(std::pair<int, int>(1, 2) != std::pair<int, int>(2, 1) && std::pair<int, int>(1, 2) <= std::pair<int, int>(1, 2) && std::pair<int, int>(1, 2) >= std::pair<int, int>(1, 1));
SA(std::tuple_size<std::pair<int, char>>::value == 2 && std::tuple_size<const std::pair<int, char>>::value == 2);
SA(std::is_same<std::tuple_element<1, std::pair<int, char>>::type, char>::value && std::is_same<std::tuple_element<0, const std::pair<int, char>>::type, const int>::value);
SA(std::get<0>(std::pair<int, char>(4, 'x')) == 4 && std::get<char>(std::pair<int, char>(4, 'x')) == 'x' && std::get<int>(std::pair<int, char>(4, 'x')) == 4);
SA(std::is_same<decltype(std::get<1>(std::declval<std::pair<int, char>&>())), char&>::value);
SA(std::is_same<decltype(std::get<1>(std::declval<std::pair<int, char>>())), char&&>::value);
SA(std::is_same<decltype(std::get<0>(std::declval<const std::pair<int, char>&>())), const int&>::value);
SA(__is_trivially_copyable(std::pair<int, double>) && __is_trivially_copyable(std::tuple<int, double, char>));
SA(std::pair<long, double>(std::pair<int, float>(3, 1.5f)).second == 1.5);
// integer sequences
SA(std::is_same<std::make_integer_sequence<int, 4>, std::integer_sequence<int, 0, 1, 2, 3>>::value);
SA(std::is_same<std::make_index_sequence<0>, std::index_sequence<>>::value && std::is_same<std::make_index_sequence<1>, std::index_sequence<0>>::value);
SA(std::is_same<std::make_index_sequence<5>, std::integer_sequence<decltype(sizeof(0)), 0, 1, 2, 3, 4>>::value && std::make_index_sequence<300>::size() == 300);
SA(std::is_same<std::make_integer_sequence<char, 3>::value_type, char>::value);
template <decltype(sizeof(0))... I> constexpr __host__ __device__ int sum(std::index_sequence<I...>) { return (0 + ... + int(I)); }
SA(sum(std::make_index_sequence<100>()) == 4950);
// tuple
SA(std::tuple_size<std::tuple<int, char, double>>::value == 3 && std::tuple_size<const std::tuple<>>::value == 0 && std::tuple_size<volatile std::tuple<int>>::value == 1);
SA(std::is_same<std::tuple_element<2, std::tuple<int, char, double>>::type, double>::value && std::is_same<std::tuple_element<0, const std::tuple<int&>>::type, int&>::value);
SA(std::is_same<std::tuple_element<1, const std::tuple<int, char>>::type, const char>::value);
SA(std::get<2>(std::make_tuple(1, 'c', 2.5)) == 2.5 && std::get<char>(std::make_tuple(1, 'c', 2.5)) == 'c');
SA(std::is_same<decltype(std::make_tuple(1, "s", 2.0f)), std::tuple<int, const char*, float>>::value);
SA(std::make_tuple(1, 2) == std::make_tuple(1L, 2.0) && std::make_tuple(1, 2) < std::make_tuple(1, 3) && !(std::make_tuple(1, 2) < std::make_tuple(1, 2)));
SA(std::make_tuple(2, 0) > std::make_tuple(1, 5) && std::make_tuple(1, 2) != std::make_tuple(1, 3) && std::make_tuple() == std::make_tuple());
SA(std::make_tuple(1, 2) <= std::make_tuple(1, 2) && std::make_tuple(1, 3) >= std::make_tuple(1, 2));
SA(std::get<1>(std::tuple<long, double>(std::make_tuple(1, 2.5f))) == 2.5 && std::get<0>(std::tuple<int, int>(std::make_pair(7, 8))) == 7);
SA(std::is_same<decltype(std::get<0>(std::declval<std::tuple<int, char>&>())), int&>::value);
SA(std::is_same<decltype(std::get<0>(std::declval<std::tuple<int, char>>())), int&&>::value);
SA(std::is_same<decltype(std::get<0>(std::declval<const std::tuple<int, char>&>())), const int&>::value);
SA(std::is_same<decltype(std::get<0>(std::declval<std::tuple<int&, char>>())), int&>::value);
SA(sizeof(std::tuple<int, int, int>) == 12 && sizeof(std::pair<char, int>) == 8);
__host__ __device__ constexpr int bindings() {
  auto t = std::make_tuple(1, 2.5, 'c');
  auto [a, b, c] = t;
  const auto& [d, e, f] = t;
  auto [g, h] = std::make_pair(3, 4);
  return a + int(b * 2) + (c == 'c') + d + int(e) + (f == 'c') + g + h;
}
SA(bindings() == 1 + 5 + 1 + 1 + 2 + 1 + 3 + 4);
__host__ __device__ constexpr int member_swaps() {
  std::pair<int, int> r(1, 2), s(3, 4);
  r.swap(s);
  std::tuple<int, char> t(1, 'a'), u(2, 'b');
  t.swap(u);
  return r.first * 10 + s.second + std::get<0>(t) * 100;
}
SA(member_swaps() == 30 + 2 + 200);
__device__ int move_only() {
  std::tuple<Move, int> t(Move(3), 4);
  std::tuple<Move, int> u(std::move(t));
  std::pair<Move, Move> p(Move(1), Move(2));
  std::pair<Move, Move> q = std::move(p);
  Move m = std::get<0>(std::move(u));
  return m.v + q.second.v + std::get<Move>(u).v;
}
extern "C" __global__ void k(int* out) {
  out[0] = member_swaps() + bindings() + move_only();
  std::tuple<int, float, double> t{1, 2.0f, 3.0};
  std::get<1>(t) += 1.0f;
  std::tuple<> empty;
  (void)empty;
  std::pair<int, int> p;
  p = std::make_pair(out[1], out[2]);
  std::tuple<int&, int&> refs(out[3], out[4]);
  refs = std::make_tuple(7, 8);
  std::pair<int&, int&> prefs(out[5], out[6]);
  prefs = std::make_pair(9, 10);
  std::pair<int&, int&> prefs2 = prefs;
  prefs = prefs2;
  out[7] = p.first + std::get<0>(t) + int(std::get<float>(t)) + std::tuple_size<decltype(t)>::value;
}
__host__ __device__ constexpr int ref_assign() {
  int a = 0, b = 0, c = 0, d = 0;
  std::tuple<int&, int&> t(a, b);
  t = std::make_tuple(1, 2);
  std::tuple<int&, int&> u(c, d);
  u = t;
  std::pair<int&, int&> p(a, b);
  p = std::make_pair(3, 4);
  std::pair<int&, int&> q(c, d);
  q = p;
  return a * 1000 + b * 100 + c * 10 + d;
}
SA(ref_assign() == 3434);
__host__ __device__ constexpr int ctad() {
  std::tuple t(1, 2.5);
  std::pair p(3, 'c');
  std::tuple<int> one(7);
  std::tuple<int> copy = one;          // a non-const lvalue: the copy constructor, not the value one
  std::tuple<std::tuple<int>> nested(one);
  std::tuple<long> widened(one);
  return std::get<0>(t) + int(std::get<1>(t) * 2) + p.first + std::get<0>(copy) + std::get<0>(std::get<0>(nested)) + int(std::get<0>(widened));
}
SA(ctad() == 1 + 5 + 3 + 7 + 7 + 7);
SA(std::is_same<decltype(std::tuple(1, 2.5)), std::tuple<int, double>>::value);
SA(std::is_same<decltype(std::pair(1, 'c')), std::pair<int, char>>::value);
"""
)


@pytest.mark.parametrize("std", ["c++17", "c++20"])
def test_pair_tuple_sequences(std: str) -> None:
    compiles(UTILITY, std=std)


def test_without_nvrtcs_builtin_move_and_forward() -> None:
    # kspec_std's code relies on neither (with the flag, std::move is absent, as under CuPy)
    compiles(HEADER + "SA(std::get<1>(std::make_tuple(1, 2)) == 2 && std::make_pair(1, 2).second == 2);\n",
             extra=("--builtin-move-forward=false",))  # fmt: skip


def test_tuple_basics_in_cxx11() -> None:
    compiles(
        HEADER
        + r"""
__device__ int f(int* p) {
  std::tuple<int, float> t = std::make_tuple(p[0], 2.0f);
  std::pair<int, int> q = std::make_pair(p[1], 3);
  q.swap(q);
  return std::get<0>(t) + int(std::get<1>(t)) + std::get<0>(q) + std::tuple_size<std::tuple<int, float> >::value;
}
SA(std::get<1>(std::make_tuple(1, 2)) == 2 && std::make_pair(1, 2).second == 2);
extern "C" __global__ void k(int* p) { p[2] = f(p); }
""",
        std="c++11",
    )


# -- CuPy's use --------------------------------------------------------------------------------------------------

# An explicit specialization through the using-declaration's qualified name (NVRTC takes it).
NDIMAGE_PREAMBLE = r"""
#include <cupy/cuda_workaround.h>
#include <cupy/float16.cuh>
#include <cupy/math_constants.h>
template<> struct std::is_floating_point<float16> : std::true_type {};
template<> struct std::is_signed<float16> : std::true_type {};
template <class B, class A>
__device__ __forceinline__
typename std::enable_if<(!std::is_floating_point<A>::value || std::is_signed<B>::value), B>::type
cast(A a) { return (B)a; }
template <class B, class A>
__device__ __forceinline__
typename std::enable_if<(std::is_floating_point<A>::value && (!std::is_signed<B>::value)), B>::type
cast(A a) { return (a >= 0) ? (B)a : -(B)(-a); }
"""


def test_cupy_ndimage_preamble() -> None:
    source = (
        NDIMAGE_PREAMBLE
        + r"""
static_assert(std::is_floating_point<float16>::value && std::is_floating_point<float>::value && !std::is_integral<float16>::value, "");
static_assert(std::is_signed<float16>::value && !std::is_unsigned<float16>::value, "");
static_assert(std::is_same<decltype(cast<unsigned char>(float16(1.0f))), unsigned char>::value, "");
extern "C" __global__ void filter(const float16* x, unsigned char* u, float* f, int* i) {
  u[threadIdx.x] = cast<unsigned char>(x[threadIdx.x]);  // the unsigned overload: through -(B)(-a)
  f[threadIdx.x] = cast<float>(x[threadIdx.x]);
  i[threadIdx.x] = cast<int>(f[threadIdx.x]) + (CUDART_INF_F > 0);
}
"""
    )
    compiles(source, arch="sm_90")
    kspec.RawModule(code=source).compile(arch="sm_90")


# -- with CCCL's headers ----------------------------------------------------------------------------------------

# CCCL declares std::tuple_size / std::tuple_element (and their const / volatile partial specializations)
# in ::std for structured bindings of its own types; both sets of specializations must coexist.
WITH_CCCL = r"""
#define SA(...) static_assert(__VA_ARGS__, #__VA_ARGS__)
SA(std::tuple_size<std::tuple<int, char>>::value == 2 && std::tuple_size<const std::tuple<int, char>>::value == 2);
SA(std::tuple_size<const std::pair<int, char>>::value == 2 && std::tuple_size<cuda::std::tuple<int>>::value == 1);
SA(std::tuple_size<const cuda::std::tuple<int, int, int>>::value == 3 && std::tuple_size<const cuda::std::pair<int, int>>::value == 2);
SA(std::is_same<std::tuple_element<1, const std::tuple<int, char>>::type, const char>::value);
SA(std::is_same<std::tuple_element<1, const cuda::std::tuple<int, char>>::type, const char>::value);
SA(std::is_same<std::tuple_element<0, volatile std::pair<int, char>>::type, volatile int>::value);
SA(std::is_same<cuda::std::tuple_element_t<1, cuda::std::tuple<int, char>>, char>::value);
__host__ __device__ constexpr int both() {
  const auto& [a, b] = std::make_tuple(1, 2);
  const auto& [c, d] = cuda::std::make_tuple(3, 4);
  auto [e, f] = std::make_pair(5, 6);
  auto [g, h] = cuda::std::make_pair(7, 8);
  return a + b + c + d + e + f + g + h + std::numeric_limits<int>::digits;
}
SA(both() == 36 + 31);
extern "C" __global__ void k(int* out) { out[0] = both() + std::get<0>(std::make_tuple(1)) + cuda::std::get<0>(cuda::std::make_tuple(2)); }
"""


def _order(cccl_headers: list[str], workaround_first: bool) -> str:
    cccl = "".join(f"#include <{h}>\n" for h in cccl_headers)
    workaround = "#include <cupy/cuda_workaround.h>\n"
    return (workaround + cccl if workaround_first else cccl + workaround) + WITH_CCCL


@pytest.mark.parametrize("workaround_first", [True, False], ids=["workaround-first", "cccl-first"])
@pytest.mark.parametrize("cccl", ["cuda/std/tuple", "cuda/std/utility"])
def test_with_cccl_headers_in_either_order(cccl: str, workaround_first: bool) -> None:
    compiles(_order([cccl, "cuda/std/tuple", "cuda/std/type_traits"], workaround_first), arch="sm_90")


def test_with_cub() -> None:
    # <cub/cub.cuh> itself refuses NVRTC (CCCL's #error); its block headers are what NVRTC code includes.
    # One order only: a cub compile takes seconds (both orders were checked when the header was written).
    source = (
        _order(["cub/block/block_reduce.cuh", "cuda/std/tuple"], workaround_first=True)
        + r"""
__global__ void block_sum(const int* in, int* out) {
  typedef cub::BlockReduce<int, 128> Reduce;
  __shared__ typename Reduce::TempStorage scratch;
  const int total = Reduce(scratch).Sum(in[threadIdx.x]);
  if (threadIdx.x == 0) out[0] = total + std::numeric_limits<int>::digits + std::get<0>(std::make_tuple(1));
}
"""
    )
    compiles(source, arch="sm_90")


# -- results on a device --------------------------------------------------------------------------------------

RESULTS = r"""
#include <cupy/cuda_workaround.h>
extern "C" __global__ void results(double* d, long long* i) {
  d[0] = std::numeric_limits<float>::max();
  d[1] = std::numeric_limits<double>::min();
  d[2] = std::numeric_limits<float>::epsilon();
  d[3] = std::numeric_limits<double>::denorm_min();
  d[4] = std::numeric_limits<double>::infinity();
  d[5] = std::numeric_limits<float>::quiet_NaN();
  i[0] = std::numeric_limits<long long>::min();
  i[1] = std::numeric_limits<unsigned int>::max();
  i[2] = std::numeric_limits<short>::lowest();
  std::tuple<int, double, long long> t(i[3], 2.5, 7);
  int a = std::get<0>(t); double b = std::get<double>(t);
  std::pair<long long, int> p = std::make_pair(std::get<2>(t), a);
  const long long old = i[4];
  i[4] = p.first;
  p.first = old;
  i[5] = p.first * 100 + p.second + static_cast<long long>(b * 10) + std::tuple_size<decltype(t)>::value;
  i[6] = std::is_signed<typename std::make_signed<unsigned>::type>::value + std::is_floating_point<typename std::conditional<true, float, int>::type>::value;
}
"""


def test_results_on_the_device(xp) -> None:
    d, i = xp.zeros(6, np.float64), xp.asarray(np.array([0, 0, 0, 3, 40, 0, 0], np.int64))
    kspec.RawKernel(RESULTS, "results")((1,), (1,), (d, i))
    d, i = xp.asnumpy(d), xp.asnumpy(i)
    f32, f64 = np.finfo(np.float32), np.finfo(np.float64)
    assert d[:5].tolist() == [float(f32.max), float(f64.tiny), float(f32.eps), float(f64.smallest_subnormal), np.inf]
    assert np.isnan(d[5])
    assert i.tolist() == [
        np.iinfo(np.int64).min,
        np.iinfo(np.uint32).max,
        np.iinfo(np.int16).min,
        3,
        7,
        40 * 100 + 3 + 25 + 3,
        2,
    ]


# CCCL before 3.2.0 (CUDA 13.0's toolkit: 3.0.1) declares ::std's tuple protocol with parameter packs under NVRTC;
# kspec's declarations follow the version of the CCCL on the include path, here a stand-in of that one.
OLD_CCCL_STD = """#pragma once
namespace std {
template <class... _Tp> struct tuple_size;
template <decltype(sizeof(0)) _Ip, class... _Tp> struct tuple_element;
}
"""
BINDINGS = r"""
__host__ __device__ constexpr int bound() {
  auto [a, b] = std::make_pair(1, 2);
  const auto& [c, d, e] = std::make_tuple(3, 4, 5);
  return a + b + c + d + e + std::tuple_size<const std::tuple<int, int>>::value;
}
static_assert(bound() == 17, "");
static_assert(std::is_same<std::tuple_element<1, const std::pair<int, char>>::type, const char>::value, "");
"""


@pytest.mark.parametrize("version", [3001004, 3002000])
@pytest.mark.parametrize("workaround_first", [True, False], ids=["workaround-first", "cccl-first"])
def test_tuple_protocol_declared_as_the_cccl_on_the_path(tmp_path, monkeypatch, version: int, workaround_first: bool) -> None:
    (tmp_path / "cuda/std/__cccl").mkdir(parents=True)
    (tmp_path / "cuda/std/__cccl/version.h").write_text(f"#pragma once\n#define CCCL_VERSION {version}\n")
    (tmp_path / "old_cccl_std.h").write_text(OLD_CCCL_STD)
    dirs = [str(tmp_path), *includes.include_dirs()]
    monkeypatch.setattr(compile_module, "include_dirs", lambda needs=(): list(dirs))
    heads = ["#include <cupy/cuda_workaround.h>\n", "#include <old_cccl_std.h>\n"]
    source = "".join(heads if workaround_first else heads[::-1]) + BINDINGS
    if version >= 3002000:  # the control: the one-type declaration clashes with the packs
        with pytest.raises(CompileError, match="declaration is incompatible"):
            compiles(source)
    else:
        compiles(source)
