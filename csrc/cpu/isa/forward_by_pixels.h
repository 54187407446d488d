// Forward for element types without vector paths (float64) in channels_last:
// window by window along contiguous channels, the running maxima of up to
// kBlock channels in arrays whose selects the compiler vectorizes, without
// the element kernels' index arithmetic and strided reads per output. (NCHW
// images of one channel took this path too, slower than the element kernels.)
// Max rule and first tap are max_pool2d_forward_elem's.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>

#include "../index_rows.h"
#include "forward_kernels.h"
#include "poolx/max_rule.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

template <typename T>
void forward_by_pixels(const FastForwardArgs& a) {
  constexpr int64_t kBlock = 64;
  const Pool2dGeometry g = a.g;
  const bool cl = a.in_l.channels_last;
  const int64_t C = cl ? a.in_l.c : 1, images = cl ? a.in_l.n : a.in_l.n * a.in_l.c;
  const int64_t image_size = g.in_h * g.in_w * C;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = a.index_rows;
  const int64_t rows = images * g.out_h;
  at::parallel_for(0, rows, grain_for(g.out_w * C * g.kernel_h * g.kernel_w), [&](int64_t b,
                                                                                  int64_t e) {
    T best[kBlock];
    int64_t tap_of[kBlock];  // as wide as T, so that the selects vectorize together
    for (int64_t r = b; r < e; ++r) {
      const T* image = in + (r / g.out_h) * image_size;
      const int64_t h0 = (r % g.out_h) * g.stride_h - g.pad_h;
      const TapRange taps_h = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t w0 = ow * g.stride_w - g.pad_w;
        const TapRange taps_w = window_taps(w0, g.kernel_w, g.dilation_w, g.in_w);
        const int64_t o = (r * g.out_w + ow) * C;
        for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
          const int64_t n = std::min(kBlock, C - c0);
          std::fill_n(best, n, lowest_value<T>());
          // an argmax is 1 byte wherever one is written (windows of up to 256 taps)
          std::fill_n(tap_of, n, taps_h.begin * g.kernel_w + taps_w.begin);
          for (int64_t kh = taps_h.begin; kh < taps_h.end; ++kh) {
            const T* row = image + (h0 + kh * g.dilation_h) * g.in_w * C + c0;
            for (int64_t kw = taps_w.begin; kw < taps_w.end; ++kw) {
              const T* p = row + (w0 + kw * g.dilation_w) * C;
              const int64_t tap = kh * g.kernel_w + kw;
              for (int64_t c = 0; c < n; ++c) {  // selects, which vectorize
                const bool take = replaces_max(p[c], best[c]);
                best[c] = take ? p[c] : best[c];
                tap_of[c] = take ? tap : tap_of[c];
              }
            }
          }
          std::copy_n(best, n, out + o + c0);
          if (argmax != nullptr) {
            for (int64_t c = 0; c < n; ++c) argmax[o + c0 + c] = static_cast<uint8_t>(tap_of[c]);
          }
        }
      }
      if (index_rows != nullptr) index_rows->convert(r);
    }
    if (index_rows != nullptr) index_rows->publish();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
