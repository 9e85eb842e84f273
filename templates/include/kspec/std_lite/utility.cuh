// kspec device header, part of kspec/std_lite.cuh: the <utility> names for NVRTC: swap, integer_sequence,
// pair / make_pair and pair's tuple protocol (tuple_size, tuple_element, get). std::move and std::forward
// are NVRTC's own (its builtin header declares them unless --builtin-move-forward=false); declval is in
// type_traits.cuh.
//
// std::tuple_size / std::tuple_element are declared with the same template parameters as CCCL declares
// them in ::std (for structured bindings of its types), so that either may come first; kspec specializes
// them only for its own pair / tuple, cv-qualified ones included, never for every `const T` as CCCL does.
#pragma once

#include <kspec/std_lite/type_traits.cuh>

namespace std {

#if !defined(__NV_BUILTIN_MOVE_FORWARD) || !__NV_BUILTIN_MOVE_FORWARD
template <class T>
__host__ __device__ constexpr typename remove_reference<T>::type&& move(T&& t) noexcept {
  return static_cast<typename remove_reference<T>::type&&>(t);
}
template <class T>
__host__ __device__ constexpr T&& forward(typename remove_reference<T>::type& t) noexcept {
  return static_cast<T&&>(t);
}
template <class T>
__host__ __device__ constexpr T&& forward(typename remove_reference<T>::type&& t) noexcept {
  static_assert(!is_lvalue_reference<T>::value, "std::forward: an rvalue forwarded as an lvalue");
  return static_cast<T&&>(t);
}
#endif

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

namespace __kspec {
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
}  // namespace __kspec

template <class T, T N>
using make_integer_sequence = typename __kspec::checked_iota<T, N>::type;
template <::size_t N>
using make_index_sequence = make_integer_sequence<::size_t, N>;
template <class... T>
using index_sequence_for = make_index_sequence<sizeof...(T)>;

// -- the tuple protocol's primary templates (see the top) ------------------------------------------------------

template <class T>
struct tuple_size;
template <::size_t I, class T>
struct tuple_element;
template <::size_t I, class T>
using tuple_element_t = typename tuple_element<I, T>::type;

// -- pair ---------------------------------------------------------------------------------------------------------

namespace __kspec {
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
}  // namespace __kspec

template <class T1, class T2>
struct pair : __kspec::pair_base<T1, T2> {
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
    using std::swap;
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

// pair's tuple protocol
template <class T1, class T2> struct tuple_size<pair<T1, T2> > : integral_constant<::size_t, 2> {};
template <class T1, class T2> struct tuple_size<const pair<T1, T2> > : integral_constant<::size_t, 2> {};
template <class T1, class T2> struct tuple_size<volatile pair<T1, T2> > : integral_constant<::size_t, 2> {};
template <class T1, class T2> struct tuple_size<const volatile pair<T1, T2> > : integral_constant<::size_t, 2> {};

template <::size_t I, class T1, class T2>
struct tuple_element<I, pair<T1, T2> > {
  static_assert(I < 2, "std::tuple_element: index out of range for a pair");
  typedef typename conditional<I == 0, T1, T2>::type type;
};
template <::size_t I, class T1, class T2>
struct tuple_element<I, const pair<T1, T2> > : add_const<typename tuple_element<I, pair<T1, T2> >::type> {};
template <::size_t I, class T1, class T2>
struct tuple_element<I, volatile pair<T1, T2> > : add_volatile<typename tuple_element<I, pair<T1, T2> >::type> {};
template <::size_t I, class T1, class T2>
struct tuple_element<I, const volatile pair<T1, T2> > : add_cv<typename tuple_element<I, pair<T1, T2> >::type> {};

namespace __kspec {
template <::size_t I> struct pair_member;
template <> struct pair_member<0> {
  template <class P> __host__ __device__ static constexpr auto of(P& p) noexcept -> decltype((p.first)) { return p.first; }
};
template <> struct pair_member<1> {
  template <class P> __host__ __device__ static constexpr auto of(P& p) noexcept -> decltype((p.second)) { return p.second; }
};
}  // namespace __kspec

template <::size_t I, class T1, class T2>
__host__ __device__ constexpr typename tuple_element<I, pair<T1, T2> >::type& get(pair<T1, T2>& p) noexcept {
  return __kspec::pair_member<I>::of(p);
}
template <::size_t I, class T1, class T2>
__host__ __device__ constexpr const typename tuple_element<I, pair<T1, T2> >::type& get(const pair<T1, T2>& p) noexcept {
  return __kspec::pair_member<I>::of(p);
}
template <::size_t I, class T1, class T2>
__host__ __device__ constexpr typename tuple_element<I, pair<T1, T2> >::type&& get(pair<T1, T2>&& p) noexcept {
  return static_cast<typename tuple_element<I, pair<T1, T2> >::type&&>(__kspec::pair_member<I>::of(p));
}
template <::size_t I, class T1, class T2>
__host__ __device__ constexpr const typename tuple_element<I, pair<T1, T2> >::type&& get(const pair<T1, T2>&& p) noexcept {
  return static_cast<const typename tuple_element<I, pair<T1, T2> >::type&&>(__kspec::pair_member<I>::of(p));
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

}  // namespace std
