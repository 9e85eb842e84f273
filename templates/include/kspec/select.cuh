// kspec device header: enable_if and conditional, the two type selections that both CuPy's
// `cupy::type_traits` (cupy/carray.cuh, in every constructor kernel) and kspec's NVRTC std:: names
// (kspec/std_lite/type_traits.cuh) expose. One definition here; each namespace takes them by a
// using-declaration. Plain C++11: also compiled by the CPU device's host compiler.
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

}  // namespace kspec
