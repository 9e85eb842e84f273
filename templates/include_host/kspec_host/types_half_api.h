// kspec's CPU device: the API shared by __half (cuda_fp16.h) and __nv_bfloat16 (cuda_bf16.h), included once
// per type with these macros defined (no include guard on purpose):
//   KH_T     the scalar type (__half)          KH_T2    the pair type (__half2)
//   KH_FMT   kspec_host::half_format / bf16_format
//   KH_N     the name in conversions (half -> __float2half, __half2int_rz, __half_as_ushort)
//   KH_N2    the pair's name in conversions (half2 -> __float2half2_rn, __half22float2)
//   KH_RAW   the raw struct (__half_raw)       KH_RAW2  the raw pair (__half2_raw)
// Arithmetic computes in float and rounds once, which is exact for + - * / and sqrt (float carries more than
// twice the bits of either format) and is what the GPU's native half/bfloat16 instructions give.
#define KH_CAT_(a, b) a##b
#define KH_CAT(a, b) KH_CAT_(a, b)
#define KH_CAT3(a, b, c) KH_CAT(KH_CAT(a, b), c)
#define KH_F(x) KH_CAT3(__, KH_N, 2float)(x)
#define KH_FROM_F(x) KH_CAT(__float2, KH_N)(x)

struct KH_RAW {
  unsigned short x;
};
struct KH_RAW2 {
  unsigned short x;
  unsigned short y;
};

struct alignas(2) KH_T {
 protected:
  unsigned short __x;

 public:
  KH_T() = default;
  __host__ __device__ KH_T(const KH_RAW& raw) : __x(raw.x) {}
  __host__ __device__ KH_T& operator=(const KH_RAW& raw) { __x = raw.x; return *this; }
  __host__ __device__ operator KH_RAW() const { KH_RAW r; r.x = __x; return r; }
  __host__ __device__ KH_T(float f) : __x(kspec_host::from_float<KH_FMT>(f)) {}
  __host__ __device__ KH_T(double d) : __x(kspec_host::from_double<KH_FMT>(d)) {}
  __host__ __device__ operator float() const { return KH_FMT::to_float(__x); }
  __host__ __device__ KH_T& operator=(float f) { __x = kspec_host::from_float<KH_FMT>(f); return *this; }
  __host__ __device__ KH_T& operator=(double d) { __x = kspec_host::from_double<KH_FMT>(d); return *this; }
  // Integers in (rounded to nearest) and out (truncated, saturated, NaN -> 0), as CUDA's header allows.
#define KH_INT(I)                                                                                          \
  __host__ __device__ KH_T(I v) : __x(kspec_host::from_integer<KH_FMT>(v, kspec_host::round_rn)) {}        \
  __host__ __device__ KH_T& operator=(I v) { __x = kspec_host::from_integer<KH_FMT>(v, kspec_host::round_rn); return *this; } \
  __host__ __device__ operator I() const { return kspec_host::saturate_to<I>(KH_FMT::to_float(__x), kspec_host::round_rz); }
  KH_INT(short)
  KH_INT(unsigned short)
  KH_INT(int)
  KH_INT(unsigned int)
  KH_INT(long)
  KH_INT(unsigned long)
  KH_INT(long long)
  KH_INT(unsigned long long)
#undef KH_INT
  __host__ __device__ operator signed char() const { return kspec_host::saturate_to<signed char>(float(*this), kspec_host::round_rz); }
  __host__ __device__ operator unsigned char() const { return kspec_host::saturate_to<unsigned char>(float(*this), kspec_host::round_rz); }
  __host__ __device__ operator char() const { return kspec_host::saturate_to<char>(float(*this), kspec_host::round_rz); }
  __host__ __device__ operator bool() const { return (__x & 0x7fffu) != 0; }
};

