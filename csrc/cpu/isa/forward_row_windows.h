// The forward with argmax in channels_last of windows along one row (1-D
// pooling, 2-D windows 1 x k) of 2 to 4 taps, padded or not, on AVX2: a
// pass of forward_channels_last takes sixteen vectors of channels over a
// window, whose running maxima and argmaxes do not fit AVX2's sixteen
// registers and go through the stack with its general loops' state. Here a
// window's taps are a few pixels one after another, and four vectors of
// channels at a time keep their maxima in registers.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "../fast_paths.h"
#include "../index_rows.h"
#include "argmax_lanes.h"
#include "index_lanes.h"
#include "stream_stores.h"
#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Windows 1 x 2 to 1 x 4 along rows of pixels of whole vectors, each with a
// tap inside the input (padding and ceil_mode cut only edge windows, whose
// first tap inside starts the max). AVX2 builds only: AVX-512's 32 registers
// hold the general kernel's passes.
inline bool pools_row_windows(const Pool2dGeometry& g, int64_t C) {
#if defined(CPU_CAPABILITY_AVX2)
  return g.planar() && !g.adaptive() && g.kernel_h == 1 && g.pad_h == 0 &&
         g.dilation_w == 1 && g.kernel_w >= 2 && g.kernel_w <= 4 && C % kLanes == 0 &&
         g.pad_w < g.kernel_w && (g.out_w - 1) * g.stride_w - g.pad_w < g.in_w;
#else
  (void)g, (void)C;
  return false;
#endif
}

// Values and argmax (and return_indices' indices) where pools_row_windows.
template <typename T>
void forward_row_windows(const FastForwardArgs& a) {
  // Four vectors: values and argmaxes in eight registers, and stores in runs
  // of whole lines.
  constexpr int64_t kGroup = 4;
  constexpr int64_t kVectorBytes = kLanes * static_cast<int64_t>(sizeof(T));
  const Pool2dGeometry g = a.g;  // locals: the stores could alias `a`
  const int64_t C = a.in_l.c, rows = a.out_l.n * a.out_l.h;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = a.index_rows;
  const IndexLanes direct(index_rows);
  const IndexRows* const converts = direct ? nullptr : index_rows;
  const bool stream = worth_streaming(out, a.out_l.numel(), argmax);
  const bool stream_argmax = stream && converts == nullptr;
  // Each tap is prefetched where it will be two windows later: without
  // prefetches, inputs past the caches ran slower than the general kernel.
  const bool prefetch = worth_prefetching<T>(a.in_l.numel());
  const int64_t lead =
      std::max(kPrefetchBytes, 2 * g.stride_w * C * static_cast<int64_t>(sizeof(T)));
  const int64_t grain = std::max<int64_t>(1, 16384 / (g.out_w * C * g.kernel_w));
  at::parallel_for(0, rows, grain, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* const row = in + ((r / g.out_h) * g.in_h + (r % g.out_h) * g.stride_h) * g.in_w * C;
      const int64_t row_start = direct ? index_rows->row_start(r) : 0;
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        // taps [begin, end) of the window lie in the input; p: its first one
        const int64_t w0 = ow * g.stride_w - g.pad_w;
        const TapRange taps = g.axis_w().taps(ow, w0);
        const T* const p = row + (w0 + taps.begin) * C;
        const int64_t o = (r * g.out_w + ow) * C;
        const int64_t first_index = direct ? row_start + index_rows->column_start(ow) : 0;
        // kCount vectors of channels from c
        const auto pool = [&](int64_t c, auto count) {
          constexpr int64_t kCount = decltype(count)::value;
          if (prefetch) {
            for (int64_t t = 0; t < taps.end - taps.begin; ++t) {
              prefetch_ahead(p + t * C + c, kCount * kVectorBytes, lead);
            }
          }
          auto best = running_maxima<true>(0, std::make_index_sequence<kCount>{});
          #pragma GCC unroll 16  // whole loops: best[j] stays in registers
          for (int64_t j = 0; j < kCount; ++j) {
            best[j] = RunningMax<true>(load_float(p + c + j * kLanes, kLanes), taps.begin);
          }
          for (int64_t t = 1; t < taps.end - taps.begin; ++t) {
            #pragma GCC unroll 16
            for (int64_t j = 0; j < kCount; ++j) {
              best[j].update(load_float(p + t * C + c + j * kLanes, kLanes), taps.begin + t);
            }
          }
          // each output's stores together, so that streaming ones fill whole lines
          #pragma GCC unroll 16
          for (int64_t j = 0; j < kCount; ++j) {
            store_lanes(out + o + c + j * kLanes, best[j].value, kLanes, stream);
          }
          #pragma GCC unroll 16
          for (int64_t j = 0; j < kCount; ++j) {
            store_argmax_lanes(argmax + o + c + j * kLanes, best[j].argmax, kLanes,
                               stream_argmax);
          }
          if (direct) {
            #pragma GCC unroll 16
            for (int64_t j = 0; j < kCount; ++j) {
              direct.store(o + c + j * kLanes, best[j].argmax, first_index, kLanes);
            }
          }
        };
        int64_t c = 0;
        for (; c + kGroup * kLanes <= C; c += kGroup * kLanes) {
          pool(c, std::integral_constant<int64_t, kGroup>{});
        }
        for (; c < C; c += kLanes) pool(c, std::integral_constant<int64_t, 1>{});
      }
      if (converts != nullptr) converts->convert(r);
    }
    if (index_rows != nullptr) index_rows->publish();
    if (stream) stream_fence();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
