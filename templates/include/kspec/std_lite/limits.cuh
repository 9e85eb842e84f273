// kspec device header, part of kspec/std_lite.cuh: numeric_limits (in kspec_std) for NVRTC, for bool, the
// character types, every standard integer type and float / double, with the standard's members, all
// constexpr and usable in device code. NVRTC predefines none of the <float.h> macros and has no
// __builtin_huge_val / __builtin_nan, so the floating-point values are written as their IEEE-754 bit
// patterns through __builtin_bit_cast (exact, and constexpr from C++11 on). long double has no device
// representation and is left to the primary template (is_specialized false).
#pragma once

namespace kspec_std {

enum float_round_style {
  round_indeterminate = -1,
  round_toward_zero = 0,
  round_to_nearest = 1,
  round_toward_infinity = 2,
  round_toward_neg_infinity = 3
};

enum float_denorm_style { denorm_indeterminate = -1, denorm_absent = 0, denorm_present = 1 };

// The primary template: for types without a specialization, every member zero or false.
template <class T>
class numeric_limits {
 public:
  static constexpr bool is_specialized = false;
  static constexpr bool is_signed = false;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_toward_zero;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = false;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 0;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 0;
  static constexpr int radix = 0;
  static constexpr int min_exponent = 0;
  static constexpr int min_exponent10 = 0;
  static constexpr int max_exponent = 0;
  static constexpr int max_exponent10 = 0;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  __host__ __device__ static constexpr T min() noexcept { return T(); }
  __host__ __device__ static constexpr T max() noexcept { return T(); }
  __host__ __device__ static constexpr T lowest() noexcept { return T(); }
  __host__ __device__ static constexpr T epsilon() noexcept { return T(); }
  __host__ __device__ static constexpr T round_error() noexcept { return T(); }
  __host__ __device__ static constexpr T infinity() noexcept { return T(); }
  __host__ __device__ static constexpr T quiet_NaN() noexcept { return T(); }
  __host__ __device__ static constexpr T signaling_NaN() noexcept { return T(); }
  __host__ __device__ static constexpr T denorm_min() noexcept { return T(); }
};

// cv-qualified types have the limits of the unqualified one
template <class T> class numeric_limits<const T> : public numeric_limits<T> {};
template <class T> class numeric_limits<volatile T> : public numeric_limits<T> {};
template <class T> class numeric_limits<const volatile T> : public numeric_limits<T> {};

namespace detail {

// What integers and floats have in common, and what integers do not have.
struct exact_limits {
  static constexpr bool is_specialized = true;
  static constexpr bool is_integer = true;
  static constexpr bool is_exact = true;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_toward_zero;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr int max_digits10 = 0;
  static constexpr int radix = 2;
  static constexpr int min_exponent = 0;
  static constexpr int min_exponent10 = 0;
  static constexpr int max_exponent = 0;
  static constexpr int max_exponent10 = 0;
  static constexpr bool traps = false;  // a GPU's integer division by zero does not trap
  static constexpr bool tinyness_before = false;
};

// An integer type of `sizeof(T) * 8` bits, signed or not; the maximum is built as 2 * (2^(digits-1) - 1) + 1
// so that no step overflows T (or int, that narrower types promote to).
template <class T, bool Signed>
struct int_limits : exact_limits {
  static constexpr bool is_signed = Signed;
  static constexpr bool is_modulo = !Signed;
  static constexpr int digits = int(sizeof(T) * 8) - (Signed ? 1 : 0);
  static constexpr int digits10 = digits * 301 / 1000;  // floor(digits * log10(2)), exact up to 128 bits
  __host__ __device__ static constexpr T max() noexcept { return T((T(T(1) << (digits - 1)) - 1) * 2 + 1); }
  __host__ __device__ static constexpr T min() noexcept { return Signed ? T(-max() - 1) : T(0); }
  __host__ __device__ static constexpr T lowest() noexcept { return min(); }
  __host__ __device__ static constexpr T epsilon() noexcept { return T(0); }
  __host__ __device__ static constexpr T round_error() noexcept { return T(0); }
  __host__ __device__ static constexpr T infinity() noexcept { return T(0); }
  __host__ __device__ static constexpr T quiet_NaN() noexcept { return T(0); }
  __host__ __device__ static constexpr T signaling_NaN() noexcept { return T(0); }
  __host__ __device__ static constexpr T denorm_min() noexcept { return T(0); }
};

// The bit patterns of an IEEE-754 binary format with Digits significand bits (the hidden one included) and
// a largest exponent MaxExp as numeric_limits counts it; Bits is the unsigned integer of the same size.
template <class T, class Bits, int Digits, int MaxExp>
struct ieee_bits {
  static constexpr int mantissa_bits = Digits - 1;
  static constexpr Bits exponent_mask = Bits(Bits(~Bits(0)) >> 1) >> mantissa_bits << mantissa_bits;
  static constexpr Bits mantissa_mask = (Bits(1) << mantissa_bits) - 1;
  __host__ __device__ static constexpr T from(Bits b) noexcept { return __builtin_bit_cast(T, b); }
  // the normal number 2^e
  __host__ __device__ static constexpr T power_of_two(int e) noexcept {
    return from(Bits(Bits(e + MaxExp - 1) << mantissa_bits));
  }
};

template <class T, class Bits, int Digits, int MinExp, int MaxExp>
struct float_limits {
 private:
  typedef ieee_bits<T, Bits, Digits, MaxExp> ieee;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = Digits;
  static constexpr int radix = 2;
  static constexpr int min_exponent = MinExp;
  static constexpr int max_exponent = MaxExp;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  __host__ __device__ static constexpr T min() noexcept { return ieee::power_of_two(MinExp - 1); }
  // the largest exponent below infinity's, every mantissa bit set
  __host__ __device__ static constexpr T max() noexcept {
    return ieee::from(Bits(ieee::exponent_mask - (Bits(1) << ieee::mantissa_bits)) | ieee::mantissa_mask);
  }
  __host__ __device__ static constexpr T lowest() noexcept { return -max(); }
  __host__ __device__ static constexpr T epsilon() noexcept { return ieee::power_of_two(1 - Digits); }
  __host__ __device__ static constexpr T round_error() noexcept { return T(0.5); }
  __host__ __device__ static constexpr T infinity() noexcept { return ieee::from(ieee::exponent_mask); }
  // the quiet bit is the top mantissa bit; the signaling NaN has it clear and the next one set (as GCC's)
  __host__ __device__ static constexpr T quiet_NaN() noexcept {
    return ieee::from(ieee::exponent_mask | (Bits(1) << (ieee::mantissa_bits - 1)));
  }
  __host__ __device__ static constexpr T signaling_NaN() noexcept {
    return ieee::from(ieee::exponent_mask | (Bits(1) << (ieee::mantissa_bits - 2)));
  }
  __host__ __device__ static constexpr T denorm_min() noexcept { return ieee::from(Bits(1)); }
};

}  // namespace detail

template <> class numeric_limits<bool> : public detail::exact_limits {
 public:
  static constexpr bool is_signed = false;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 1;
  static constexpr int digits10 = 0;
  __host__ __device__ static constexpr bool min() noexcept { return false; }
  __host__ __device__ static constexpr bool max() noexcept { return true; }
  __host__ __device__ static constexpr bool lowest() noexcept { return false; }
  __host__ __device__ static constexpr bool epsilon() noexcept { return false; }
  __host__ __device__ static constexpr bool round_error() noexcept { return false; }
  __host__ __device__ static constexpr bool infinity() noexcept { return false; }
  __host__ __device__ static constexpr bool quiet_NaN() noexcept { return false; }
  __host__ __device__ static constexpr bool signaling_NaN() noexcept { return false; }
  __host__ __device__ static constexpr bool denorm_min() noexcept { return false; }
};

// char and wchar_t are signed or not as the target says: ask the type
template <> class numeric_limits<char> : public detail::int_limits<char, (char(-1) < char(0))> {};
template <> class numeric_limits<wchar_t> : public detail::int_limits<wchar_t, (wchar_t(-1) < wchar_t(0))> {};
template <> class numeric_limits<char16_t> : public detail::int_limits<char16_t, false> {};
template <> class numeric_limits<char32_t> : public detail::int_limits<char32_t, false> {};
#if defined(__cpp_char8_t)
template <> class numeric_limits<char8_t> : public detail::int_limits<char8_t, false> {};
#endif
template <> class numeric_limits<signed char> : public detail::int_limits<signed char, true> {};
template <> class numeric_limits<unsigned char> : public detail::int_limits<unsigned char, false> {};
template <> class numeric_limits<short> : public detail::int_limits<short, true> {};
template <> class numeric_limits<unsigned short> : public detail::int_limits<unsigned short, false> {};
template <> class numeric_limits<int> : public detail::int_limits<int, true> {};
template <> class numeric_limits<unsigned int> : public detail::int_limits<unsigned int, false> {};
template <> class numeric_limits<long> : public detail::int_limits<long, true> {};
template <> class numeric_limits<unsigned long> : public detail::int_limits<unsigned long, false> {};
template <> class numeric_limits<long long> : public detail::int_limits<long long, true> {};
template <> class numeric_limits<unsigned long long> : public detail::int_limits<unsigned long long, false> {};
#if defined(__CUDACC_RTC_INT128__)
template <> class numeric_limits<__int128> : public detail::int_limits<__int128, true> {};
template <> class numeric_limits<unsigned __int128> : public detail::int_limits<unsigned __int128, false> {};
#endif

// binary32 and binary64; digits10 = floor((digits - 1) * log10(2)), max_digits10 = ceil(1 + digits * log10(2))
template <> class numeric_limits<float> : public detail::float_limits<float, unsigned int, 24, -125, 128> {
 public:
  static constexpr int digits10 = 6;
  static constexpr int max_digits10 = 9;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent10 = 38;
};
template <> class numeric_limits<double> : public detail::float_limits<double, unsigned long long, 53, -1021, 1024> {
 public:
  static constexpr int digits10 = 15;
  static constexpr int max_digits10 = 17;
  static constexpr int min_exponent10 = -307;
  static constexpr int max_exponent10 = 308;
};

}  // namespace kspec_std
