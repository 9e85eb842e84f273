// kspec device header, part of kspec/std_lite.cuh: tuple for NVRTC, in kspec_std, with get (by index and by
// type), make_tuple, tie, forward_as_tuple, ignore, comparisons, swap and the tuple protocol (::std's
// tuple_size and tuple_element, for structured bindings: see utility.cuh). Each element is a base class tagged by its index, so get<I> is an
// upcast. As pair, a tuple of trivially copyable types is trivially copyable; one with a reference assigns
// through it.
#pragma once

#include <kspec/std_lite/utility.cuh>

namespace kspec_std {

template <class... Ts>
class tuple;

namespace detail {

struct elem_tag {};   // construct the elements from these values
struct tuple_tag {};  // construct the elements from get<I> of this tuple-like

template <::size_t I, class T>
struct tuple_leaf {
  T value;
  __host__ __device__ constexpr tuple_leaf() : value() {}
  template <class U>
  __host__ __device__ constexpr tuple_leaf(elem_tag, U&& u) : value(static_cast<U&&>(u)) {}
};
// leaf<I>(t): the element I of t, by deduction of its base tuple_leaf<I, T>
template <::size_t I, class T>
__host__ __device__ constexpr T& leaf(tuple_leaf<I, T>& l) noexcept { return l.value; }
template <::size_t I, class T>
__host__ __device__ constexpr const T& leaf(const tuple_leaf<I, T>& l) noexcept { return l.value; }
template <::size_t I, class T>
__host__ __device__ type_is<T> leaf_type(const tuple_leaf<I, T>&);

template <class T> struct dependent_true : true_type {};  // makes a condition wait for a template argument
template <bool... B> struct bools {};
template <bool... B> struct all : is_same<bools<true, B...>, bools<B..., true> > {};
template <class... T> struct types {};
template <bool SameSize, class To, class From> struct constructible_all : false_type {};
template <class... To, class... From>
struct constructible_all<true, types<To...>, types<From...> > : all<__is_constructible(To, From)...> {};
template <class To, class From> struct constructible : false_type {};  // To, From: types<...>
template <class... To, class... From>
struct constructible<types<To...>, types<From...> >
    : constructible_all<sizeof...(To) == sizeof...(From), types<To...>, types<From...> > {};

template <class Is, class... Ts> struct tuple_base;
template <::size_t... Is, class... Ts>
struct tuple_base<index_sequence<Is...>, Ts...> : tuple_leaf<Is, Ts>... {
  __host__ __device__ constexpr tuple_base() : tuple_leaf<Is, Ts>()... {}
  template <class... Us>
  __host__ __device__ constexpr tuple_base(elem_tag t, Us&&... us) : tuple_leaf<Is, Ts>(t, static_cast<Us&&>(us))... {}
  template <class Tuple>
  __host__ __device__ constexpr tuple_base(tuple_tag, Tuple&& t)
      : tuple_leaf<Is, Ts>(elem_tag(), get<Is>(static_cast<Tuple&&>(t)))... {}

