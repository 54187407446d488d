// Division of a non-negative int64 by a positive one, for index arithmetic
// compiled by both the host compiler and nvcc.
#pragma once

#include <cstdint>

#include "poolx/macros.h"

namespace poolx {

// nvcc compiles a 64-bit `/` into a call to a division routine, and ptxas
// reports the registers saved around that call as spills. On the device this
// shifts where b is a power of two (a dilation or stride of 1 or 2, many
// channel counts and widths), divides in 32 bits when both operands fit
// (every in-plane index, every offset below 2^32) and otherwise by long
// division, which needs no call.
POOLX_HD int64_t div_nonneg(int64_t a, int64_t b) {
#ifdef __CUDA_ARCH__
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  if ((ub & (ub - 1)) == 0) return static_cast<int64_t>(ua >> (__ffsll(b) - 1));
  if (((ua | ub) >> 32) == 0) {
    return static_cast<uint32_t>(ua) / static_cast<uint32_t>(ub);
  }
  uint64_t q = 0, r = 0;
#pragma unroll 1
  for (int bit = 63 - __clzll(static_cast<long long>(ua)); bit >= 0; --bit) {
    r = (r << 1) | ((ua >> bit) & 1);
    if (r >= ub) {
      r -= ub;
      q |= uint64_t{1} << bit;
    }
  }
  return static_cast<int64_t>(q);
#else
  return a / b;
#endif
}

// The 32-bit form, for kernels whose every index fits (cuda_common.cuh's
// index_width): one unsigned 32-bit division, or a shift.
POOLX_HD int32_t div_nonneg(int32_t a, int32_t b) {
#ifdef __CUDA_ARCH__
  const uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  if ((ub & (ub - 1)) == 0) return static_cast<int32_t>(ua >> (__ffs(b) - 1));
  return static_cast<int32_t>(ua / ub);
#else
  return a / b;
#endif
}

}  // namespace poolx
