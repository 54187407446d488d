// Vectorized forward of NCHW along the output row (stride 1 or 2, even/odd
// de-interleave for stride 2).
#pragma once

#include <ATen/Parallel.h>

#include "forward_kernels.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

template <typename T>
inline void forward_elem_nchw(const T* plane, const Pool2dGeometry& g, int64_t oh, int64_t ow,
                              T* out, uint8_t* argmax) {
  const auto best = max_pool2d_forward_elem(plane, PlaneStrides{g.in_w, 1}, g, oh, ow);
  *out = static_cast<T>(best.value);
  if (argmax != nullptr) *argmax = static_cast<uint8_t>(best.argmax);
}

// NCHW, stride_w in {1, 2}, dilation_w == 1: one output row per step, kLanes outputs per
// vector; windows cut by the row's ends run per element. Volumes loop over slices too.
template <typename T, bool kArgmax>
void forward_nchw(const FastForwardArgs& a) {
  const Pool2dGeometry& g = a.g;
  const T* in = static_cast<const T*>(a.input);
  T* out = static_cast<T*>(a.values);
  const TapRange inner =
      interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  const int64_t rows = a.out_l.numel() / g.out_w, slice = g.in_h * g.in_w;
  at::parallel_for(0, rows, grain_for(g.out_w * g.kernel_h * g.stride_w), [&](int64_t b,
                                                                              int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % g.out_h, slab = r / g.out_h;  // slab: plane * out_d + od
      const T* plane = in + slab / g.out_d * g.in_d * slice;  // a volume's first slice
      const int64_t d0 = slab % g.out_d * g.stride_d - g.pad_d;
      const TapRange taps_d = g.planar() ? TapRange{0, 1}
                                         : window_taps(d0, g.kernel_d, g.dilation_d, g.in_d);
      const int64_t row = slab % g.out_d * g.out_h + oh;  // of the folded view
      T* out_row = out + r * g.out_w;
      uint8_t* am_row = kArgmax ? a.argmax + r * g.out_w : nullptr;
      for (int64_t ow = 0; ow < inner.begin; ++ow) {
        forward_elem_nchw(plane, g, row, ow, out_row + ow, kArgmax ? am_row + ow : nullptr);
      }
      for (int64_t ow = inner.end; ow < g.out_w; ++ow) {
        forward_elem_nchw(plane, g, row, ow, out_row + ow, kArgmax ? am_row + ow : nullptr);
      }
      const int64_t h0 = oh * g.stride_h - g.pad_h;
      const TapRange taps_h = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
      for (int64_t ow0 = inner.begin; ow0 < inner.end; ow0 += kLanes) {
        const int64_t n = std::min(kLanes, inner.end - ow0);
        RunningMax<kArgmax> best((taps_d.begin * g.kernel_h + taps_h.begin) * g.kernel_w);
        for (int64_t kd = taps_d.begin; kd < taps_d.end; ++kd) {
          for (int64_t kh = taps_h.begin; kh < taps_h.end; ++kh) {
            const T* in_row =
                plane + (d0 + kd * g.dilation_d) * slice + (h0 + kh * g.dilation_h) * g.in_w;
            const int64_t start = ow0 * g.stride_w - g.pad_w;
            const int64_t tap = (kd * g.kernel_h + kh) * g.kernel_w;
            prefetch_ahead(in_row + start);
            if (g.stride_w == 1) {
              for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
                best.update(load_float(in_row + start + kw, n), tap + kw);
              }
            } else {
              // taps kw and kw + 1 are the even and odd elements of one load
              for (int64_t kw = 0; kw < g.kernel_w; kw += 2) {
                const int64_t avail = std::min(2 * kLanes, g.in_w - (start + kw));
                const auto [even, odd] = load_even_odd(in_row + start + kw, avail);
                best.update(even, tap + kw);
                if (kw + 1 < g.kernel_w) best.update(odd, tap + kw + 1);
              }
            }
          }
        }
        store_float<T, /*kExact=*/true>(out_row + ow0, best.value, n);
        if constexpr (kArgmax) store_argmax(am_row + ow0, best.argmax, n);
      }
      if (kArgmax && a.index_rows != nullptr) a.index_rows->convert(r);
    }
    if (kArgmax && a.index_rows != nullptr) a.index_rows->publish();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
