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

// One output row of out_row elements from the kernel_h window rows at
// `window` (in_row apart). kRows: kernel_h when known at compile time (2,
// nearly every network), else 0. Full vectors and the row's tail are
// separate calls of `vector_at`, so full ones load and store unmasked.
template <typename T, bool kArgmax, int kC, bool kStream, int kRows>
inline void forward_tiled_row(const T* window, int64_t in_row, int64_t kernel_h, T* out,
                              uint8_t* argmax, int64_t out_row) {
  const int64_t rows = kRows ? kRows : kernel_h;
  const auto vector_at = [&](int64_t i0, int64_t n) {
    const auto [left, right] = load_pixel_pairs<kC>(window + 2 * i0, n);
    RunningMax<kArgmax> best(left, 0);
    best.update(right, 1);
    for (int64_t kh = 1; kh < rows; ++kh) {
      const auto [l, r] = load_pixel_pairs<kC>(window + kh * in_row + 2 * i0, n);
      best.update(l, kh * 2);
      best.update(r, kh * 2 + 1);
    }
    store_lanes<kStream, true>(out + i0, best.value, n);
    if constexpr (kArgmax) store_argmax_lanes<kStream>(argmax + i0, best.argmax, n);
  };
  int64_t i0 = 0;
  for (; i0 + kLanes <= out_row; i0 += kLanes) vector_at(i0, kLanes);
  if (i0 < out_row) vector_at(i0, out_row - i0);
}

// Values (and argmax) of `planes` planes; torch narrows these layouts one
// element at a time, hence the per-element NaN bits.
template <typename T, bool kArgmax, int kC, bool kStream, int kRows>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  // Sizes as locals (see forward_channels_last): stores could alias `a`.
  const int64_t out_h = a.g.out_h, kernel_h = a.g.kernel_h, in_h = a.g.in_h;
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  at::parallel_for(0, planes * out_h, grain_for(out_row * kernel_h * 2), [=](int64_t b,
                                                                             int64_t e) {
    int64_t plane = b / out_h, oh = b % out_h;
    for (int64_t r = b; r < e; ++r) {
      forward_tiled_row<T, kArgmax, kC, kStream, kRows>(
          in + (plane * in_h + oh * kernel_h) * in_row, in_row, kernel_h, out + r * out_row,
          kArgmax ? argmax + r * out_row : nullptr, out_row);
      if (++oh == out_h) {
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
  with_streaming(stream, [&](auto s) {
    a.g.kernel_h == 2 ? forward_tiled_rows<T, kArgmax, kC, s.value, 2>(a, planes)
                      : forward_tiled_rows<T, kArgmax, kC, s.value, 0>(a, planes);
  });
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
  // Sizes as locals (see forward_tiled_rows).
  const int64_t in_h = a.g.in_h, out_h = a.g.out_h, kernel_h = a.g.kernel_h;
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC;
  const T* const go = static_cast<const T*>(a.grad_output);
  const uint8_t* const argmax = a.argmax;
  T* const gi = static_cast<T*>(a.grad_input);
  at::parallel_for(0, planes * in_h, grain_for(in_row), [=](int64_t b, int64_t e) {
    int64_t plane = b / in_h, ih = b % in_h;
    int64_t oh = ih / kernel_h, kh = ih % kernel_h;
    for (int64_t r = b; r < e; ++r) {
      T* gi_row = gi + r * in_row;
      if (oh >= out_h) {
        fill_zero<kStream>(gi_row, in_row);
      } else {
        const int64_t o_row = (plane * out_h + oh) * out_row;
        // full vectors and the tail as separate calls: full ones unmasked
        const auto route = [&](int64_t i0, int64_t n) {
          if constexpr (kRoutesIn16BitLanes<T> && !kCopy) {
            route_pixel_pairs_16bit<T, kC, kStream>(go + o_row + i0, argmax + o_row + i0,
                                                    gi_row + 2 * i0, n, kh);
          } else {
            route_pixel_pairs<T, kC, kCopy, kStream>(go + o_row + i0, argmax + o_row + i0,
                                                     gi_row + 2 * i0, n, kh);
          }
        };
        int64_t i0 = 0;
        for (; i0 + kLanes <= out_row; i0 += kLanes) route(i0, kLanes);
        if (i0 < out_row) route(i0, out_row - i0);
        fill_zero<kStream>(gi_row + 2 * out_row, in_row - 2 * out_row);
      }
      if (++kh == kernel_h) {
        kh = 0;
        ++oh;
      }
      if (++ih == in_h) {
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