  // element-wise assignments; `swallow{...}` sequences them (C++11 has no fold expressions)
  typedef int swallow[];
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void assign_copy(const tuple_base& o) { (void)swallow{0, ((void)(leaf<Is>(*this) = leaf<Is>(o)), 0)...}; }
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void assign_move(tuple_base& o) {
    (void)swallow{0, ((void)(leaf<Is>(*this) = static_cast<Ts&&>(leaf<Is>(o))), 0)...};
  }
  template <class Tuple>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void assign_from(Tuple&& t) {
    (void)swallow{0, ((void)(leaf<Is>(*this) = get<Is>(static_cast<Tuple&&>(t))), 0)...};
  }
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void swap_with(tuple_base& o) {
    using kspec_std::swap;
    (void)swallow{0, ((void)swap(leaf<Is>(*this), leaf<Is>(o)), 0)...};
  }
};

// the implicit copies unless an element is a reference (see pair_base in utility.cuh)
template <bool HasRef, class Is, class... Ts>
struct tuple_storage : tuple_base<Is, Ts...> {
  using tuple_base<Is, Ts...>::tuple_base;
};
template <class Is, class... Ts>
struct tuple_storage<true, Is, Ts...> : tuple_base<Is, Ts...> {
  using tuple_base<Is, Ts...>::tuple_base;
  tuple_storage() = default;
  tuple_storage(const tuple_storage&) = default;
  tuple_storage(tuple_storage&&) = default;
  __host__ __device__ KSPEC_STD_CONSTEXPR14 tuple_storage& operator=(const tuple_storage& o) {
    this->assign_copy(o);
    return *this;
  }
  __host__ __device__ KSPEC_STD_CONSTEXPR14 tuple_storage& operator=(tuple_storage&& o) {
    this->assign_move(o);
    return *this;
  }
};

template <class... Ts>
struct tuple_storage_of {
  typedef tuple_storage<!all<!is_reference<Ts>::value...>::value, index_sequence_for<Ts...>, Ts...> type;
};

}  // namespace detail

template <class... Ts>
class tuple : public detail::tuple_storage_of<Ts...>::type {
  typedef typename detail::tuple_storage_of<Ts...>::type storage;
  template <class... Us>
  using from_values = detail::constructible<detail::types<Ts...>, detail::types<Us&&...> >;
  // a one-element tuple's value constructor must leave copies of the tuple itself to the copy constructor
  template <class... Us>
  struct not_self : true_type {};
  template <class U>
  struct not_self<U> : bool_constant<!is_same<typename decay<U>::type, tuple>::value> {};

 public:
  __host__ __device__ constexpr tuple() : storage() {}
  __host__ __device__ constexpr tuple(const Ts&... ts) : storage(detail::elem_tag(), ts...) {}
  template <class... Us, class = typename enable_if<not_self<Us...>::value && from_values<Us...>::value>::type>
  __host__ __device__ constexpr tuple(Us&&... us) : storage(detail::elem_tag(), static_cast<Us&&>(us)...) {}
  template <class... Us, class = typename enable_if<!is_same<tuple<Us...>, tuple>::value &&
                                                    from_values<const Us&...>::value>::type>
  __host__ __device__ constexpr tuple(const tuple<Us...>& t) : storage(detail::tuple_tag(), t) {}
  template <class... Us, class = typename enable_if<!is_same<tuple<Us...>, tuple>::value && from_values<Us...>::value>::type>
  __host__ __device__ constexpr tuple(tuple<Us...>&& t) : storage(detail::tuple_tag(), static_cast<tuple<Us...>&&>(t)) {}
  template <class U1, class U2, class = typename enable_if<from_values<const U1&, const U2&>::value>::type>
  __host__ __device__ constexpr tuple(const pair<U1, U2>& p) : storage(detail::tuple_tag(), p) {}
  template <class U1, class U2, class = typename enable_if<from_values<U1, U2>::value>::type>
  __host__ __device__ constexpr tuple(pair<U1, U2>&& p) : storage(detail::tuple_tag(), static_cast<pair<U1, U2>&&>(p)) {}

  template <class... Us, class = typename enable_if<sizeof...(Us) == sizeof...(Ts)>::type>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 tuple& operator=(const tuple<Us...>& t) {
    this->assign_from(t);
    return *this;
  }
  template <class... Us, class = typename enable_if<sizeof...(Us) == sizeof...(Ts)>::type>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 tuple& operator=(tuple<Us...>&& t) {
    this->assign_from(static_cast<tuple<Us...>&&>(t));
    return *this;
  }
  template <class U1, class U2, class = typename enable_if<detail::dependent_true<U1>::value && sizeof...(Ts) == 2>::type>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 tuple& operator=(const pair<U1, U2>& p) {
    this->assign_from(p);
    return *this;
  }
  template <class U1, class U2, class = typename enable_if<detail::dependent_true<U1>::value && sizeof...(Ts) == 2>::type>
  __host__ __device__ KSPEC_STD_CONSTEXPR14 tuple& operator=(pair<U1, U2>&& p) {
    this->assign_from(static_cast<pair<U1, U2>&&>(p));
    return *this;
  }
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(tuple& t) { this->swap_with(t); }
};

template <>
class tuple<> {
 public:
  __host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(tuple&) noexcept {}
};

}  // namespace kspec_std

