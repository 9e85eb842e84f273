// kspec device header: enable_if and conditional, the two type selections that both CuPy's
// `cupy::type_traits` (cupy/carray.cuh, in every constructor kernel) and kspec's NVRTC std:: names
// (kspec/std_lite/type_traits.cuh) expose, and is_builtin_arithmetic, the C++ arithmetic types (less long
// double) that kspec's complex numbers and CuPy's half types mix with. One definition here; each namespace
// takes them by a using-declaration. Plain C++11: also compiled by the CPU device's host compiler.
#pragma once

namespace kspec {

template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> {
  typedef T type;
};

template <bool B, class T, class F>
struct conditional {
  typedef T type;
};
template <class T, class F>
struct conditional<false, T, F> {
  typedef F type;
};

// Not std::is_arithmetic: a user may declare CuPy's float16 a floating-point type there (CuPy's ndimage does),
// and the overloads that test this must never take a class type.
// `value` is an enumerator, not a static data member: NVRTC makes every static data member a kernel's code
// instantiates a device global (constexpr or not, used or not), and a module with globals loads several times
// slower (tests/render_tests/test_device_globals.py). The same holds for the compile-time constants of every kspec header.
template <class T>
struct is_builtin_arithmetic {
  enum : bool { value = false };
};
#define KSPEC_BUILTIN_ARITHMETIC(T)   \
  template <>                         \
  struct is_builtin_arithmetic<T> {   \
    enum : bool { value = true };     \
  };
KSPEC_BUILTIN_ARITHMETIC(bool)
KSPEC_BUILTIN_ARITHMETIC(char)
KSPEC_BUILTIN_ARITHMETIC(signed char)
KSPEC_BUILTIN_ARITHMETIC(unsigned char)
KSPEC_BUILTIN_ARITHMETIC(short)
KSPEC_BUILTIN_ARITHMETIC(unsigned short)
KSPEC_BUILTIN_ARITHMETIC(int)
KSPEC_BUILTIN_ARITHMETIC(unsigned int)
KSPEC_BUILTIN_ARITHMETIC(long)
KSPEC_BUILTIN_ARITHMETIC(unsigned long)
KSPEC_BUILTIN_ARITHMETIC(long long)
KSPEC_BUILTIN_ARITHMETIC(unsigned long long)
KSPEC_BUILTIN_ARITHMETIC(float)
KSPEC_BUILTIN_ARITHMETIC(double)
#undef KSPEC_BUILTIN_ARITHMETIC

}  // namespace kspec
