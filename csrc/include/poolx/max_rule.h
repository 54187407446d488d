// PyTorch's max rule: a candidate wins if it is greater than the running max
// or is NaN, so the first maximum wins ties and the last NaN wins.
#pragma once

#include <limits>
#include <type_traits>

#include "poolx/macros.h"

namespace c10 {
struct Half;
struct BFloat16;
}  // namespace c10

namespace poolx {

// Arithmetic type used to compare and accumulate: float for the 16-bit floats.
template <typename T>
struct acc_type {
  using type = T;
};
template <>
struct acc_type<c10::Half> {
  using type = float;
};
template <>
struct acc_type<c10::BFloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename acc_type<T>::type;

// Initial running max: -inf for floating types, the lowest value for integers.
template <typename A>
POOLX_HD A lowest_value() {
  if constexpr (std::is_floating_point<A>::value) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}

template <typename A>
POOLX_HD bool replaces_max(A candidate, A running_max) {
  return candidate > running_max || candidate != candidate;  // x != x only for NaN
}

}  // namespace poolx