// -- the tuple protocol, in ::std (see utility.cuh) -----------------------------------------------------------

namespace std {
template <class... Ts> struct tuple_size<kspec_std::tuple<Ts...> > : kspec_std::integral_constant<::size_t, sizeof...(Ts)> {};
template <class... Ts> struct tuple_size<const kspec_std::tuple<Ts...> > : kspec_std::integral_constant<::size_t, sizeof...(Ts)> {};
template <class... Ts> struct tuple_size<volatile kspec_std::tuple<Ts...> > : kspec_std::integral_constant<::size_t, sizeof...(Ts)> {};
template <class... Ts> struct tuple_size<const volatile kspec_std::tuple<Ts...> > : kspec_std::integral_constant<::size_t, sizeof...(Ts)> {};

template <::size_t I, class... Ts>
struct tuple_element<I, kspec_std::tuple<Ts...> > {
  static_assert(I < sizeof...(Ts), "std::tuple_element: index out of range");
  typedef typename decltype(kspec_std::detail::leaf_type<I>(kspec_std::declval<kspec_std::tuple<Ts...>&>()))::type type;
};
template <::size_t I, class... Ts>
struct tuple_element<I, const kspec_std::tuple<Ts...> > : kspec_std::add_const<typename tuple_element<I, kspec_std::tuple<Ts...> >::type> {};
template <::size_t I, class... Ts>
struct tuple_element<I, volatile kspec_std::tuple<Ts...> > : kspec_std::add_volatile<typename tuple_element<I, kspec_std::tuple<Ts...> >::type> {};
template <::size_t I, class... Ts>
struct tuple_element<I, const volatile kspec_std::tuple<Ts...> > : kspec_std::add_cv<typename tuple_element<I, kspec_std::tuple<Ts...> >::type> {};
}  // namespace std

