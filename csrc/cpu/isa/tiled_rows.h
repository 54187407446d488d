// Windows kernel_h x 2 that tile rows of pixels of kC interleaved elements:
// NCHW (kC = 1, the rows of every plane) and channels_last with 1 or 2
// channels (the W * C rows of every image), where vectors along C would fill
// 1 or 2 lanes. An output row of out_w * kC elements reads 2 * out_w * kC
// input elements per window row, whose even and odd pixels are taps kw = 0
// and 1. Loops step (plane, row) instead of dividing per row: rows are short.
// The forward also takes NCHW windows kernel_h x 4 (1-D pooling by 4, whose
// rows are long), split into taps by two even/odd splits. Volumes (NCDHW, the
// slices' rows one after another: geometry.h) tiled kernel_d slices deep
// take the same paths: a window's rows are its kernel_d * kernel_h rows, row
// kd * kernel_h + kh, of kd slices and kh rows down.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "forward_kernels.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Floor-mode tiling by kernel_h x 2 windows: every input element lies in at
// most one window.
inline bool tiles_rows_w2(const Pool2dGeometry& g) {
  return tiles_volume(g) && g.kernel_w == 2;
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

// A window row's 4 * n NCHW elements from `p`, split into taps kw = 0 to 3:
// the even and odd elements of each half, whose evens and odds split again.
template <typename T>
inline std::array<Vec, 4> load_pixel_quads(const T* p, int64_t n) {
  for (int64_t i = 0; i < 4; ++i) prefetch_ahead(p + i * kLanes);
  const auto [even_lo, odd_lo] = load_even_odd(p, std::min(4 * n, 2 * kLanes));
  const auto [even_hi, odd_hi] = 4 * n > 2 * kLanes
                                     ? load_even_odd(p + 2 * kLanes, 4 * n - 2 * kLanes)
                                     : std::pair<Vec, Vec>(Vec(0.f), Vec(0.f));
  const auto [tap0, tap2] = deinterleave_pixels<1>(even_lo, even_hi);
  const auto [tap1, tap3] = deinterleave_pixels<1>(odd_lo, odd_hi);
  return {tap0, tap1, tap2, tap3};
}

// One output row of out_row elements from the window rows (kW wide) at
// `window`: kernel_h rows in_row apart, in each of kernel_d slices in_slice
// apart, handed to store(i0, best, n) a vector at a time. Full vectors and
// the row's tail are separate calls of `vector_at`, so full ones load
// unmasked.
template <bool kArgmax, int kC, int kW, typename T, typename Store>
inline void forward_tiled_row(const T* window, int64_t in_row, int64_t kernel_h,
                              int64_t in_slice, int64_t kernel_d, int64_t out_row,
                              Store&& store) {
  static_assert(kW == 2 || (kW == 4 && kC == 1));
  const auto vector_at = [&](int64_t i0, int64_t n) {
    const auto taps_of_row = [&](int64_t kd, int64_t kh) {
      const T* p = window + kd * in_slice + kh * in_row + kW * i0;
      if constexpr (kW == 2) {
        const auto [left, right] = load_pixel_pairs<kC>(p, n);
        return std::array<Vec, 2>{left, right};
      } else {
        return load_pixel_quads(p, n);
      }
    };
    const auto first = taps_of_row(0, 0);
    RunningMax<kArgmax> best(first[0], 0);
    for (int kw = 1; kw < kW; ++kw) best.update(first[kw], kw);
    for (int64_t kd = 0; kd < kernel_d; ++kd) {
      for (int64_t kh = kd == 0 ? 1 : 0; kh < kernel_h; ++kh) {
        const auto taps = taps_of_row(kd, kh);
        const int64_t row = kd * kernel_h + kh;
        for (int kw = 0; kw < kW; ++kw) best.update(taps[kw], row * kW + kw);
      }
    }
    store(i0, best, n);
  };
  int64_t i0 = 0;
  for (; i0 + kLanes <= out_row; i0 += kLanes) vector_at(i0, kLanes);
  if (i0 < out_row) vector_at(i0, out_row - i0);
}

// Values (and argmax) of `planes` planes. Streamed values (large outputs) go
// through a StreamAppender, tasks starting at whole vectors.
template <typename T, bool kArgmax, int kC, int kW, bool kStream>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  // Sizes as locals (see forward_channels_last): stores could alias `a`.
  const int64_t out_h = a.g.out_h, kernel_h = a.g.kernel_h, in_h = a.g.in_h;
  const int64_t out_d = a.g.out_d, kernel_d = a.g.kernel_d, in_d = a.g.in_d;
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC, in_slice = in_h * in_row;
  const int64_t rows = planes * out_d * out_h;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = kArgmax ? a.index_rows : nullptr;
  const int64_t unit = kStream ? rows_per_aligned_start(out_row, kLanes) : 1;
  const int64_t grain =
      std::max<int64_t>(1, grain_for(out_row * kernel_d * kernel_h * kW) / unit);
  at::parallel_for(0, ceil_div_nonneg(rows, unit), grain, [=](int64_t b, int64_t e) {
    const int64_t first = b * unit, last = std::min(rows, e * unit);
    StreamAppender<ValueLanes<T>> values(out + first * out_row);
    // output slice `slab` (of all planes' out_d), row oh; its windows' first
    // input slice
    int64_t slab = first / out_h, oh = first % out_h;
    const auto first_slice = [&] { return slab / out_d * in_d + slab % out_d * kernel_d; };
    const T* slice = in + first_slice() * in_slice;
    for (int64_t r = first; r < last; ++r) {
      forward_tiled_row<kArgmax, kC, kW>(
          slice + oh * kernel_h * in_row, in_row, kernel_h, in_slice, kernel_d, out_row,
          [&](int64_t i0, const RunningMax<kArgmax>& best, int64_t n) {
            if constexpr (kStream) {
              values.append(best.value, n);
            } else {
              store_lanes(out + r * out_row + i0, best.value, n);
            }
            // ordinary stores: streamed 16-byte pieces measured slower
            if constexpr (kArgmax) store_argmax(argmax + r * out_row + i0, best.argmax, n);
          });
      if (index_rows != nullptr) index_rows->convert(r);
      if (++oh == out_h) {
        oh = 0;
        ++slab;
        slice = in + first_slice() * in_slice;
      }
    }
    if (index_rows != nullptr) index_rows->publish();
    if constexpr (kStream) {
      values.finish();
      stream_fence();
    }
  });
}

// Streaming as a template argument in the tiled rows (here and in backward):
// as a run-time flag it cost their short rows up to a tenth of their time.
template <typename T, bool kArgmax, int kC, int kW = 2>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  const int64_t outputs = planes * a.g.out_d * a.g.out_h * a.g.out_w * kC;
  worth_streaming(static_cast<T*>(a.values), outputs)
      ? forward_tiled_rows<T, kArgmax, kC, kW, true>(a, planes)
      : forward_tiled_rows<T, kArgmax, kC, kW, false>(a, planes);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
