// channels_last with 1 or 2 channels and tiled windows 2 wide: vectors run
// along the contiguous (W * C) row instead of along C (which would fill 1 or
// 2 lanes). An output row of out_w * C elements reads 2 * out_w * C input
// elements per window row, whose even and odd pixels are taps kw = 0 and 1.
#pragma once

#include <ATen/Parallel.h>

#include "forward_kernels.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

inline bool narrow_channels_last(const Pool2dGeometry& g, int64_t channels) {
  return is_tiled(g) && g.kernel_w == 2 && (channels == 1 || channels == 2) &&
         g.out_h * g.kernel_h <= g.in_h && g.out_w * g.kernel_w <= g.in_w;
}

// A window row's 2 * n elements from `p`, split into taps kw = 0 and 1.
template <int kC, typename T>
inline std::pair<Vec, Vec> load_pixel_pairs(const T* p, int64_t n) {
  const Vec lo = load_float(p, std::min(2 * n, kLanes));
  const Vec hi = n * 2 > kLanes ? load_float(p + kLanes, 2 * n - kLanes) : Vec(0.f);
  return deinterleave_pixels<kC>(lo, hi);
}

template <typename T, bool kArgmax, int kC>
void forward_channels_last_narrow(const FastForwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* in = static_cast<const T*>(a.input);
  T* out = static_cast<T*>(a.values);
  const int64_t in_row = g.in_w * kC, out_row = g.out_w * kC;
  const int64_t rows = a.out_l.n * g.out_h;
  at::parallel_for(0, rows, grain_for(out_row * g.kernel_h * 2), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* window = in + ((r / g.out_h) * g.in_h + (r % g.out_h) * g.kernel_h) * in_row;
      for (int64_t i0 = 0; i0 < out_row; i0 += kLanes) {
        const int64_t n = std::min(kLanes, out_row - i0);
        RunningMax<kArgmax> best(0);
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const auto [left, right] = load_pixel_pairs<kC>(window + kh * in_row + 2 * i0, n);
          best.update(left, kh * 2);
          best.update(right, kh * 2 + 1);
        }
        // torch narrows fewer than a vector's channels one at a time
        store_float_per_element_nan(out + r * out_row + i0, best.value, n);
        if constexpr (kArgmax) store_argmax(a.argmax + r * out_row + i0, best.argmax, n);
      }
    }
  });
}

// Each input row is written once, from one output row (zeros where floor
// mode dropped rows or columns).
template <typename T, int kC, bool kCopy = false>
void backward_channels_last_narrow(const FastBackwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* go = static_cast<const T*>(a.grad_output);
  T* gi = static_cast<T*>(a.grad_input);
  const int64_t in_row = g.in_w * kC, out_row = g.out_w * kC;
  const int64_t rows = a.in_l.n * g.in_h;
  at::parallel_for(0, rows, grain_for(in_row), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ih = r % g.in_h, oh = ih / g.kernel_h, kh = ih % g.kernel_h;
      T* gi_row = gi + r * in_row;
      if (oh >= g.out_h) {
        std::fill(gi_row, gi_row + in_row, T(0));
        continue;
      }
      const int64_t o_row = ((r / g.in_h) * g.out_h + oh) * out_row;
      for (int64_t i0 = 0; i0 < out_row; i0 += kLanes) {
        const int64_t n = std::min(kLanes, out_row - i0);
        const Vec grad = load_float(go + o_row + i0, n);
        const Vec argmax = load_argmax(a.argmax + o_row + i0, n);
        const auto [lo, hi] = interleave_pixels<kC>(select_grad<kCopy>(grad, argmax, kh * 2),
                                                    select_grad<kCopy>(grad, argmax, kh * 2 + 1));
        store_float(gi_row + 2 * i0, lo, std::min(2 * n, kLanes));
        if (2 * n > kLanes) store_float(gi_row + 2 * i0 + kLanes, hi, 2 * n - kLanes);
      }
      std::fill(gi_row + 2 * out_row, gi_row + in_row, T(0));
    }
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
