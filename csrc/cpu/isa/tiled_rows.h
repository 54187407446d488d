// Windows kernel_h x 2 that tile rows of pixels of kC interleaved elements:
// NCHW (kC = 1, the rows of every plane) and channels_last with 1 or 2
// channels (the W * C rows of every image), where vectors along C would fill
// 1 or 2 lanes. An output row of out_w * kC elements reads 2 * out_w * kC
// input elements per window row, whose even and odd pixels are taps kw = 0
// and 1. Loops step (plane, row) instead of dividing per row: rows are short.
#pragma once

#include <ATen/Parallel.h>

#include "forward_kernels.h"
#include "route_16bit.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Floor-mode tiling by kernel_h x 2 windows: every input element lies in at
// most one window.
inline bool tiles_rows_w2(const Pool2dGeometry& g) {
  return is_tiled(g) && g.kernel_w == 2 && g.out_h * g.kernel_h <= g.in_h &&
         g.out_w * g.kernel_w <= g.in_w;
}

// A window row's 2 * n elements from `p`, split into taps kw = 0 and 1.
template <int kC, typename T>
inline std::pair<Vec, Vec> load_pixel_pairs(const T* p, int64_t n) {
  prefetch_ahead(p);
  prefetch_ahead(p + kLanes);
  if constexpr (kC == 1) {
    return load_even_odd(p, 2 * n);
  } else {
    const Vec lo = load_float(p, std::min(2 * n, kLanes));
    const Vec hi = n * 2 > kLanes ? load_float(p + kLanes, 2 * n - kLanes) : Vec(0.f);
    return deinterleave_pixels<kC>(lo, hi);
  }
}

// Values (and argmax) of `planes` planes; torch narrows these layouts one
// element at a time, hence the per-element NaN bits.
template <typename T, bool kArgmax, int kC, bool kStream>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  const Pool2dGeometry& g = a.g;
  const T* in = static_cast<const T*>(a.input);
  T* out = static_cast<T*>(a.values);
  const int64_t in_row = g.in_w * kC, out_row = g.out_w * kC;
  at::parallel_for(0, planes * g.out_h, grain_for(out_row * g.kernel_h * 2), [&](int64_t b,
                                                                                   int64_t e) {
    int64_t plane = b / g.out_h, oh = b % g.out_h;
    for (int64_t r = b; r < e; ++r) {
      const T* window = in + (plane * g.in_h + oh * g.kernel_h) * in_row;
      for (int64_t i0 = 0; i0 < out_row; i0 += kLanes) {
        const int64_t n = std::min(kLanes, out_row - i0);
        const auto [left, right] = load_pixel_pairs<kC>(window + 2 * i0, n);
        RunningMax<kArgmax> best(left, 0);
        best.update(right, 1);
        for (int64_t kh = 1; kh < g.kernel_h; ++kh) {
          const auto [l, r_] = load_pixel_pairs<kC>(window + kh * in_row + 2 * i0, n);
          best.update(l, kh * 2);
          best.update(r_, kh * 2 + 1);
        }
        store_lanes<kStream, true>(out + r * out_row + i0, best.value, n);
        if constexpr (kArgmax) {
          store_argmax_lanes<kStream>(a.argmax + r * out_row + i0, best.argmax, n);
        }
      }
      if (++oh == g.out_h) {
        oh = 0;
        ++plane;
      }
    }
    if constexpr (kStream) stream_fence();
  });
}

template <typename T, bool kArgmax, int kC>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  const int64_t outputs = planes * a.g.out_h * a.g.out_w * kC;
  const bool stream =
      worth_streaming(static_cast<T*>(a.values), a.g.out_w * kC, outputs, a.argmax);
  with_streaming(stream, [&](auto s) { forward_tiled_rows<T, kArgmax, kC, s.value>(a, planes); });
}

// n <= kLanes outputs of kC-channel pixels routed to their 2 * n inputs in
// kernel row kh (even pixels tap 2 * kh, odd ones 2 * kh + 1), through float
// lanes; route_16bit.h has the 16-bit-lane twin.
template <typename T, int kC, bool kCopy, bool kStream>
inline void route_pixel_pairs(const T* grad, const uint8_t* argmax, T* out, int64_t n,
                              int64_t kh) {
  const Vec g = load_float(grad, n);
  const Vec am = load_argmax(argmax, n);
  const auto [lo, hi] = interleave_pixels<kC>(select_grad<kCopy>(g, am, kh * 2),
                                              select_grad<kCopy>(g, am, kh * 2 + 1));
  store_lanes<kStream, true>(out, lo, std::min(2 * n, kLanes));
  if (2 * n > kLanes) store_lanes<kStream, true>(out + kLanes, hi, 2 * n - kLanes);
}

// Each input row is written once, from one output row (zeros where floor
// mode dropped rows or columns). torch's backward narrows per element, in
// both layouts.
template <typename T, int kC, bool kCopy, bool kStream>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  const Pool2dGeometry& g = a.g;
  const T* go = static_cast<const T*>(a.grad_output);
  T* gi = static_cast<T*>(a.grad_input);
  const int64_t in_row = g.in_w * kC, out_row = g.out_w * kC;
  at::parallel_for(0, planes * g.in_h, grain_for(in_row), [&](int64_t b, int64_t e) {
    int64_t plane = b / g.in_h, ih = b % g.in_h;
    int64_t oh = ih / g.kernel_h, kh = ih % g.kernel_h;
    for (int64_t r = b; r < e; ++r) {
      T* gi_row = gi + r * in_row;
      if (oh >= g.out_h) {
        fill_zero<kStream>(gi_row, in_row);
      } else {
        const int64_t o_row = (plane * g.out_h + oh) * out_row;
        for (int64_t i0 = 0; i0 < out_row; i0 += kLanes) {
          const int64_t n = std::min(kLanes, out_row - i0);
          if constexpr (kRoutesIn16BitLanes<T> && !kCopy) {
            route_pixel_pairs_16bit<T, kC, kStream>(go + o_row + i0, a.argmax + o_row + i0,
                                                    gi_row + 2 * i0, n, kh);
          } else {
            route_pixel_pairs<T, kC, kCopy, kStream>(go + o_row + i0, a.argmax + o_row + i0,
                                                     gi_row + 2 * i0, n, kh);
          }
        }
        fill_zero<kStream>(gi_row + 2 * out_row, in_row - 2 * out_row);
      }
      if (++kh == g.kernel_h) {
        kh = 0;
        ++oh;
      }
      if (++ih == g.in_h) {
        ih = oh = kh = 0;
        ++plane;
      }
    }
    if constexpr (kStream) stream_fence();
  });
}

template <typename T, int kC, bool kCopy>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  const int64_t inputs = planes * a.g.in_h * a.g.in_w * kC;
  const bool stream = worth_streaming(static_cast<T*>(a.grad_input), a.g.in_w * kC, inputs);
  with_streaming(stream, [&](auto s) {
    backward_tiled_rows<T, kC, kCopy, s.value>(a, planes);
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
