// Forward for element types without vector paths (float64): windows side by
// side pooled as lanes of arrays whose selects the compiler vectorizes,
// without the element kernels' index arithmetic (divisions per output) and
// strided reads. channels_last: a window's contiguous channels are the lanes;
// NCHW: the windows of a row whose columns all lie inside the input, a
// stride apart (the others one by one). Max rule and first tap are
// max_pool2d_forward_elem's.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>

#include "../index_rows.h"
#include "forward_kernels.h"
#include "poolx/max_rule.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Up to kPoolLanes windows whose taps are the same rows and columns:
// lane i's tap (kh, kw) at image[first + i * lane_step + kh * row_step +
// kw * col_step]; their maxima to out[0, n), the taps to argmax (if not
// null). kLaneStep, if not 0, is lane_step known to the compiler.
constexpr int64_t kPoolLanes = 64;

template <int64_t kLaneStep, typename T>
inline void pool_lanes(const T* image, int64_t first, int64_t lane_step, int64_t n,
                       TapRange taps_h, TapRange taps_w, int64_t row_step, int64_t col_step,
                       int64_t kernel_w, T* out, uint8_t* argmax) {
  const int64_t step = kLaneStep != 0 ? kLaneStep : lane_step;
  T best[kPoolLanes];
  int64_t tap_of[kPoolLanes];  // as wide as T, so that the selects vectorize together
  std::fill_n(best, n, lowest_value<T>());
  // an argmax is 1 byte wherever one is written (windows of up to 256 taps)
  std::fill_n(tap_of, n, taps_h.begin * kernel_w + taps_w.begin);
  for (int64_t kh = taps_h.begin; kh < taps_h.end; ++kh) {
    for (int64_t kw = taps_w.begin; kw < taps_w.end; ++kw) {
      const T* p = image + (first + kh * row_step + kw * col_step);
      const int64_t tap = kh * kernel_w + kw;
      for (int64_t i = 0; i < n; ++i) {  // selects, which vectorize
        const T v = p[i * step];
        const bool take = replaces_max(v, best[i]);
        best[i] = take ? v : best[i];
        tap_of[i] = take ? tap : tap_of[i];
      }
    }
  }
  std::copy_n(best, n, out);
  if (argmax != nullptr) {
    for (int64_t i = 0; i < n; ++i) argmax[i] = static_cast<uint8_t>(tap_of[i]);
  }
}

template <typename T>
void forward_by_pixels(const FastForwardArgs& a) {
  const Pool2dGeometry g = a.g;
  const bool cl = a.in_l.channels_last;
  const int64_t C = cl ? a.in_l.c : 1, images = cl ? a.in_l.n : a.in_l.n * a.in_l.c;
  const int64_t image_size = g.in_h * g.in_w * C;
  const int64_t row_step = g.dilation_h * g.in_w * C, col_step = g.dilation_w * C;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = a.index_rows;
  // NCHW: the windows of these columns have every column tap inside the input
  const TapRange inside =
      interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  const int64_t rows = images * g.out_h;
  at::parallel_for(0, rows, grain_for(g.out_w * C * g.kernel_h * g.kernel_w), [&](int64_t b,
                                                                                  int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* image = in + (r / g.out_h) * image_size;
      const int64_t h0 = (r % g.out_h) * g.stride_h - g.pad_h;
      const TapRange taps_h = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
      const auto window = [&](int64_t ow, int64_t c0, int64_t n) {  // n channels from c0
        const int64_t w0 = ow * g.stride_w - g.pad_w;
        const int64_t o = (r * g.out_w + ow) * C + c0;
        pool_lanes<1>(image, (h0 * g.in_w + w0) * C + c0, 1, n, taps_h,
                      window_taps(w0, g.kernel_w, g.dilation_w, g.in_w), row_step, col_step,
                      g.kernel_w, out + o, argmax != nullptr ? argmax + o : nullptr);
      };
      if (cl) {
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          for (int64_t c0 = 0; c0 < C; c0 += kPoolLanes) {
            window(ow, c0, std::min(kPoolLanes, C - c0));
          }
        }
      } else {
        for (int64_t ow = 0; ow < inside.begin; ++ow) window(ow, 0, 1);
        for (int64_t ow = inside.begin; ow < inside.end; ow += kPoolLanes) {
          const int64_t n = std::min(kPoolLanes, inside.end - ow), o = r * g.out_w + ow;
          const int64_t first = h0 * g.in_w + ow * g.stride_w - g.pad_w;
          const TapRange taps_w{0, g.kernel_w};
          uint8_t* am = argmax != nullptr ? argmax + o : nullptr;
          const auto lanes = [&](auto step) {
            pool_lanes<decltype(step)::value>(image, first, g.stride_w, n, taps_h, taps_w,
                                              row_step, col_step, g.kernel_w, out + o, am);
          };
          if (g.stride_w == 1) lanes(std::integral_constant<int64_t, 1>());
          else if (g.stride_w == 2) lanes(std::integral_constant<int64_t, 2>());
          else lanes(std::integral_constant<int64_t, 0>());
        }
        for (int64_t ow = inside.end; ow < g.out_w; ++ow) window(ow, 0, 1);
      }
      if (index_rows != nullptr) index_rows->convert(r);
    }
    if (index_rows != nullptr) index_rows->publish();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
