// kspec device header, part of kspec/std_lite.cuh: the <type_traits> names that CuPy-style code uses, in
// namespace kspec_std, for NVRTC (which has no C++ standard library). Written for kspec, C++11 and up; the
// traits that need the compiler's knowledge (enum, base, convertible, trivially copyable, underlying type) use
// its builtins, as standard libraries do. Every trait is a class template, so user code may specialize one
// that <cupy/cuda_workaround.h> exports (`template <> struct std::is_floating_point<float16> : std::true_type
// {};`, as CuPy's ndimage does: NVRTC takes an explicit specialization through the using-declaration).
#pragma once

#include <kspec/select.cuh>

// constexpr from C++14, where a constexpr function may assign (swap, tuple and pair assignment: std has them
// constexpr from C++20; earlier is harmless, and lets code test them in constant expressions)
#if __cplusplus >= 201402L
#define KSPEC_STD_CONSTEXPR14 constexpr
#else
#define KSPEC_STD_CONSTEXPR14
#endif

namespace kspec_std {

// -- integral_constant and the bool constants ----------------------------------------------------------------

template <class T, T v>
struct integral_constant {
  static constexpr T value = v;
  typedef T value_type;
  typedef integral_constant type;
  __host__ __device__ constexpr operator value_type() const noexcept { return value; }
  __host__ __device__ constexpr value_type operator()() const noexcept { return value; }
};
#if __cplusplus < 201703L  // before C++17 a static constexpr member that is odr-used needs a definition
template <class T, T v>
constexpr T integral_constant<T, v>::value;
#endif

template <bool B>
using bool_constant = integral_constant<bool, B>;
typedef bool_constant<true> true_type;
typedef bool_constant<false> false_type;

// -- helpers (not standard names) --------------------------------------------------------------------------

namespace detail {
template <class... T>
struct voider {  // a struct, not an alias: SFINAE through an alias's unused arguments varies by compiler
  typedef void type;
};
template <class T>
struct type_is {
  typedef T type;
};
}  // namespace detail

// -- selection -----------------------------------------------------------------------------------------------

using ::kspec::enable_if;  // kspec/select.cuh: one definition, shared with cupy::type_traits
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;

using ::kspec::conditional;
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;

template <class T, class U>
struct is_same : false_type {};
template <class T>
struct is_same<T, T> : true_type {};

// -- cv, references, pointers --------------------------------------------------------------------------------

template <class T> struct remove_const { typedef T type; };
template <class T> struct remove_const<const T> { typedef T type; };
template <class T> struct remove_volatile { typedef T type; };
template <class T> struct remove_volatile<volatile T> { typedef T type; };
template <class T> struct remove_cv { typedef typename remove_volatile<typename remove_const<T>::type>::type type; };

template <class T> struct add_const { typedef const T type; };
template <class T> struct add_volatile { typedef volatile T type; };
template <class T> struct add_cv { typedef const volatile T type; };

template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T&> { typedef T type; };
template <class T> struct remove_reference<T&&> { typedef T type; };
template <class T>
using remove_reference_t = typename remove_reference<T>::type;

// T& / T&& where that is a type; void and cv- or ref-qualified function types are returned as they are
template <class T, class = void> struct add_lvalue_reference : detail::type_is<T> {};
template <class T> struct add_lvalue_reference<T, typename detail::voider<T&>::type> : detail::type_is<T&> {};
template <class T, class = void> struct add_rvalue_reference : detail::type_is<T> {};
template <class T> struct add_rvalue_reference<T, typename detail::voider<T&&>::type> : detail::type_is<T&&> {};

template <class T> struct remove_pointer { typedef T type; };
template <class T> struct remove_pointer<T*> { typedef T type; };
template <class T> struct remove_pointer<T* const> { typedef T type; };
template <class T> struct remove_pointer<T* volatile> { typedef T type; };
template <class T> struct remove_pointer<T* const volatile> { typedef T type; };

template <class T, class = void> struct add_pointer : detail::type_is<T> {};
template <class T>
struct add_pointer<T, typename detail::voider<typename remove_reference<T>::type*>::type>
    : detail::type_is<typename remove_reference<T>::type*> {};

// declval: only in unevaluated operands (decltype, sizeof, noexcept), so it is declared, never defined
template <class T>
__host__ __device__ typename add_rvalue_reference<T>::type declval() noexcept;

// -- primary type categories -----------------------------------------------------------------------------------

namespace detail {
template <class T> struct integral : false_type {};
template <> struct integral<bool> : true_type {};
template <> struct integral<char> : true_type {};
template <> struct integral<signed char> : true_type {};
template <> struct integral<unsigned char> : true_type {};
template <> struct integral<wchar_t> : true_type {};
template <> struct integral<char16_t> : true_type {};
template <> struct integral<char32_t> : true_type {};
#if defined(__cpp_char8_t)
template <> struct integral<char8_t> : true_type {};
#endif
template <> struct integral<short> : true_type {};
template <> struct integral<unsigned short> : true_type {};
template <> struct integral<int> : true_type {};
template <> struct integral<unsigned int> : true_type {};
template <> struct integral<long> : true_type {};
template <> struct integral<unsigned long> : true_type {};
template <> struct integral<long long> : true_type {};
template <> struct integral<unsigned long long> : true_type {};
#if defined(__CUDACC_RTC_INT128__)  // NVRTC's -device-int128
template <> struct integral<__int128> : true_type {};
template <> struct integral<unsigned __int128> : true_type {};
#endif
template <class T> struct floating : false_type {};
template <> struct floating<float> : true_type {};
template <> struct floating<double> : true_type {};
template <> struct floating<long double> : true_type {};
}  // namespace detail

template <class T> struct is_void : is_same<typename remove_cv<T>::type, void> {};
template <class T> struct is_integral : detail::integral<typename remove_cv<T>::type> {};
template <class T> struct is_floating_point : detail::floating<typename remove_cv<T>::type> {};
// through is_integral / is_floating_point, so that a user's specialization of either counts here too
template <class T> struct is_arithmetic : bool_constant<is_integral<T>::value || is_floating_point<T>::value> {};

template <class T> struct is_const : false_type {};
template <class T> struct is_const<const T> : true_type {};
template <class T> struct is_volatile : false_type {};
template <class T> struct is_volatile<volatile T> : true_type {};

namespace detail {
template <class T> struct pointer : false_type {};
template <class T> struct pointer<T*> : true_type {};
}  // namespace detail
template <class T> struct is_pointer : detail::pointer<typename remove_cv<T>::type> {};

template <class T> struct is_lvalue_reference : false_type {};
template <class T> struct is_lvalue_reference<T&> : true_type {};
template <class T> struct is_rvalue_reference : false_type {};
template <class T> struct is_rvalue_reference<T&&> : true_type {};
template <class T> struct is_reference : bool_constant<is_lvalue_reference<T>::value || is_rvalue_reference<T>::value> {};

template <class T> struct is_array : false_type {};
template <class T> struct is_array<T[]> : true_type {};
template <class T, ::size_t N> struct is_array<T[N]> : true_type {};

template <class T> struct is_function : bool_constant<__is_function(T)> {};
template <class T> struct is_enum : bool_constant<__is_enum(T)> {};
template <class T> struct is_class : bool_constant<__is_class(T)> {};
template <class T> struct is_union : bool_constant<__is_union(T)> {};

// -- properties and relations ----------------------------------------------------------------------------------

// Signedness from the type's own arithmetic (T(-1) < T(0)) for the built-in arithmetic types only: a class
// that a user has declared floating point (CuPy's float16) need not convert in a constant expression.
namespace detail {
template <class T, bool = integral<T>::value || floating<T>::value>
struct sign : bool_constant<(T(-1) < T(0))> {};
template <class T>
struct sign<T, false> : false_type {};
template <class T, bool = integral<T>::value || floating<T>::value>
struct unsign : bool_constant<(T(0) < T(-1))> {};
template <class T>
struct unsign<T, false> : false_type {};
}  // namespace detail
template <class T> struct is_signed : detail::sign<typename remove_cv<T>::type> {};
template <class T> struct is_unsigned : detail::unsign<typename remove_cv<T>::type> {};

template <class Base, class Derived> struct is_base_of : bool_constant<__is_base_of(Base, Derived)> {};
// __is_convertible_to has the standard's meaning: `To f() { return declval<From>(); }` is well formed
template <class From, class To> struct is_convertible : bool_constant<__is_convertible_to(From, To)> {};
template <class T> struct is_trivially_copyable : bool_constant<__is_trivially_copyable(T)> {};
template <class T> struct alignment_of : integral_constant<::size_t, alignof(T)> {};

namespace detail {
template <class T, bool = __is_enum(T)> struct underlying {};  // no member for a non-enum (C++20)
template <class T> struct underlying<T, true> { typedef __underlying_type(T) type; };
}  // namespace detail
template <class T> struct underlying_type : detail::underlying<T> {};

#if __cplusplus >= 201402L
#if __cplusplus >= 201703L
#define KSPEC_STD_INLINE_VAR inline
#else
#define KSPEC_STD_INLINE_VAR
#endif
template <class T, class U>
KSPEC_STD_INLINE_VAR constexpr bool is_same_v = is_same<T, U>::value;
#undef KSPEC_STD_INLINE_VAR
#endif

// -- transformations ----------------------------------------------------------------------------------------

namespace detail {
template <class T> struct remove_extent { typedef T type; };
template <class T> struct remove_extent<T[]> { typedef T type; };
template <class T, ::size_t N> struct remove_extent<T[N]> { typedef T type; };

template <class U, bool = is_array<U>::value, bool = is_function<U>::value>
struct decay_of : remove_cv<U> {};
template <class U, bool F>
struct decay_of<U, true, F> : type_is<typename remove_extent<U>::type*> {};
template <class U>
struct decay_of<U, false, true> : add_pointer<U> {};
}  // namespace detail
// what a by-value parameter of type T receives: arrays and functions become pointers, cv and & go
template <class T> struct decay : detail::decay_of<typename remove_reference<T>::type> {};
template <class T>
using decay_t = typename decay<T>::type;

// make_signed / make_unsigned: the standard integer types map to their partners; char, wchar_t, charN_t and
// enums to the smallest standard type of their size. cv-qualifiers are kept; bool and the rest get no type.
namespace detail {
template <::size_t N> struct int_of_size {};
template <> struct int_of_size<1> { typedef signed char s; typedef unsigned char u; };
template <> struct int_of_size<2> { typedef short s; typedef unsigned short u; };
template <> struct int_of_size<4> { typedef int s; typedef unsigned int u; };
template <> struct int_of_size<8> { typedef long s; typedef unsigned long u; };
#if defined(__CUDACC_RTC_INT128__)
template <> struct int_of_size<16> { typedef __int128 s; typedef unsigned __int128 u; };
#endif
template <class T> struct int_pair : int_of_size<sizeof(T)> {};
template <> struct int_pair<long long> { typedef long long s; typedef unsigned long long u; };
template <> struct int_pair<unsigned long long> { typedef long long s; typedef unsigned long long u; };

template <class From, class To> struct copy_cv { typedef To type; };
template <class From, class To> struct copy_cv<const From, To> { typedef const To type; };
template <class From, class To> struct copy_cv<volatile From, To> { typedef volatile To type; };
template <class From, class To> struct copy_cv<const volatile From, To> { typedef const volatile To type; };

template <class T, class U = typename remove_cv<T>::type,
          bool = (integral<U>::value || __is_enum(U)) && !is_same<U, bool>::value>
struct sign_change {};
template <class T, class U>
struct sign_change<T, U, true> {
  typedef typename copy_cv<T, typename int_pair<U>::s>::type to_signed;
  typedef typename copy_cv<T, typename int_pair<U>::u>::type to_unsigned;
};
template <class T, class = void> struct make_signed_of {};
template <class T>
struct make_signed_of<T, typename voider<typename sign_change<T>::to_signed>::type>
    : type_is<typename sign_change<T>::to_signed> {};
template <class T, class = void> struct make_unsigned_of {};
template <class T>
struct make_unsigned_of<T, typename voider<typename sign_change<T>::to_unsigned>::type>
    : type_is<typename sign_change<T>::to_unsigned> {};
}  // namespace detail
template <class T> struct make_signed : detail::make_signed_of<T> {};
template <class T> struct make_unsigned : detail::make_unsigned_of<T> {};

// common_type as C++20 has it: the decayed type of `b ? x : y`, else of the same on const lvalues; no member
// when there is none, so it can be used for SFINAE. Specializations for decayed types are honored.
template <class... T> struct common_type;
namespace detail {
template <class A, class B, class = void> struct common_cref {};
template <class A, class B>
struct common_cref<A, B, typename voider<decltype(false ? declval<const A&>() : declval<const B&>())>::type>
    : remove_cv<typename remove_reference<decltype(false ? declval<const A&>() : declval<const B&>())>::type> {};
template <class A, class B, class = void> struct common_ternary : common_cref<A, B> {};
template <class A, class B>
struct common_ternary<A, B, typename voider<decltype(false ? declval<A>() : declval<B>())>::type>
    : decay<decltype(false ? declval<A>() : declval<B>())> {};
template <class T1, class T2, class D1 = typename decay<T1>::type, class D2 = typename decay<T2>::type>
struct common2 : common_type<D1, D2> {};
template <class D1, class D2>
struct common2<D1, D2, D1, D2> : common_ternary<D1, D2> {};
template <class V, class CT, class... R> struct common_fold {};
template <class CT, class... R>
struct common_fold<typename voider<typename CT::type>::type, CT, R...> : common_type<typename CT::type, R...> {};
}  // namespace detail
template <> struct common_type<> {};
template <class T> struct common_type<T> : common_type<T, T> {};
template <class T1, class T2> struct common_type<T1, T2> : detail::common2<T1, T2> {};
template <class T1, class T2, class T3, class... R>
struct common_type<T1, T2, T3, R...> : detail::common_fold<void, common_type<T1, T2>, T3, R...> {};

// result_of<F(Args...)>: the type of INVOKE(f, args...), callables and pointers to members (on an object,
// a reference to one or a pointer-like); no member when the call is ill-formed.
namespace detail {
template <class V, class F, class... A> struct call_result {};
template <class F, class... A>
struct call_result<typename voider<decltype(declval<F>()(declval<A>()...))>::type, F, A...>
    : type_is<decltype(declval<F>()(declval<A>()...))> {};

template <bool IsFn, bool OnObj, class V, class MP, class Obj, class... A> struct member_result {};
template <class MP, class Obj, class... A>
struct member_result<true, true, typename voider<decltype((declval<Obj>().*declval<MP>())(declval<A>()...))>::type, MP, Obj, A...>
    : type_is<decltype((declval<Obj>().*declval<MP>())(declval<A>()...))> {};
template <class MP, class Obj, class... A>
struct member_result<true, false, typename voider<decltype(((*declval<Obj>()).*declval<MP>())(declval<A>()...))>::type, MP, Obj, A...>
    : type_is<decltype(((*declval<Obj>()).*declval<MP>())(declval<A>()...))> {};
template <class MP, class Obj>
struct member_result<false, true, typename voider<decltype(declval<Obj>().*declval<MP>())>::type, MP, Obj>
    : type_is<decltype(declval<Obj>().*declval<MP>())> {};
template <class MP, class Obj>
struct member_result<false, false, typename voider<decltype((*declval<Obj>()).*declval<MP>())>::type, MP, Obj>
    : type_is<decltype((*declval<Obj>()).*declval<MP>())> {};

template <class DF, class F, class... A> struct invoke_result : call_result<void, F, A...> {};
template <class M, class C, class F, class Obj, class... A>
struct invoke_result<M C::*, F, Obj, A...>
    : member_result<is_function<M>::value, is_same<C, typename decay<Obj>::type>::value || is_base_of<C, typename decay<Obj>::type>::value,
                    void, M C::*, Obj, A...> {};
}  // namespace detail
template <class Signature> struct result_of;
template <class F, class... A>
struct result_of<F(A...)> : detail::invoke_result<typename decay<F>::type, F, A...> {};

// -- the other C++14 aliases ------------------------------------------------------------------------------------

template <class T> using remove_const_t = typename remove_const<T>::type;
template <class T> using remove_volatile_t = typename remove_volatile<T>::type;
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> using add_const_t = typename add_const<T>::type;
template <class T> using add_volatile_t = typename add_volatile<T>::type;
template <class T> using add_cv_t = typename add_cv<T>::type;
template <class T> using add_lvalue_reference_t = typename add_lvalue_reference<T>::type;
template <class T> using add_rvalue_reference_t = typename add_rvalue_reference<T>::type;
template <class T> using remove_pointer_t = typename remove_pointer<T>::type;
template <class T> using add_pointer_t = typename add_pointer<T>::type;
template <class T> using make_signed_t = typename make_signed<T>::type;
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
template <class... T> using common_type_t = typename common_type<T...>::type;
template <class T> using underlying_type_t = typename underlying_type<T>::type;
template <class T> using result_of_t = typename result_of<T>::type;

}  // namespace kspec_std