struct alignas(4) KH_T2 {
  KH_T x;
  KH_T y;
  KH_T2() = default;
  __host__ __device__ KH_T2(const KH_T& a, const KH_T& b) : x(a), y(b) {}
  __host__ __device__ KH_T2(const KH_RAW2& raw) : x(KH_RAW{raw.x}), y(KH_RAW{raw.y}) {}
  __host__ __device__ KH_T2& operator=(const KH_RAW2& raw) { x = KH_RAW{raw.x}; y = KH_RAW{raw.y}; return *this; }
  __host__ __device__ operator KH_RAW2() const {
    KH_RAW2 r;
    r.x = static_cast<KH_RAW>(x).x;
    r.y = static_cast<KH_RAW>(y).x;
    return r;
  }
};

// ------------------------------------------------------------------------------------------------ bits
__device__ __forceinline__ unsigned short KH_CAT3(__, KH_N, _as_ushort)(KH_T h) { return static_cast<KH_RAW>(h).x; }
__device__ __forceinline__ short KH_CAT3(__, KH_N, _as_short)(KH_T h) { return static_cast<short>(static_cast<KH_RAW>(h).x); }
__device__ __forceinline__ KH_T KH_CAT(__ushort_as_, KH_N)(unsigned short b) { return KH_T(KH_RAW{b}); }
__device__ __forceinline__ KH_T KH_CAT(__short_as_, KH_N)(short b) { return KH_T(KH_RAW{static_cast<unsigned short>(b)}); }

