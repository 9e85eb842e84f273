// kspec device header, part of kspec/std_lite.cuh: the <utility> names for NVRTC, in kspec_std: swap,
// integer_sequence, pair / make_pair and pair's tuple protocol (tuple_size, tuple_element, get). move and
// forward are not here: kspec_std's code does not use them, and std::move / std::forward are NVRTC's own
// (its builtin header declares them unless --builtin-move-forward=false), as under CuPy. declval is in
// type_traits.cuh.
//
// The tuple protocol's primary templates are ::std::tuple_size / ::std::tuple_element, where structured
// bindings look for them, declared with the same template parameters as CCCL declares them in ::std under
// NVRTC, so that either header may come first: a parameter pack before CCCL 3.2.0 (CUDA 13.0's toolkit has
// 3.0.1), one type from 3.2.0 on. The CCCL on the include path is the one any CCCL header comes from, so its
// version (a macro-only header) picks the form. kspec specializes them in ::std (a partial specialization
// cannot go through a using-declaration) only for its own pair / tuple, cv-qualified ones included, never
// for every `const T` as CCCL does.
#pragma once

#include <kspec/std_lite/type_traits.cuh>

#if defined(__has_include)
#if __has_include(<cuda/std/__cccl/version.h>)
#include <cuda/std/__cccl/version.h>
#endif
#endif

namespace std {
#if defined(CCCL_VERSION) && CCCL_VERSION < 3002000
template <class... T>
struct tuple_size;
template <::size_t I, class... T>
struct tuple_element;
#else
template <class T>
struct tuple_size;
template <::size_t I, class T>
struct tuple_element;
#endif
}  // namespace std

namespace kspec_std {

using ::std::tuple_element;
using ::std::tuple_size;
template <::size_t I, class T>
using tuple_element_t = typename tuple_element<I, T>::type;

template <class T>
__host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(T& a, T& b) noexcept(noexcept(T(declval<T&&>())) && noexcept(declval<T&>() = declval<T&&>())) {
  T t(static_cast<T&&>(a));
  a = static_cast<T&&>(b);
  b = static_cast<T&&>(t);
}
template <class T, ::size_t N>
__host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(T (&a)[N], T (&b)[N]) noexcept(noexcept(swap(a[0], b[0]))) {
  for (::size_t i = 0; i < N; ++i) swap(a[i], b[i]);
}

// -- integer sequences ------------------------------------------------------------------------------------------

template <class T, T... Is>
struct integer_sequence {
  typedef T value_type;
  __host__ __device__ static constexpr ::size_t size() noexcept { return sizeof...(Is); }
};
template <::size_t... Is>
using index_sequence = integer_sequence<::size_t, Is...>;

namespace detail {
// 0..N-1 as two halves joined, the second shifted: instantiation depth log2(N), not N
template <class A, class B> struct join_sequences;
template <class T, T... A, T... B>
struct join_sequences<integer_sequence<T, A...>, integer_sequence<T, B...>> {
  typedef integer_sequence<T, A..., (T(sizeof...(A)) + B)...> type;
};
template <class T, ::size_t N>
struct iota : join_sequences<typename iota<T, N / 2>::type, typename iota<T, N - N / 2>::type> {};
template <class T> struct iota<T, 0> { typedef integer_sequence<T> type; };
template <class T> struct iota<T, 1> { typedef integer_sequence<T, 0> type; };
template <class T, T N>
struct checked_iota : iota<T, (N < 0 ? 0 : ::size_t(N))> {
  static_assert(!(N < 0), "std::make_integer_sequence: a negative length");
};
}  // namespace detail

template <class T, T N>
using make_integer_sequence = typename detail::checked_iota<T, N>::type;
template <::size_t N>
using make_index_sequence = make_integer_sequence<::size_t, N>;
template <class... T>
using index_sequence_for = make_index_sequence<sizeof...(T)>;

// -- pair ---------------------------------------------------------------------------------------------------------

namespace detail {
// pair's members and copies: the implicit operators (trivial for trivially copyable members, as CCCL's pair)
// unless a member is a reference; then the implicit assignments are deleted, and std::pair's assign through
// the references, member by member.
template <class T1, class T2, bool = is_reference<T1>::value || is_reference<T2>::value>
struct pair_base {
  T1 first;
  T2 second;
  __host__ __device__ constexpr pair_base() : first(), second() {}
  template <class U1, class U2>
  __host__ __device__ constexpr pair_base(U1&& a, U2&& b) : first(static_cast<U1&&>(a)), second(static_cast<U2&&>(b)) {}
};
template <class T1, class T2>
struct pair_base<T1, T2, true> {
  T1 first;
  T2 second;
  __host__ __device__ constexpr pair_base() : first(), second() {}
  template <class U1, class U2>
  __host__ __device__ constexpr pair_base(U1&& a, U2&& b) : first(static_cast<U1&&>(a)), second(static_cast<U2&&>(b)) {}
  pair_base(const pair_base&) = default;
  pair_base(pair_base&&) = default;
  __host__ __device__ KSPEC_STD_CONSTEXPR14 pair_base& operator=(const pair_base& p) {
    first = p.first;
    second = p.second;
    return *this;
  }
  __host__ __device__ KSPEC_STD_CONSTEXPR14 pair_base& operator=(pair_base&& p) {
    first = static_cast<T1&&>(p.first);
    second = static_cast<T2&&>(p.second);
    return *this;
  }
};
}  // namespace detail

template <class T1, class T2>
struct pair : detail::pair_base<T1, T2> {
  typedef T1 first_type;
  typedef T2 second_type;

