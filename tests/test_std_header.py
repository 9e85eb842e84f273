"""kspec/std_lite.cuh: the std:: names that <cupy/cuda_workaround.h> gives NVRTC code, written for kspec in
place of CCCL's libcu++ (with it a kernel including the header compiled in ~2.4 s here; now ~0.1 s).

- Nothing behind the header is CCCL or the standard library: a source that includes it compiles with no CCCL
  directory on NVRTC's include path and with #error headers of the standard library's names first on it.
- Every name it exports compiles and behaves, by static_assert in constant expressions (no GPU needed):
  the traits from C++11 to C++20, numeric_limits against NumPy's iinfo / finfo, pair, tuple, get, make_tuple,
  tie, structured bindings, integer sequences, swap / move / forward (NVRTC's builtins and kspec's own).
- CuPy's use of it (ndimage's preamble: std::is_floating_point<float16> specialized, enable_if overloads) and
  CCCL's headers included before or after it (CCCL declares std::tuple_size / tuple_element in ::std too).
- A kernel using it runs on kspec's CPU device (the host branch: the real standard library) and on a GPU
  where there is one, with results checked against NumPy.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kspec
import kspec.compiler._compile as compile_module
import kspec.compiler._includes as includes
from kspec import CompileError
from kspec.compiler import CompileOptions, compile_source

HEADER = "#include <cupy/cuda_workaround.h>\n#define SA(...) static_assert(__VA_ARGS__, #__VA_ARGS__)\n"
PTX = "compute_90"  # the front end's checks without ptxas, where nothing runs


def compiles(source: str, std: str = "c++17", arch: str = PTX, extra: tuple[str, ...] = ()):
    return compile_source(source, name="std_lite", options=CompileOptions(arch=arch, std=std, extra=extra))


# -- no CCCL, no standard library -------------------------------------------------------------------------------

USES_EVERY_PART = (
    HEADER
    + r"""
extern "C" __global__ void k(double* out, int* n) {
  std::tuple<int, double> t = std::make_tuple(n[0], out[0]);
  std::pair<int, int> p = std::make_pair(1, 2);
  out[1] = std::numeric_limits<double>::max() + std::get<1>(t) + p.second;
  n[1] = std::is_same<std::decay<const int&>::type, int>::value + std::make_index_sequence<3>::size();
}
"""
)


def _without_cccl(monkeypatch: pytest.MonkeyPatch, first: tuple[str, ...] = ()) -> None:
    cudart = includes.cuda_header_dir("cudart")
    dirs = [*first, includes.kspec_include_dir(), *([cudart] if cudart else [])]
    monkeypatch.setattr(compile_module, "include_dirs", lambda needs=(): list(dirs))


def test_compiles_without_cccl_on_the_include_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert includes.cuda_header_dir("cccl"), "the control below needs CCCL installed"
    _without_cccl(monkeypatch)
    with pytest.raises(CompileError, match="cuda/std/tuple"):  # the control: CCCL really is off the path
        compiles("#include <cuda/std/tuple>\n")
    assert compiles(USES_EVERY_PART, arch="sm_90").binary


def test_includes_no_standard_or_cccl_header_by_name(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ["limits", "tuple", "type_traits", "utility", "cstddef", "cstdint", "initializer_list", "new",
             "cuda/std/limits", "cuda/std/tuple", "cuda/std/type_traits", "cuda/std/utility", "cuda/std/cstddef",
             "nv/target"]  # fmt: skip
    for name in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'#error "{name} was included"\n')
    _without_cccl(monkeypatch, first=(str(tmp_path),))
    with pytest.raises(CompileError, match="tuple was included"):  # the control: the poisoned directory is searched
        compiles("#include <tuple>\n")
    compiles(USES_EVERY_PART)


def test_compiles_without_warnings() -> None:
    assert compiles(USES_EVERY_PART, arch="sm_90").log.strip() == ""


# -- the traits -----------------------------------------------------------------------------------------------

TRAITS = (
    HEADER
    + r"""
