// kspec's CPU device, execution model (5/5): CUDA's atomic functions, correct across the OS threads that run
// blocks in parallel (GCC/Clang __atomic builtins; relaxed order, as CUDA's atomics are). Floating-point
// and 16-bit additions are compare-and-swap loops on the value's bits. The _block and _system variants
// are the same functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace kspec_host {
namespace exec {

template <std::size_t N> struct bits_of;
template <> struct bits_of<2> { using type = std::uint16_t; };
template <> struct bits_of<4> { using type = std::uint32_t; };
template <> struct bits_of<8> { using type = std::uint64_t; };

// *address = update(*address) atomically; returns the old value. T: any trivially copyable 2/4/8-byte type.
template <typename T, typename Update>
inline T atomic_update(T* address, Update update) {
  using B = typename bits_of<sizeof(T)>::type;
  B* word = reinterpret_cast<B*>(address);
  B expected = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    T old;
    std::memcpy(static_cast<void*>(&old), &expected, sizeof(T));
    const T next = update(old);
    B desired;
    std::memcpy(&desired, static_cast<const void*>(&next), sizeof(T));
    if (__atomic_compare_exchange_n(word, &expected, desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return old;
  }
}

// The value parameters take T from the pointer alone, so that atomicAdd(&unsigned_counter, 1) converts the
// 1, as CUDA's overloads do.
template <typename T>
using value_t = typename std::enable_if<true, T>::type;

template <typename T>
using atomic_int_t = std::enable_if_t<std::is_integral<T>::value && (sizeof(T) == 4 || sizeof(T) == 8), T>;

template <typename T>
using atomic_add_other_t =
    std::enable_if_t<!std::is_integral<T>::value && (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) &&
                         std::is_trivially_copyable<T>::value,
                     decltype(std::declval<T>() + std::declval<T>(), T())>;

// 16-byte values (CUDA 12.x+'s 128-bit atomicExch / atomicCAS): under one of a table of locks, picked by
// address; every 16-byte atomic on a location takes the same lock.
inline std::mutex& lock_for(const void* address) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<std::uintptr_t>(address) >> 4) % 64];
}

}  // namespace exec
}  // namespace kspec_host

// Integers: int, unsigned int, unsigned long long, long long (and their long aliases).
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicAdd(T* a, kspec_host::exec::value_t<T> v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicSub(T* a, kspec_host::exec::value_t<T> v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicAnd(T* a, kspec_host::exec::value_t<T> v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicOr(T* a, kspec_host::exec::value_t<T> v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicXor(T* a, kspec_host::exec::value_t<T> v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicMin(T* a, kspec_host::exec::value_t<T> v) {
  return kspec_host::exec::atomic_update(a, [v](T old) { return v < old ? v : old; });
}
template <typename T> inline kspec_host::exec::atomic_int_t<T> atomicMax(T* a, kspec_host::exec::value_t<T> v) {
  return kspec_host::exec::atomic_update(a, [v](T old) { return v > old ? v : old; });
}
inline unsigned int atomicInc(unsigned int* a, unsigned int limit) {
  return kspec_host::exec::atomic_update(a, [limit](unsigned int old) { return old >= limit ? 0u : old + 1u; });
}
inline unsigned int atomicDec(unsigned int* a, unsigned int limit) {
  return kspec_host::exec::atomic_update(a, [limit](unsigned int old) { return old == 0u || old > limit ? limit : old - 1u; });
}

// Exchange and compare-and-swap: any 2/4/8-byte value (CUDA: int, unsigned, unsigned long long, float,
// unsigned short...).
template <typename T>
inline std::enable_if_t<sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, T> atomicExch(T* a, kspec_host::exec::value_t<T> v) {
  using B = typename kspec_host::exec::bits_of<sizeof(T)>::type;
  B bits;
  std::memcpy(&bits, static_cast<const void*>(&v), sizeof(T));
  const B old_bits = __atomic_exchange_n(reinterpret_cast<B*>(a), bits, __ATOMIC_RELAXED);
  T old;
  std::memcpy(static_cast<void*>(&old), &old_bits, sizeof(T));
  return old;
}
template <typename T>
inline std::enable_if_t<sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, T> atomicCAS(T* a, kspec_host::exec::value_t<T> compare, kspec_host::exec::value_t<T> v) {
  using B = typename kspec_host::exec::bits_of<sizeof(T)>::type;
  B expected, desired;
  std::memcpy(&expected, static_cast<const void*>(&compare), sizeof(T));
  std::memcpy(&desired, static_cast<const void*>(&v), sizeof(T));
  __atomic_compare_exchange_n(reinterpret_cast<B*>(a), &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  T old;
  std::memcpy(static_cast<void*>(&old), &expected, sizeof(T));
  return old;
}

template <typename T>
inline std::enable_if_t<sizeof(T) == 16 && std::is_trivially_copyable<T>::value, T> atomicExch(T* a, kspec_host::exec::value_t<T> v) {
  std::lock_guard<std::mutex> hold(kspec_host::exec::lock_for(a));
  T old;
  std::memcpy(static_cast<void*>(&old), static_cast<const void*>(a), sizeof(T));
  std::memcpy(static_cast<void*>(a), static_cast<const void*>(&v), sizeof(T));
  return old;
}
template <typename T>
inline std::enable_if_t<sizeof(T) == 16 && std::is_trivially_copyable<T>::value, T> atomicCAS(
    T* a, kspec_host::exec::value_t<T> compare, kspec_host::exec::value_t<T> v) {
  std::lock_guard<std::mutex> hold(kspec_host::exec::lock_for(a));
  T old;
  std::memcpy(static_cast<void*>(&old), static_cast<const void*>(a), sizeof(T));
  if (std::memcmp(static_cast<const void*>(&old), static_cast<const void*>(&compare), sizeof(T)) == 0)
    std::memcpy(static_cast<void*>(a), static_cast<const void*>(&v), sizeof(T));
  return old;
}

// float, double, and 16/32-bit value types with an addition (__half, __half2, __nv_bfloat16).
template <typename T>
inline kspec_host::exec::atomic_add_other_t<T> atomicAdd(T* a, kspec_host::exec::value_t<T> v) {
  return kspec_host::exec::atomic_update(a, [v](T old) { return static_cast<T>(old + v); });
}

#define KSPEC_HOST_SCOPED_ATOMIC(name)                                                         \
  template <typename T, typename... V>                                                         \
  inline auto name##_block(T* a, V... v)->decltype(name(a, v...)) { return name(a, v...); }   \
  template <typename T, typename... V>                                                         \
  inline auto name##_system(T* a, V... v)->decltype(name(a, v...)) { return name(a, v...); }
KSPEC_HOST_SCOPED_ATOMIC(atomicAdd)
KSPEC_HOST_SCOPED_ATOMIC(atomicSub)
KSPEC_HOST_SCOPED_ATOMIC(atomicExch)
KSPEC_HOST_SCOPED_ATOMIC(atomicMin)
KSPEC_HOST_SCOPED_ATOMIC(atomicMax)
KSPEC_HOST_SCOPED_ATOMIC(atomicInc)
KSPEC_HOST_SCOPED_ATOMIC(atomicDec)
KSPEC_HOST_SCOPED_ATOMIC(atomicCAS)
KSPEC_HOST_SCOPED_ATOMIC(atomicAnd)
KSPEC_HOST_SCOPED_ATOMIC(atomicOr)
KSPEC_HOST_SCOPED_ATOMIC(atomicXor)
#undef KSPEC_HOST_SCOPED_ATOMIC
