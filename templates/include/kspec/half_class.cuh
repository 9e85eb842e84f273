// What CuPy's float16 and bfloat16 classes share (cupy/float16.cuh, cupy/bfloat16.cuh), written once and
// stamped into each: the conversions from integers (through float, as CuPy converts them: every integer the
// type can hold is exact in float, so this rounds once), assignment from anything that converts explicitly,
// the bit-level predicates, compound assignment computed in float, and the functions of two values.
// CLS is the class, BITS its kspec_half bit helper (kspec/half_bits.cuh), FROM_FLOAT CUDA's float conversion.
#pragma once

#include <kspec/select.cuh>
#include <kspec/types.cuh>  // KSPEC_HALF_MIN_MAX

#define KSPEC_HALF_CLASS_MEMBERS(CLS, BITS, FROM_FLOAT)                                             \
  explicit __device__ CLS(bool v) : data_(FROM_FLOAT(v ? 1.0f : 0.0f)) {}                          \
  explicit __device__ CLS(int v) : data_(FROM_FLOAT(static_cast<float>(v))) {}                     \
  explicit __device__ CLS(unsigned int v) : data_(FROM_FLOAT(static_cast<float>(v))) {}            \
  explicit __device__ CLS(long v) : data_(FROM_FLOAT(static_cast<float>(v))) {}                    \
  explicit __device__ CLS(unsigned long v) : data_(FROM_FLOAT(static_cast<float>(v))) {}           \
  explicit __device__ CLS(long long v) : data_(FROM_FLOAT(static_cast<float>(v))) {}               \
  explicit __device__ CLS(unsigned long long v) : data_(FROM_FLOAT(static_cast<float>(v))) {}      \
                                                                                                    \
  CLS& operator=(const CLS&) = default;                                                             \
  template <typename T>                                                                             \
  __device__ CLS& operator=(const T& rhs) {                                                         \
    *this = static_cast<CLS>(rhs);                                                                  \
    return *this;                                                                                   \
  }                                                                                                 \
                                                                                                    \
  __device__ int iszero() const { return BITS::iszero(to_bits()); }                                 \
  __device__ int isnan() const { return BITS::isnan(to_bits()); }                                   \
  __device__ int isinf() const { return BITS::isinf(to_bits()); }                                   \
  __device__ int isfinite() const { return BITS::isfinite(to_bits()); }                             \
  __device__ int signbit() const { return BITS::signbit(to_bits()); }                               \
                                                                                                    \
  template <typename T>                                                                             \
  __device__ CLS& operator+=(const T& rhs) { return *this = *this + rhs; }                          \
  template <typename T>                                                                             \
  __device__ CLS& operator-=(const T& rhs) { return *this = *this - rhs; }                          \
  template <typename T>                                                                             \
  __device__ CLS& operator*=(const T& rhs) { return *this = *this * rhs; }                          \
  template <typename T>                                                                             \
  __device__ CLS& operator/=(const T& rhs) { return *this = *this / rhs; }

// Templates with an unused defaulted parameter, compiled only where a kernel uses them (see cupy/carray.cuh).
// min and max are CUDA's on float: fminf / fmaxf, where a NaN operand loses (kspec/types.cuh, as for __half).
#define KSPEC_HALF_CLASS_FUNCTIONS(CLS, BITS)                                                                  \
  KSPEC_HALF_MIN_MAX(CLS, float, CLS)                                                                          \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ int iszero(CLS x) { return x.iszero(); }                                          \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ int isnan(CLS x) { return x.isnan(); }                                            \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ int isinf(CLS x) { return x.isinf(); }                                            \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ int isfinite(CLS x) { return x.isfinite(); }                                      \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ int signbit(CLS x) { return x.signbit(); }                                        \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ CLS copysign(CLS x, CLS y) { return CLS::from_bits(BITS::copysign(x.to_bits(), y.to_bits())); } \
  template <typename = void>                                                                                   \
  __device__ __forceinline__ CLS nextafter(CLS x, CLS y) {                                                     \
    return CLS::from_bits(BITS::nextafter(x.to_bits(), y.to_bits(), float(x) < float(y)));                    \
  }

// CUDA's __half and __nv_bfloat16 convert implicitly to float and from every arithmetic type, so `h == 0` or
// `h * 2` is ambiguous between CUDA's operator on two halves and the built-in one on float; under CuPy these
// values are its classes, which compute in float. In CuPy's environment (these headers) a half mixed with a
// built-in arithmetic value computes in float too: the result is float(h) OP v, of the built-in operator's type.
#define KSPEC_HALF_MIXED_OPERATOR(HALF, OP)                                                               \
  template <class T, class = typename ::kspec::enable_if<::kspec::is_builtin_arithmetic<T>::value>::type> \
  __device__ __forceinline__ auto operator OP(const HALF& h, T v)->decltype(float() OP v) {               \
    return static_cast<float>(h) OP v;                                                                    \
  }                                                                                                       \
  template <class T, class = typename ::kspec::enable_if<::kspec::is_builtin_arithmetic<T>::value>::type> \
  __device__ __forceinline__ auto operator OP(T v, const HALF& h)->decltype(v OP float()) {               \
    return v OP static_cast<float>(h);                                                                    \
  }
#define KSPEC_HALF_MIXED_OPERATORS(HALF)    \
  KSPEC_HALF_MIXED_OPERATOR(HALF, +)        \
  KSPEC_HALF_MIXED_OPERATOR(HALF, -)        \
  KSPEC_HALF_MIXED_OPERATOR(HALF, *)        \
  KSPEC_HALF_MIXED_OPERATOR(HALF, /)        \
  KSPEC_HALF_MIXED_OPERATOR(HALF, ==)       \
  KSPEC_HALF_MIXED_OPERATOR(HALF, !=)       \
  KSPEC_HALF_MIXED_OPERATOR(HALF, <)        \
  KSPEC_HALF_MIXED_OPERATOR(HALF, <=)       \
  KSPEC_HALF_MIXED_OPERATOR(HALF, >)        \
  KSPEC_HALF_MIXED_OPERATOR(HALF, >=)