enum E8 : unsigned char { e8 };
enum class E64 : long long { e64 };
enum Plain { plain };
struct Base {};
struct Derived : Base {};
union U { int i; float f; };
struct NonTrivial { __host__ __device__ NonTrivial(const NonTrivial&) {} };
struct Callable { __host__ __device__ double operator()(int) const; __host__ __device__ char operator()(float*); };
struct Obj { int data; __host__ __device__ long fn(short) const; };
template <class T> struct Same;
SA(std::integral_constant<int, 3>::value == 3 && std::integral_constant<int, 3>() == 3 && std::integral_constant<int, 3>()() == 3);
SA(std::is_same<std::integral_constant<int, 3>::value_type, int>::value);
SA(std::is_same<std::true_type, std::bool_constant<true>>::value && std::true_type::value && !std::false_type::value);
SA(std::is_same<std::enable_if<true, int>::type, int>::value && std::is_same<std::enable_if_t<true>, void>::value);
SA(std::is_same<std::conditional<true, int, float>::type, int>::value && std::is_same<std::conditional_t<false, int, float>, float>::value);
SA(!std::is_same<int, long>::value && !std::is_same<long, long long>::value);
#if __cplusplus >= 201402L
SA(std::is_same_v<int, int> && !std::is_same_v<int, const int>);
#endif
SA(std::is_same<std::remove_const<const volatile int>::type, volatile int>::value);
SA(std::is_same<std::remove_cv<const volatile int>::type, int>::value && std::is_same<std::remove_cv<const int*>::type, const int*>::value);
SA(std::is_same<std::add_const<int>::type, const int>::value && std::is_same<std::add_volatile<int>::type, volatile int>::value);
SA(std::is_same<std::add_cv<int>::type, const volatile int>::value && std::is_same<std::add_const<int&>::type, int&>::value);
SA(std::is_same<std::remove_reference<int&>::type, int>::value && std::is_same<std::remove_reference_t<int&&>, int>::value);
SA(std::is_same<std::add_lvalue_reference<int>::type, int&>::value && std::is_same<std::add_lvalue_reference<int&&>::type, int&>::value);
SA(std::is_same<std::add_lvalue_reference<void>::type, void>::value && std::is_same<std::add_rvalue_reference<int&>::type, int&>::value);
SA(std::is_same<std::add_rvalue_reference<int>::type, int&&>::value && std::is_same<std::add_rvalue_reference<const void>::type, const void>::value);
SA(std::is_same<std::add_pointer<int&>::type, int*>::value && std::is_same<std::add_pointer<void() const>::type, void() const>::value);
SA(std::is_same<std::add_pointer<void(int)>::type, void(*)(int)>::value);
SA(std::is_same<std::remove_pointer<int* const>::type, int>::value && std::is_same<std::remove_pointer<int>::type, int>::value);
SA(std::is_same<decltype(std::declval<int>()), int&&>::value && std::is_same<decltype(std::declval<Obj&>()), Obj&>::value);
SA(std::is_void<const void>::value && !std::is_void<void*>::value);
SA(std::is_integral<bool>::value && std::is_integral<const char>::value && std::is_integral<unsigned long long>::value && std::is_integral<wchar_t>::value);
SA(std::is_integral<char16_t>::value && std::is_integral<char32_t>::value && !std::is_integral<float>::value && !std::is_integral<E8>::value && !std::is_integral<int&>::value);
SA(std::is_floating_point<volatile double>::value && std::is_floating_point<long double>::value && !std::is_floating_point<int>::value);
SA(std::is_arithmetic<const float>::value && std::is_arithmetic<bool>::value && !std::is_arithmetic<int*>::value && !std::is_arithmetic<E8>::value);
SA(std::is_const<const int>::value && !std::is_const<const int*>::value && !std::is_const<const int&>::value && std::is_const<int* const>::value);
SA(std::is_volatile<volatile int>::value && !std::is_volatile<int>::value);
SA(std::is_pointer<int*>::value && std::is_pointer<const int* const>::value && !std::is_pointer<int Obj::*>::value && !std::is_pointer<int[3]>::value);
SA(std::is_lvalue_reference<int&>::value && !std::is_lvalue_reference<int&&>::value && std::is_reference<int&&>::value && !std::is_reference<int>::value);
SA(std::is_array<int[3]>::value && std::is_array<int[]>::value && !std::is_array<int*>::value);
SA(std::is_function<void(int)>::value && std::is_function<int() const>::value && !std::is_function<void(*)()>::value && !std::is_function<Callable>::value);
SA(std::is_enum<E8>::value && std::is_enum<E64>::value && !std::is_enum<int>::value);
SA(std::is_base_of<Base, Derived>::value && std::is_base_of<Base, Base>::value && !std::is_base_of<Derived, Base>::value && !std::is_base_of<int, int>::value);
SA(std::is_convertible<Derived*, Base*>::value && !std::is_convertible<Base*, Derived*>::value && std::is_convertible<int, double>::value);
SA(std::is_convertible<void, void>::value && !std::is_convertible<int, int&>::value && std::is_convertible<int, const int&>::value);
SA(std::is_signed<int>::value && std::is_signed<float>::value && !std::is_signed<unsigned>::value && !std::is_signed<bool>::value && !std::is_signed<E8>::value);
SA(std::is_unsigned<unsigned char>::value && std::is_unsigned<bool>::value && !std::is_unsigned<double>::value && !std::is_unsigned<Base>::value);
SA(std::is_signed<signed char>::value && std::is_signed<const long long>::value && std::is_unsigned<const unsigned long long>::value);
SA(std::is_trivially_copyable<Derived>::value && std::is_trivially_copyable<int>::value && !std::is_trivially_copyable<NonTrivial>::value);
SA(std::alignment_of<double>::value == 8 && std::alignment_of<char>::value == 1 && std::alignment_of<float4>::value == 16);
SA(std::is_same<std::underlying_type<E8>::type, unsigned char>::value && std::is_same<std::underlying_type<E64>::type, long long>::value);
SA(std::is_same<std::make_signed<unsigned>::type, int>::value && std::is_same<std::make_signed<const unsigned long>::type, const long>::value);
SA(std::is_same<std::make_signed<char>::type, signed char>::value && std::is_same<std::make_unsigned<char>::type, unsigned char>::value);
SA(std::is_same<std::make_unsigned<long long>::type, unsigned long long>::value && std::is_same<std::make_unsigned<volatile short>::type, volatile unsigned short>::value);
SA(std::is_same<std::make_unsigned<E8>::type, unsigned char>::value && std::is_same<std::make_signed<E64>::type, long>::value && std::is_same<std::make_unsigned<wchar_t>::type, unsigned>::value);
SA(std::is_same<std::make_signed<int>::type, int>::value && std::is_same<std::make_unsigned<unsigned long>::type, unsigned long>::value);
SA(std::is_same<std::decay<const int&>::type, int>::value && std::is_same<std::decay<int[3]>::type, int*>::value && std::is_same<std::decay_t<const int(&)[2]>, const int*>::value);
SA(std::is_same<std::decay<void(int)>::type, void(*)(int)>::value && std::is_same<std::decay<int(&&)()>::type, int(*)()>::value);
SA(std::is_same<std::common_type<int, double>::type, double>::value && std::is_same<std::common_type<char, short>::type, int>::value);
SA(std::is_same<std::common_type<const int&, long>::type, long>::value && std::is_same<std::common_type<float>::type, float>::value);
SA(std::is_same<std::common_type<Derived*, Base*, const Base*>::type, const Base*>::value && std::is_same<std::common_type<void, void>::type, void>::value);
SA(std::is_same<std::common_type<unsigned, int, long long, float>::type, float>::value);
template <class T, class = void> struct has_type : std::false_type {};
template <class T> struct has_type<T, typename std::enable_if<sizeof(typename T::type) != 0>::type> : std::true_type {};
SA(!has_type<std::common_type<int, Base>>::value && !has_type<std::common_type<>>::value && !has_type<std::common_type<int, float, Base>>::value);
SA(!has_type<std::underlying_type<int>>::value && !has_type<std::make_signed<bool>>::value && !has_type<std::make_signed<float>>::value);
SA(std::is_same<std::result_of<Callable(int)>::type, double>::value && std::is_same<std::result_of<Callable(float*)>::type, char>::value);
SA(std::is_same<std::result_of<long (Obj::*(const Obj&, int))(short) const>::type, long>::value);
SA(std::is_same<std::result_of<long (Obj::*(Obj*, int))(short) const>::type, long>::value);
SA(std::is_same<std::result_of<int Obj::*(Obj&)>::type, int&>::value && std::is_same<std::result_of<int Obj::*(Obj&&)>::type, int&&>::value);
SA(std::is_same<std::result_of<int Obj::*(const Obj*)>::type, const int&>::value && std::is_same<std::result_of<int (*(float))(double)>::type, int>::value);
SA(!has_type<std::result_of<Callable(Base)>>::value && !has_type<std::result_of<int(int)>>::value);
SA(std::is_same<std::common_type_t<int, unsigned>, unsigned>::value && std::is_same<std::make_unsigned_t<int>, unsigned>::value);
SA(std::is_same<std::remove_cv_t<const int>, int>::value && std::is_same<std::add_pointer_t<int>, int*>::value && std::is_same<std::underlying_type_t<E8>, unsigned char>::value);
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
            f"SA({lim}::round_style == std::round_toward_zero && {lim}::has_denorm == std::denorm_absent);",
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
            f"SA({lim}::has_denorm == std::denorm_present && {lim}::round_style == std::round_to_nearest && {lim}::is_bounded);",
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
SA(std::is_same<std::tuple_element<1, std::pair<int, char>>::type, char>::value && std::is_same<std::tuple_element_t<0, const std::pair<int, char>>, const int>::value);
SA(std::get<0>(std::pair<int, char>(4, 'x')) == 4 && std::get<char>(std::pair<int, char>(4, 'x')) == 'x' && std::get<int>(std::pair<int, char>(4, 'x')) == 4);
SA(std::is_same<decltype(std::get<1>(std::declval<std::pair<int, char>&>())), char&>::value);
SA(std::is_same<decltype(std::get<1>(std::declval<std::pair<int, char>>())), char&&>::value);
SA(std::is_same<decltype(std::get<0>(std::declval<const std::pair<int, char>&>())), const int&>::value);
SA(std::is_trivially_copyable<std::pair<int, double>>::value && std::is_trivially_copyable<std::tuple<int, double, char>>::value);
SA(std::pair<long, double>(std::pair<int, float>(3, 1.5f)).second == 1.5);
// integer sequences
SA(std::is_same<std::make_integer_sequence<int, 4>, std::integer_sequence<int, 0, 1, 2, 3>>::value);
SA(std::is_same<std::make_index_sequence<0>, std::index_sequence<>>::value && std::is_same<std::make_index_sequence<1>, std::index_sequence<0>>::value);
SA(std::is_same<std::make_index_sequence<5>, std::integer_sequence<decltype(sizeof(0)), 0, 1, 2, 3, 4>>::value && std::make_index_sequence<300>::size() == 300);
SA(std::is_same<std::make_integer_sequence<char, 3>::value_type, char>::value && std::is_same<std::index_sequence_for<int, int>, std::index_sequence<0, 1>>::value);
template <decltype(sizeof(0))... I> constexpr __host__ __device__ int sum(std::index_sequence<I...>) { return (0 + ... + int(I)); }
SA(sum(std::make_index_sequence<100>()) == 4950);
// tuple
SA(std::tuple_size<std::tuple<int, char, double>>::value == 3 && std::tuple_size<const std::tuple<>>::value == 0 && std::tuple_size<volatile std::tuple<int>>::value == 1);
SA(std::is_same<std::tuple_element<2, std::tuple<int, char, double>>::type, double>::value && std::is_same<std::tuple_element_t<0, const std::tuple<int&>>, int&>::value);
SA(std::is_same<std::tuple_element_t<1, const std::tuple<int, char>>, const char>::value);
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
SA(std::is_same<decltype(std::tie(std::declval<int&>(), std::declval<float&>())), std::tuple<int&, float&>>::value);
SA(std::is_same<decltype(std::forward_as_tuple(std::declval<int&>(), 1)), std::tuple<int&, int&&>>::value);
SA(sizeof(std::tuple<int, int, int>) == 12 && sizeof(std::pair<char, int>) == 8);
__host__ __device__ constexpr int bindings() {
  auto t = std::make_tuple(1, 2.5, 'c');
  auto [a, b, c] = t;
  const auto& [d, e, f] = t;
  auto [g, h] = std::make_pair(3, 4);
  return a + int(b * 2) + (c == 'c') + d + int(e) + (f == 'c') + g + h;
}
SA(bindings() == 1 + 5 + 1 + 1 + 2 + 1 + 3 + 4);
__host__ __device__ constexpr int through_tie() {
  int x = 0, y = 0;
  std::tie(x, y) = std::make_tuple(5, 6);
  int z = 0;
  std::tie(z, std::ignore) = std::make_pair(9, 1.0);
  return x * 100 + y * 10 + z;
}
__device__ int through_tie_device() {
  int x = 0, y = 0, z = 0;
  std::tie(x, y) = std::make_tuple(5, 6);
  std::tie(z, std::ignore) = std::make_pair(9, 1.0);
  return x * 100 + y * 10 + z;
}
__host__ __device__ constexpr int swaps() {
  int a = 1, b = 2;
  std::swap(a, b);
  int p[2] = {3, 4}, q[2] = {5, 6};
  std::swap(p, q);
  std::pair<int, int> r(1, 2), s(3, 4);
  std::swap(r, s);
  std::tuple<int, char> t(1, 'a'), u(2, 'b');
  std::swap(t, u);
  t.swap(u);
  return a * 1000 + b * 100 + p[0] * 10 + q[1] + r.first * 10000 + std::get<0>(t) * 100000;
}
__host__ __device__ constexpr int moves() {
  int a = 4;
  int&& r = std::move(a);
  int& l = std::forward<int&>(a);
  return r + l + std::forward<int>(3);
}
struct Wrap { int v; };
__device__ int move_only() {
  std::tuple<Move, int> t(Move(3), 4);
  std::tuple<Move, int> u(std::move(t));
  std::pair<Move, Move> p(Move(1), Move(2));
  std::pair<Move, Move> q = std::move(p);
  Move m = std::get<0>(std::move(u));
  return m.v + q.second.v + std::get<Move>(u).v;
}
extern "C" __global__ void k(int* out) {
  out[0] = through_tie_device() + swaps() + moves() + bindings() + move_only();
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
SA(through_tie() == 569);
SA(swaps() == 132154);
SA(moves() == 11);
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
def test_pair_tuple_sequences_swap_move(std: str) -> None:
    compiles(UTILITY, std=std)


def test_move_and_forward_of_its_own_without_nvrtc_builtins() -> None:
    # NVRTC declares std::move / std::forward itself unless told not to; then the header defines them
    source = (
        HEADER
        + r"""
__host__ __device__ constexpr int f() { int a = 1; int&& r = std::move(a); return std::forward<int&>(r) + std::forward<int>(2); }
SA(f() == 3);
SA(std::is_same<decltype(std::move(std::declval<int&>())), int&&>::value);
"""
    )
    compiles(source, extra=("--builtin-move-forward=false",))
    compiles(source)


def test_tuple_basics_in_cxx11() -> None:
    compiles(
        HEADER
        + r"""
__device__ int f(int* p) {
  std::tuple<int, float> t = std::make_tuple(p[0], 2.0f);
  int a; float b;
  std::tie(a, b) = t;
  std::pair<int, int> q = std::make_pair(p[1], 3);
  std::swap(q.first, q.second);
  return a + int(b) + std::get<0>(q) + std::get<1>(t) + std::tuple_size<std::tuple<int, float> >::value;
}
SA(std::get<1>(std::make_tuple(1, 2)) == 2 && std::make_pair(1, 2).second == 2);
extern "C" __global__ void k(int* p) { p[2] = f(p); }
""",
        std="c++11",
    )


# -- CuPy's use --------------------------------------------------------------------------------------------------

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
static_assert(std::is_arithmetic<float16>::value && std::is_signed<float16>::value && !std::is_unsigned<float16>::value, "");
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
  int a = 0; double b = 0;
  std::tie(a, b, std::ignore) = t;
  std::pair<long long, int> p = std::make_pair(std::get<2>(t), a);
  std::swap(p.first, i[4]);
  i[5] = p.first * 100 + p.second + static_cast<long long>(b * 10) + std::tuple_size<decltype(t)>::value;
  i[6] = std::is_signed<typename std::make_signed<unsigned>::type>::value + std::is_floating_point<typename std::common_type<int, float>::type>::value;
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