namespace kspec_std {

template <::size_t I, class... Ts>
__host__ __device__ constexpr typename tuple_element<I, tuple<Ts...> >::type& get(tuple<Ts...>& t) noexcept {
  return detail::leaf<I>(t);
}
template <::size_t I, class... Ts>
__host__ __device__ constexpr const typename tuple_element<I, tuple<Ts...> >::type& get(const tuple<Ts...>& t) noexcept {
  return detail::leaf<I>(t);
}
template <::size_t I, class... Ts>
__host__ __device__ constexpr typename tuple_element<I, tuple<Ts...> >::type&& get(tuple<Ts...>&& t) noexcept {
  return static_cast<typename tuple_element<I, tuple<Ts...> >::type&&>(detail::leaf<I>(t));
}
template <::size_t I, class... Ts>
__host__ __device__ constexpr const typename tuple_element<I, tuple<Ts...> >::type&& get(const tuple<Ts...>&& t) noexcept {
  return static_cast<const typename tuple_element<I, tuple<Ts...> >::type&&>(detail::leaf<I>(t));
}

// get<T>(tuple): the one element of type T
namespace detail {
template <::size_t I, class T, class... Ts>
struct find_type {  // enumerators: no device global (kspec/select.cuh)
  enum : ::size_t { count = 0, index = 0 };
};
template <::size_t I, class T, class U, class... Ts>
struct find_type<I, T, U, Ts...> {
  typedef find_type<I + 1, T, Ts...> rest;
  enum : ::size_t {
    count = rest::count + (is_same<T, U>::value ? 1 : 0),
    index = is_same<T, U>::value ? I : rest::index
  };
};
template <class T, class... Ts>
struct unique_index : integral_constant<::size_t, find_type<0, T, Ts...>::index> {
  static_assert(find_type<0, T, Ts...>::count == 1, "std::get<T>: T must occur exactly once in the tuple");
};
}  // namespace detail

template <class T, class... Ts>
__host__ __device__ constexpr T& get(tuple<Ts...>& t) noexcept {
  return get<detail::unique_index<T, Ts...>::value>(t);
}
template <class T, class... Ts>
__host__ __device__ constexpr const T& get(const tuple<Ts...>& t) noexcept {
  return get<detail::unique_index<T, Ts...>::value>(t);
}
template <class T, class... Ts>
__host__ __device__ constexpr T&& get(tuple<Ts...>&& t) noexcept {
  return get<detail::unique_index<T, Ts...>::value>(static_cast<tuple<Ts...>&&>(t));
}

// -- making tuples ------------------------------------------------------------------------------------------------

template <class... Ts>
__host__ __device__ constexpr tuple<typename decay<Ts>::type...> make_tuple(Ts&&... ts) {
  return tuple<typename decay<Ts>::type...>(static_cast<Ts&&>(ts)...);
}
template <class... Ts>
__host__ __device__ constexpr tuple<Ts&...> tie(Ts&... ts) noexcept {
  return tuple<Ts&...>(ts...);
}
template <class... Ts>
__host__ __device__ constexpr tuple<Ts&&...> forward_as_tuple(Ts&&... ts) noexcept {
  return tuple<Ts&&...>(static_cast<Ts&&>(ts)...);
}

namespace detail {
struct ignore_t {  // tie(a, std::ignore) = ...: takes any value and drops it
  template <class T>
  __host__ __device__ constexpr const ignore_t& operator=(const T&) const noexcept { return *this; }
};
}  // namespace detail
// a __device__ object: device code binds references to it (tie), and NVRTC compiles only device code
__device__ constexpr detail::ignore_t ignore{};

// -- comparisons and swap ---------------------------------------------------------------------------------------

namespace detail {
template <::size_t I, ::size_t N>
struct tuple_compare {
  template <class A, class B>
  __host__ __device__ static constexpr bool equal(const A& a, const B& b) {
    return get<I>(a) == get<I>(b) && tuple_compare<I + 1, N>::equal(a, b);
  }
  // lexicographic, through < alone
  template <class A, class B>
  __host__ __device__ static constexpr bool less(const A& a, const B& b) {
    return get<I>(a) < get<I>(b) || (!(get<I>(b) < get<I>(a)) && tuple_compare<I + 1, N>::less(a, b));
  }
};
template <::size_t N>
struct tuple_compare<N, N> {
  template <class A, class B>
  __host__ __device__ static constexpr bool equal(const A&, const B&) { return true; }
  template <class A, class B>
  __host__ __device__ static constexpr bool less(const A&, const B&) { return false; }
};
}  // namespace detail

template <class... Ts, class... Us>
__host__ __device__ constexpr bool operator==(const tuple<Ts...>& a, const tuple<Us...>& b) {
  static_assert(sizeof...(Ts) == sizeof...(Us), "std::tuple: comparing tuples of different sizes");
  return detail::tuple_compare<0, sizeof...(Ts)>::equal(a, b);
}
template <class... Ts, class... Us>
__host__ __device__ constexpr bool operator!=(const tuple<Ts...>& a, const tuple<Us...>& b) { return !(a == b); }
template <class... Ts, class... Us>
__host__ __device__ constexpr bool operator<(const tuple<Ts...>& a, const tuple<Us...>& b) {
  static_assert(sizeof...(Ts) == sizeof...(Us), "std::tuple: comparing tuples of different sizes");
  return detail::tuple_compare<0, sizeof...(Ts)>::less(a, b);
}
template <class... Ts, class... Us>
__host__ __device__ constexpr bool operator>(const tuple<Ts...>& a, const tuple<Us...>& b) { return b < a; }
template <class... Ts, class... Us>
__host__ __device__ constexpr bool operator<=(const tuple<Ts...>& a, const tuple<Us...>& b) { return !(b < a); }
template <class... Ts, class... Us>
__host__ __device__ constexpr bool operator>=(const tuple<Ts...>& a, const tuple<Us...>& b) { return !(a < b); }

template <class... Ts>
__host__ __device__ KSPEC_STD_CONSTEXPR14 void swap(tuple<Ts...>& a, tuple<Ts...>& b) {
  a.swap(b);
}

}  // namespace kspec_std