  __host__ __device__ constexpr pair() : pair::pair_base() {}
  __host__ __device__ constexpr pair(const T1& a, const T2& b) : pair::pair_base(a, b) {}
  template <class U1, class U2>
  __host__ __device__ constexpr pair(U1&& a, U2&& b) : pair::pair_base(static_cast<U1&&>(a), static_cast<U2&&>(b)) {}
  template <class U1, class U2>
  __host__ __device__ constexpr pair(const pair<U1, U2>& p) : pair::pair_base(p.first, p.second) {}
  template <class U1, class U2>
  __host__ __device__ constexpr pair(pair<U1, U2>&& p)
      : pair::pair_base(static_cast<U1&&>(p.first), static_cast<U2&&>(p.second)) {}

  template <class U1, class U2>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 pair& operator=(const pair<U1, U2>& p) {
    this->first = p.first;
    this->second = p.second;
    return *this;
  }
  template <class U1, class U2>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 pair& operator=(pair<U1, U2>&& p) {
    this->first = static_cast<U1&&>(p.first);
    this->second = static_cast<U2&&>(p.second);
    return *this;
  }
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(pair& p) {
    using kspec_std::swap;
    swap(this->first, p.first);
    swap(this->second, p.second);
  }
};

template <class T1, class T2>
__host__ __device__ constexpr pair<typename decay<T1>::type, typename decay<T2>::type> make_pair(T1&& a, T2&& b) {
  return pair<typename decay<T1>::type, typename decay<T2>::type>(static_cast<T1&&>(a), static_cast<T2&&>(b));
}

template <class T1, class T2>
__host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(pair<T1, T2>& a, pair<T1, T2>& b) {
  a.swap(b);
}

template <class T1, class T2, class U1, class U2>
__host__ __device__ constexpr bool operator==(const pair<T1, T2>& a, const pair<U1, U2>& b) {
  return a.first == b.first && a.second == b.second;
}
template <class T1, class T2, class U1, class U2>
__host__ __device__ constexpr bool operator!=(const pair<T1, T2>& a, const pair<U1, U2>& b) {
  return !(a == b);
}
// lexicographic, through < alone
template <class T1, class T2, class U1, class U2>
__host__ __device__ constexpr bool operator<(const pair<T1, T2>& a, const pair<U1, U2>& b) {
  return a.first < b.first || (!(b.first < a.first) && a.second < b.second);
}
template <class T1, class T2, class U1, class U2>
__host__ __device__ constexpr bool operator>(const pair<T1, T2>& a, const pair<U1, U2>& b) {
  return b < a;
}
template <class T1, class T2, class U1, class U2>
__host__ __device__ constexpr bool operator<=(const pair<T1, T2>& a, const pair<U1, U2>& b) {
  return !(b < a);
}
template <class T1, class T2, class U1, class U2>
__host__ __device__ constexpr bool operator>=(const pair<T1, T2>& a, const pair<U1, U2>& b) {
  return !(a < b);
}

}  // namespace kspec_std