// ------------------------------------------------------------------------------------------------ conversions
__device__ __forceinline__ float KH_CAT3(__, KH_N, 2float)(KH_T h) { return KH_FMT::to_float(static_cast<KH_RAW>(h).x); }
__device__ __forceinline__ KH_T KH_CAT(__float2, KH_N)(float f) { return KH_T(KH_RAW{kspec_host::from_float<KH_FMT>(f)}); }
__device__ __forceinline__ KH_T KH_CAT(__double2, KH_N)(double d) { return KH_T(KH_RAW{kspec_host::from_double<KH_FMT>(d)}); }
#define KH_ROUNDED(MODE)                                                                                   \
  __device__ __forceinline__ KH_T KH_CAT3(__float2, KH_N, _r##MODE)(float f) {                             \
    return KH_T(KH_RAW{kspec_host::from_float<KH_FMT>(f, kspec_host::round_r##MODE)});                     \
  }                                                                                                        \
  __device__ __forceinline__ KH_T KH_CAT3(__double2, KH_N, _r##MODE)(double d) {                           \
    return KH_T(KH_RAW{kspec_host::from_double<KH_FMT>(d, kspec_host::round_r##MODE)});                    \
  }                                                                                                        \
  KH_INT_IN(int, MODE) KH_INT_IN(uint, MODE) KH_INT_IN(short, MODE) KH_INT_IN(ushort, MODE)               \
  KH_INT_IN(ll, MODE) KH_INT_IN(ull, MODE)                                                                 \
  KH_INT_OUT(int, MODE) KH_INT_OUT(uint, MODE) KH_INT_OUT(short, MODE) KH_INT_OUT(ushort, MODE)           \
  KH_INT_OUT(ll, MODE) KH_INT_OUT(ull, MODE)
#define KH_INT_IN(SHORT, MODE)                                                                             \
  __device__ __forceinline__ KH_T KH_CAT3(__##SHORT##2, KH_N, _r##MODE)(kspec_host_int_##SHORT v) {        \
    return KH_T(KH_RAW{kspec_host::from_integer<KH_FMT>(v, kspec_host::round_r##MODE)});                   \
  }
#define KH_INT_OUT(SHORT, MODE)                                                                            \
  __device__ __forceinline__ kspec_host_int_##SHORT KH_CAT3(__, KH_N, 2##SHORT##_r##MODE)(KH_T h) {        \
    return kspec_host::saturate_to<kspec_host_int_##SHORT>(KH_F(h), kspec_host::round_r##MODE);            \
  }
KH_ROUNDED(n)
KH_ROUNDED(z)
KH_ROUNDED(d)
KH_ROUNDED(u)
#undef KH_ROUNDED
#undef KH_INT_IN
#undef KH_INT_OUT
__device__ __forceinline__ signed char KH_CAT3(__, KH_N, 2char_rz)(KH_T h) { return kspec_host::saturate_to<signed char>(KH_F(h), kspec_host::round_rz); }
__device__ __forceinline__ unsigned char KH_CAT3(__, KH_N, 2uchar_rz)(KH_T h) { return kspec_host::saturate_to<unsigned char>(KH_F(h), kspec_host::round_rz); }

// ------------------------------------------------------------------------------------------------ pairs
__device__ __forceinline__ KH_T2 KH_CAT3(__float2, KH_N2, _rn)(float f) { const KH_T h = KH_FROM_F(f); return KH_T2(h, h); }
__device__ __forceinline__ KH_T2 KH_CAT3(__floats2, KH_N2, _rn)(float a, float b) { return KH_T2(KH_FROM_F(a), KH_FROM_F(b)); }
__device__ __forceinline__ KH_T2 KH_CAT3(__float22, KH_N2, _rn)(float2 f) { return KH_T2(KH_FROM_F(f.x), KH_FROM_F(f.y)); }
__device__ __forceinline__ float2 KH_CAT3(__, KH_N2, 2float2)(KH_T2 h) { return make_float2(KH_F(h.x), KH_F(h.y)); }
__device__ __forceinline__ KH_T2 KH_CAT3(__, KH_N, KH_CAT(2, KH_N2))(KH_T h) { return KH_T2(h, h); }
__device__ __forceinline__ KH_T2 KH_CAT(__halves2, KH_N2)(KH_T a, KH_T b) { return KH_T2(a, b); }
__device__ __forceinline__ KH_T KH_CAT(__low2, KH_N)(KH_T2 h) { return h.x; }
__device__ __forceinline__ KH_T KH_CAT(__high2, KH_N)(KH_T2 h) { return h.y; }
__device__ __forceinline__ float __low2float(KH_T2 h) { return KH_F(h.x); }
__device__ __forceinline__ float __high2float(KH_T2 h) { return KH_F(h.y); }
__device__ __forceinline__ KH_T2 KH_CAT(__lows2, KH_N2)(KH_T2 a, KH_T2 b) { return KH_T2(a.x, b.x); }
__device__ __forceinline__ KH_T2 KH_CAT(__highs2, KH_N2)(KH_T2 a, KH_T2 b) { return KH_T2(a.y, b.y); }
__device__ __forceinline__ KH_T2 KH_CAT(__low2, KH_N2)(KH_T2 a) { return KH_T2(a.x, a.x); }
__device__ __forceinline__ KH_T2 KH_CAT(__high2, KH_N2)(KH_T2 a) { return KH_T2(a.y, a.y); }
__device__ __forceinline__ KH_T2 __lowhigh2highlow(KH_T2 a) { return KH_T2(a.y, a.x); }

// ------------------------------------------------------------------------------------------------ arithmetic
__device__ __forceinline__ KH_T __hadd(KH_T a, KH_T b) { return KH_FROM_F(KH_F(a) + KH_F(b)); }
__device__ __forceinline__ KH_T __hsub(KH_T a, KH_T b) { return KH_FROM_F(KH_F(a) - KH_F(b)); }
__device__ __forceinline__ KH_T __hmul(KH_T a, KH_T b) { return KH_FROM_F(KH_F(a) * KH_F(b)); }
__device__ __forceinline__ KH_T __hdiv(KH_T a, KH_T b) { return KH_FROM_F(KH_F(a) / KH_F(b)); }
__device__ __forceinline__ KH_T __hadd_rn(KH_T a, KH_T b) { return __hadd(a, b); }
__device__ __forceinline__ KH_T __hsub_rn(KH_T a, KH_T b) { return __hsub(a, b); }
__device__ __forceinline__ KH_T __hmul_rn(KH_T a, KH_T b) { return __hmul(a, b); }
// One rounding of the exact a * b + c: the sum rounded to odd in double first (kspec_host::fma_odd).
__device__ __forceinline__ KH_T __hfma(KH_T a, KH_T b, KH_T c) {
  return KH_CAT(__double2, KH_N)(kspec_host::fma_odd(KH_F(a), KH_F(b), KH_F(c)));
}
__device__ __forceinline__ KH_T __hneg(KH_T a) { return KH_CAT(__ushort_as_, KH_N)(static_cast<unsigned short>(KH_CAT3(__, KH_N, _as_ushort)(a) ^ 0x8000u)); }
__device__ __forceinline__ KH_T __habs(KH_T a) { return KH_CAT(__ushort_as_, KH_N)(static_cast<unsigned short>(KH_CAT3(__, KH_N, _as_ushort)(a) & 0x7fffu)); }
__device__ __forceinline__ KH_T kspec_host_sat(KH_T a) {
  const float f = KH_F(a);
  return f != f ? KH_FROM_F(0.0f) : (f < 0.0f ? KH_FROM_F(0.0f) : (f > 1.0f ? KH_FROM_F(1.0f) : a));
}
__device__ __forceinline__ KH_T __hadd_sat(KH_T a, KH_T b) { return kspec_host_sat(__hadd(a, b)); }
__device__ __forceinline__ KH_T __hsub_sat(KH_T a, KH_T b) { return kspec_host_sat(__hsub(a, b)); }
__device__ __forceinline__ KH_T __hmul_sat(KH_T a, KH_T b) { return kspec_host_sat(__hmul(a, b)); }
__device__ __forceinline__ KH_T __hfma_sat(KH_T a, KH_T b, KH_T c) { return kspec_host_sat(__hfma(a, b, c)); }
__device__ __forceinline__ KH_T __hfma_relu(KH_T a, KH_T b, KH_T c) {
  const KH_T r = __hfma(a, b, c);
  return KH_F(r) < 0.0f ? KH_FROM_F(0.0f) : r;
}

// ------------------------------------------------------------------------------------------------ comparisons
__device__ __forceinline__ bool __hisnan(KH_T a) { return KH_F(a) != KH_F(a); }
__device__ __forceinline__ int __hisinf(KH_T a) {
  const float f = KH_F(a);
  return f == std::numeric_limits<float>::infinity() ? 1 : (f == -std::numeric_limits<float>::infinity() ? -1 : 0);
}
#define KH_CMP(NAME, OP)                                                                                   \
  __device__ __forceinline__ bool NAME(KH_T a, KH_T b) { return KH_F(a) OP KH_F(b); }                      \
  __device__ __forceinline__ bool NAME##u(KH_T a, KH_T b) { return KH_F(a) OP KH_F(b) || __hisnan(a) || __hisnan(b); }
KH_CMP(__heq, ==)
KH_CMP(__hlt, <)
KH_CMP(__hle, <=)
KH_CMP(__hgt, >)
KH_CMP(__hge, >=)
#undef KH_CMP
// "not equal" is ordered: false when either is NaN; the unordered form is true then.
__device__ __forceinline__ bool __hne(KH_T a, KH_T b) { return KH_F(a) < KH_F(b) || KH_F(a) > KH_F(b); }
__device__ __forceinline__ bool __hneu(KH_T a, KH_T b) { return !(KH_F(a) == KH_F(b)); }
// max/min return the other operand for one NaN, canonical NaN for two; +0 is greater than -0.
__device__ __forceinline__ KH_T __hmax(KH_T a, KH_T b) {
  if (__hisnan(a)) return __hisnan(b) ? KH_CAT(__ushort_as_, KH_N)(0x7fffu) : b;
  if (__hisnan(b)) return a;
  const float fa = KH_F(a), fb = KH_F(b);
  if (fa == fb) return std::signbit(fa) ? b : a;
  return fa > fb ? a : b;
}
__device__ __forceinline__ KH_T __hmin(KH_T a, KH_T b) {
  if (__hisnan(a)) return __hisnan(b) ? KH_CAT(__ushort_as_, KH_N)(0x7fffu) : b;
  if (__hisnan(b)) return a;
  const float fa = KH_F(a), fb = KH_F(b);
  if (fa == fb) return std::signbit(fa) ? a : b;
  return fa < fb ? a : b;
}
__device__ __forceinline__ KH_T __hmax_nan(KH_T a, KH_T b) {
  return (__hisnan(a) || __hisnan(b)) ? KH_CAT(__ushort_as_, KH_N)(0x7fffu) : __hmax(a, b);
}
__device__ __forceinline__ KH_T __hmin_nan(KH_T a, KH_T b) {
  return (__hisnan(a) || __hisnan(b)) ? KH_CAT(__ushort_as_, KH_N)(0x7fffu) : __hmin(a, b);
}

// ------------------------------------------------------------------------------------------------ math
// Correctly rounded in float, then rounded once (the GPU's approximations are within an ulp of these).
#define KH_MATH(NAME, EXPR)                                                                                \
  __device__ __forceinline__ KH_T NAME(KH_T a) {                                                           \
    const float x = KH_F(a);                                                                               \
    return KH_FROM_F(EXPR);                                                                                \
  }
KH_MATH(hsqrt, std::sqrt(x))
KH_MATH(hrsqrt, static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))))
KH_MATH(hrcp, 1.0f / x)
KH_MATH(hexp, std::exp(x))
KH_MATH(hexp2, std::exp2(x))
KH_MATH(hexp10, static_cast<float>(std::pow(10.0, static_cast<double>(x))))
KH_MATH(hlog, std::log(x))
KH_MATH(hlog2, std::log2(x))
KH_MATH(hlog10, std::log10(x))
KH_MATH(hsin, std::sin(x))
KH_MATH(hcos, std::cos(x))
KH_MATH(htanh, std::tanh(x))
KH_MATH(htanh_approx, std::tanh(x))
KH_MATH(hfloor, std::floor(x))
KH_MATH(hceil, std::ceil(x))
KH_MATH(htrunc, std::trunc(x))
KH_MATH(hrint, std::nearbyint(x))
#undef KH_MATH
// CUDA's math functions on a half take float on the GPU (sqrt(h) is sqrtf of float(h), a float: NVRTC checks
// it); GCC finds the type's integer conversions as good a way to std::sqrt's overloads as its float one and
// calls the call ambiguous, so these say which (a reduction's `y = sqrt(a)` over float16 on the CPU device).
#define KH_FLOAT_MATH(NAME) \
  __device__ __forceinline__ float NAME(KH_T a) { return std::NAME(KH_F(a)); }
KH_FLOAT_MATH(sqrt) KH_FLOAT_MATH(cbrt) KH_FLOAT_MATH(exp) KH_FLOAT_MATH(exp2) KH_FLOAT_MATH(expm1)
KH_FLOAT_MATH(log) KH_FLOAT_MATH(log2) KH_FLOAT_MATH(log10) KH_FLOAT_MATH(log1p) KH_FLOAT_MATH(sin)
KH_FLOAT_MATH(cos) KH_FLOAT_MATH(tan) KH_FLOAT_MATH(asin) KH_FLOAT_MATH(acos) KH_FLOAT_MATH(atan)
KH_FLOAT_MATH(sinh) KH_FLOAT_MATH(cosh) KH_FLOAT_MATH(tanh) KH_FLOAT_MATH(asinh) KH_FLOAT_MATH(acosh)
KH_FLOAT_MATH(atanh) KH_FLOAT_MATH(fabs) KH_FLOAT_MATH(floor) KH_FLOAT_MATH(ceil) KH_FLOAT_MATH(trunc)
KH_FLOAT_MATH(round) KH_FLOAT_MATH(rint) KH_FLOAT_MATH(erf) KH_FLOAT_MATH(erfc) KH_FLOAT_MATH(tgamma)
KH_FLOAT_MATH(lgamma)
#undef KH_FLOAT_MATH

// ------------------------------------------------------------------------------------------------ operators
__device__ __forceinline__ KH_T operator+(const KH_T& a, const KH_T& b) { return __hadd(a, b); }
__device__ __forceinline__ KH_T operator-(const KH_T& a, const KH_T& b) { return __hsub(a, b); }
__device__ __forceinline__ KH_T operator*(const KH_T& a, const KH_T& b) { return __hmul(a, b); }
__device__ __forceinline__ KH_T operator/(const KH_T& a, const KH_T& b) { return __hdiv(a, b); }
__device__ __forceinline__ KH_T& operator+=(KH_T& a, const KH_T& b) { return a = __hadd(a, b); }
__device__ __forceinline__ KH_T& operator-=(KH_T& a, const KH_T& b) { return a = __hsub(a, b); }
__device__ __forceinline__ KH_T& operator*=(KH_T& a, const KH_T& b) { return a = __hmul(a, b); }
__device__ __forceinline__ KH_T& operator/=(KH_T& a, const KH_T& b) { return a = __hdiv(a, b); }
__device__ __forceinline__ KH_T operator+(const KH_T& a) { return a; }
__device__ __forceinline__ KH_T operator-(const KH_T& a) { return __hneg(a); }
__device__ __forceinline__ KH_T& operator++(KH_T& a) { return a = __hadd(a, KH_FROM_F(1.0f)); }
__device__ __forceinline__ KH_T& operator--(KH_T& a) { return a = __hsub(a, KH_FROM_F(1.0f)); }
__device__ __forceinline__ KH_T operator++(KH_T& a, int) { const KH_T old = a; ++a; return old; }
__device__ __forceinline__ KH_T operator--(KH_T& a, int) { const KH_T old = a; --a; return old; }
__device__ __forceinline__ bool operator==(const KH_T& a, const KH_T& b) { return __heq(a, b); }
__device__ __forceinline__ bool operator!=(const KH_T& a, const KH_T& b) { return __hneu(a, b); }
__device__ __forceinline__ bool operator<(const KH_T& a, const KH_T& b) { return __hlt(a, b); }
__device__ __forceinline__ bool operator>(const KH_T& a, const KH_T& b) { return __hgt(a, b); }
__device__ __forceinline__ bool operator<=(const KH_T& a, const KH_T& b) { return __hle(a, b); }
__device__ __forceinline__ bool operator>=(const KH_T& a, const KH_T& b) { return __hge(a, b); }

// ------------------------------------------------------------------------------------------------ pair arithmetic
#define KH_PAIR2(NAME, SCALAR)                                                                             \
  __device__ __forceinline__ KH_T2 NAME(KH_T2 a, KH_T2 b) { return KH_T2(SCALAR(a.x, b.x), SCALAR(a.y, b.y)); }
#define KH_PAIR1(NAME, SCALAR)                                                                             \
  __device__ __forceinline__ KH_T2 NAME(KH_T2 a) { return KH_T2(SCALAR(a.x), SCALAR(a.y)); }
KH_PAIR2(__hadd2, __hadd)
KH_PAIR2(__hsub2, __hsub)
KH_PAIR2(__hmul2, __hmul)
KH_PAIR2(__h2div, __hdiv)
KH_PAIR2(__hadd2_sat, __hadd_sat)
KH_PAIR2(__hsub2_sat, __hsub_sat)
KH_PAIR2(__hmul2_sat, __hmul_sat)
KH_PAIR2(__hmax2, __hmax)
KH_PAIR2(__hmin2, __hmin)
KH_PAIR1(__hneg2, __hneg)
KH_PAIR1(__habs2, __habs)
KH_PAIR1(h2sqrt, hsqrt)
KH_PAIR1(h2rsqrt, hrsqrt)
KH_PAIR1(h2rcp, hrcp)
KH_PAIR1(h2exp, hexp)
KH_PAIR1(h2exp2, hexp2)
KH_PAIR1(h2exp10, hexp10)
KH_PAIR1(h2log, hlog)
KH_PAIR1(h2log2, hlog2)
KH_PAIR1(h2log10, hlog10)
KH_PAIR1(h2sin, hsin)
KH_PAIR1(h2cos, hcos)
KH_PAIR1(h2floor, hfloor)
KH_PAIR1(h2ceil, hceil)
KH_PAIR1(h2trunc, htrunc)
KH_PAIR1(h2rint, hrint)
#undef KH_PAIR1
#undef KH_PAIR2
__device__ __forceinline__ KH_T2 __hfma2(KH_T2 a, KH_T2 b, KH_T2 c) { return KH_T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
__device__ __forceinline__ KH_T2 __hisnan2(KH_T2 a) {
  return KH_T2(KH_FROM_F(__hisnan(a.x) ? 1.0f : 0.0f), KH_FROM_F(__hisnan(a.y) ? 1.0f : 0.0f));
}
// Lane-wise comparisons: 1.0 where true, 0.0 where false.
#define KH_CMP2(NAME, SCALAR)                                                                              \
  __device__ __forceinline__ KH_T2 NAME(KH_T2 a, KH_T2 b) {                                                \
    return KH_T2(KH_FROM_F(SCALAR(a.x, b.x) ? 1.0f : 0.0f), KH_FROM_F(SCALAR(a.y, b.y) ? 1.0f : 0.0f));    \
  }
KH_CMP2(__heq2, __heq)
KH_CMP2(__hne2, __hne)
KH_CMP2(__hlt2, __hlt)
KH_CMP2(__hle2, __hle)
KH_CMP2(__hgt2, __hgt)
KH_CMP2(__hge2, __hge)
KH_CMP2(__hequ2, __hequ)
KH_CMP2(__hneu2, __hneu)
KH_CMP2(__hltu2, __hltu)
KH_CMP2(__hleu2, __hleu)
KH_CMP2(__hgtu2, __hgtu)
KH_CMP2(__hgeu2, __hgeu)
#undef KH_CMP2
__device__ __forceinline__ KH_T2 __hmax2_nan(KH_T2 a, KH_T2 b) { return KH_T2(__hmax_nan(a.x, b.x), __hmax_nan(a.y, b.y)); }
__device__ __forceinline__ KH_T2 __hmin2_nan(KH_T2 a, KH_T2 b) { return KH_T2(__hmin_nan(a.x, b.x), __hmin_nan(a.y, b.y)); }
__device__ __forceinline__ bool __hblt2(KH_T2 a, KH_T2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }
__device__ __forceinline__ bool __hble2(KH_T2 a, KH_T2 b) { return __hle(a.x, b.x) && __hle(a.y, b.y); }
__device__ __forceinline__ bool __hbgt2(KH_T2 a, KH_T2 b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); }
__device__ __forceinline__ bool __hbge2(KH_T2 a, KH_T2 b) { return __hge(a.x, b.x) && __hge(a.y, b.y); }
__device__ __forceinline__ bool __hbeq2(KH_T2 a, KH_T2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }
__device__ __forceinline__ bool __hbne2(KH_T2 a, KH_T2 b) { return __hne(a.x, b.x) && __hne(a.y, b.y); }
__device__ __forceinline__ KH_T2 operator+(const KH_T2& a, const KH_T2& b) { return __hadd2(a, b); }
__device__ __forceinline__ KH_T2 operator-(const KH_T2& a, const KH_T2& b) { return __hsub2(a, b); }
__device__ __forceinline__ KH_T2 operator*(const KH_T2& a, const KH_T2& b) { return __hmul2(a, b); }
__device__ __forceinline__ KH_T2 operator/(const KH_T2& a, const KH_T2& b) { return __h2div(a, b); }
__device__ __forceinline__ KH_T2& operator+=(KH_T2& a, const KH_T2& b) { return a = __hadd2(a, b); }
__device__ __forceinline__ KH_T2& operator-=(KH_T2& a, const KH_T2& b) { return a = __hsub2(a, b); }
__device__ __forceinline__ KH_T2& operator*=(KH_T2& a, const KH_T2& b) { return a = __hmul2(a, b); }
__device__ __forceinline__ KH_T2& operator/=(KH_T2& a, const KH_T2& b) { return a = __h2div(a, b); }
__device__ __forceinline__ KH_T2 operator-(const KH_T2& a) { return __hneg2(a); }
__device__ __forceinline__ bool operator==(const KH_T2& a, const KH_T2& b) { return __hbeq2(a, b); }
__device__ __forceinline__ bool operator!=(const KH_T2& a, const KH_T2& b) { return !__hbeq2(a, b); }

#undef KH_F
#undef KH_FROM_F
#undef KH_CAT_
#undef KH_CAT
#undef KH_CAT3