// pair's tuple protocol, in ::std (see the top)
namespace std {
template <class T1, class T2> struct tuple_size<kspec_std::pair<T1, T2> > : kspec_std::integral_constant<::size_t, 2> {};
template <class T1, class T2> struct tuple_size<const kspec_std::pair<T1, T2> > : kspec_std::integral_constant<::size_t, 2> {};
template <class T1, class T2> struct tuple_size<volatile kspec_std::pair<T1, T2> > : kspec_std::integral_constant<::size_t, 2> {};
template <class T1, class T2> struct tuple_size<const volatile kspec_std::pair<T1, T2> > : kspec_std::integral_constant<::size_t, 2> {};

template <::size_t I, class T1, class T2>
struct tuple_element<I, kspec_std::pair<T1, T2> > {
  static_assert(I < 2, "std::tuple_element: index out of range for a pair");
  typedef typename kspec_std::conditional<I == 0, T1, T2>::type type;
};
template <::size_t I, class T1, class T2>
struct tuple_element<I, const kspec_std::pair<T1, T2> > : kspec_std::add_const<typename tuple_element<I, kspec_std::pair<T1, T2> >::type> {};
template <::size_t I, class T1, class T2>
struct tuple_element<I, volatile kspec_std::pair<T1, T2> > : kspec_std::add_volatile<typename tuple_element<I, kspec_std::pair<T1, T2> >::type> {};
template <::size_t I, class T1, class T2>
struct tuple_element<I, const volatile kspec_std::pair<T1, T2> > : kspec_std::add_cv<typename tuple_element<I, kspec_std::pair<T1, T2> >::type> {};
}  // namespace std

namespace kspec_std {

namespace detail {
template <::size_t I> struct pair_member;
template <> struct pair_member<0> {
  template <class P> __host__ __device__ static constexpr auto of(P& p) noexcept -> decltype((p.first)) { return p.first; }
};
template <> struct pair_member<1> {
  template <class P> __host__ __device__ static constexpr auto of(P& p) noexcept -> decltype((p.second)) { return p.second; }
};
}  // namespace detail

template <::size_t I, class T1, class T2>
__host__ __device__ constexpr typename tuple_element<I, pair<T1, T2> >::type& get(pair<T1, T2>& p) noexcept {
  return detail::pair_member<I>::of(p);
}
template <::size_t I, class T1, class T2>
__host__ __device__ constexpr const typename tuple_element<I, pair<T1, T2> >::type& get(const pair<T1, T2>& p) noexcept {
  return detail::pair_member<I>::of(p);
}
template <::size_t I, class T1, class T2>
__host__ __device__ constexpr typename tuple_element<I, pair<T1, T2> >::type&& get(pair<T1, T2>&& p) noexcept {
  return static_cast<typename tuple_element<I, pair<T1, T2> >::type&&>(detail::pair_member<I>::of(p));
}
template <::size_t I, class T1, class T2>
__host__ __device__ constexpr const typename tuple_element<I, pair<T1, T2> >::type&& get(const pair<T1, T2>&& p) noexcept {
  return static_cast<const typename tuple_element<I, pair<T1, T2> >::type&&>(detail::pair_member<I>::of(p));
}

// get<T>(pair): the member of type T, when the two types differ
template <class T, class U>
__host__ __device__ constexpr T& get(pair<T, U>& p) noexcept { return p.first; }
template <class T, class U>
__host__ __device__ constexpr const T& get(const pair<T, U>& p) noexcept { return p.first; }
template <class T, class U>
__host__ __device__ constexpr T&& get(pair<T, U>&& p) noexcept { return static_cast<T&&>(p.first); }
template <class T, class U>
__host__ __device__ constexpr T& get(pair<U, T>& p) noexcept { return p.second; }
template <class T, class U>
__host__ __device__ constexpr const T& get(const pair<U, T>& p) noexcept { return p.second; }
template <class T, class U>
__host__ __device__ constexpr T&& get(pair<U, T>&& p) noexcept { return static_cast<T&&>(p.second); }

}  // namespace kspec_std
