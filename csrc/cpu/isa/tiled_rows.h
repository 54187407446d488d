// Windows kernel_h x 2 that tile rows of pixels of kC interleaved elements:
// NCHW (kC = 1, the rows of every plane) and channels_last with 1 or 2
// channels (the W * C rows of every image), where vectors along C would fill
// 1 or 2 lanes. An output row of out_w * kC elements reads 2 * out_w * kC
// input elements per window row, whose even and odd pixels are taps kw = 0
// and 1. Loops step (plane, row) instead of dividing per row: rows are short.
// The forward also takes NCHW windows kernel_h x 4 (1-D pooling by 4, whose
// rows are long), split into taps by two even/odd splits.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "forward_kernels.h"
#include "route_16bit.h"
#include "row_taps.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Floor-mode tiling by kernel_h x 2 windows: every input element lies in at
// most one window.
inline bool tiles_rows_w2(const Pool2dGeometry& g) {
  return tiles_input(g) && g.kernel_w == 2;
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

// One output row of out_row elements from the kernel_h window rows (kW
// wide) at `window` (in_row apart), handed to store(i0, best, n) a vector at
// a time. Full vectors and the row's tail are separate calls of `vector_at`,
// so full ones load unmasked.
template <bool kArgmax, int kC, int kW, typename T, typename Store>
inline void forward_tiled_row(const T* window, int64_t in_row, int64_t kernel_h,
                              int64_t out_row, Store&& store) {
  static_assert(kW == 2 || (kW == 4 && kC == 1));
  const auto vector_at = [&](int64_t i0, int64_t n) {
    const auto taps_of_row = [&](int64_t kh) {
      const T* p = window + kh * in_row + kW * i0;
      if constexpr (kW == 2) {
        const auto [left, right] = load_pixel_pairs<kC>(p, n);
        return std::array<Vec, 2>{left, right};
      } else {
        return load_pixel_quads(p, n);
      }
    };
    const auto first = taps_of_row(0);
    RunningMax<kArgmax> best(first[0], 0);
    for (int kw = 1; kw < kW; ++kw) best.update(first[kw], kw);
    for (int64_t kh = 1; kh < kernel_h; ++kh) {
      const auto taps = taps_of_row(kh);
      for (int kw = 0; kw < kW; ++kw) best.update(taps[kw], kh * kW + kw);
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
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC, rows = planes * out_h;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = kArgmax ? a.index_rows : nullptr;
  const int64_t unit = kStream ? rows_per_aligned_start(out_row, kLanes) : 1;
  const int64_t grain = std::max<int64_t>(1, grain_for(out_row * kernel_h * kW) / unit);
  at::parallel_for(0, ceil_div_nonneg(rows, unit), grain, [=](int64_t b, int64_t e) {
    const int64_t first = b * unit, last = std::min(rows, e * unit);
    StreamAppender<ValueLanes<T>> values(out + first * out_row);
    int64_t plane = first / out_h, oh = first % out_h;
    for (int64_t r = first; r < last; ++r) {
      const T* window = in + (plane * in_h + oh * kernel_h) * in_row;
      forward_tiled_row<kArgmax, kC, kW>(
          window, in_row, kernel_h, out_row,
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
        ++plane;
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
  const int64_t outputs = planes * a.g.out_h * a.g.out_w * kC;
  worth_streaming(static_cast<T*>(a.values), outputs)
      ? forward_tiled_rows<T, kArgmax, kC, kW, true>(a, planes)
      : forward_tiled_rows<T, kArgmax, kC, kW, false>(a, planes);
}

// n <= kLanes outputs of kC-channel pixels, loaded once and routed to their
// 2 * n inputs in each kernel row kh (even pixels tap 2 * kh, odd ones
// 2 * kh + 1), as the first 2 * n lanes of two float vectors; route_16bit.h
// has the 16-bit-lane twin.
template <typename T, int kC, bool kCopy>
class PixelPairRouter {
 public:
  PixelPairRouter(const T* grad, const uint8_t* argmax, int64_t n, SeenArgmax& seen)
      : grad_(load_float(grad, n)), argmax_(load_argmax(argmax, n)) {
    seen.add(argmax_);
  }

  std::pair<Vec, Vec> row(int64_t kh) const {
    return interleave_pixels<kC>(select_grad<kCopy>(grad_, argmax_, kh * 2),
                                 select_grad<kCopy>(grad_, argmax_, kh * 2 + 1));
  }

 private:
  Vec grad_, argmax_;
};

// n routed elements (a 16-bit vector, or a pair of float ones) at p, or
// appended to `streamed`.
template <bool kStream, typename T, typename Routed, typename Appender>
inline void put_routed(T* p, const Routed& routed, int64_t n, Appender& streamed) {
  if constexpr (std::is_same_v<Routed, std::pair<Vec, Vec>>) {
    const int64_t n_lo = std::min(n, kLanes), n_hi = n - n_lo;
    put_routed<kStream>(p, routed.first, n_lo, streamed);
    if (n_hi > 0) put_routed<kStream>(p + kLanes, routed.second, n_hi, streamed);
  } else if constexpr (kStream) {
    streamed.append(routed, n);
  } else if constexpr (std::is_same_v<Routed, Vec>) {
    store_lanes(p, routed, n);
  } else {
    store_16bit(p, routed, n);
  }
}

// Each input row is written once, from one output row (zeros where floor
// mode dropped rows or columns). torch's backward narrows per element, in
// both layouts. A step takes the rows of one window row that the task holds,
// each vector of gradients and argmax loaded once for all of them; streamed,
// one row per step, so that grad_input goes through a StreamAppender in
// order, tasks starting at whole vectors.
template <typename T, int kC, bool kCopy, bool kStream>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  constexpr bool k16Bit = kRoutesIn16BitLanes<T>;
  using Lanes = std::conditional_t<k16Bit, Bits16Lanes<T>, ValueLanes<T>>;
  using Router = std::conditional_t<k16Bit, PixelPairRouter16<T, kC, kCopy>,
                                    PixelPairRouter<T, kC, kCopy>>;
  // Sizes as locals (see forward_tiled_rows).
  const int64_t in_h = a.g.in_h, out_h = a.g.out_h, kernel_h = a.g.kernel_h;
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC, rows = planes * in_h;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const int64_t unit = kStream ? rows_per_aligned_start(in_row, Lanes::kCount) : 1;
  const int64_t grain = std::max<int64_t>(1, grain_for(in_row) / unit);
  at::parallel_for(0, ceil_div_nonneg(rows, unit), grain, [=, &a](int64_t b, int64_t e) {
    const int64_t first = b * unit, last = std::min(rows, e * unit);
    StreamAppender<Lanes> streamed(gi + first * in_row);
    SeenArgmax seen;
    RowTaps<kC> taps(a);
    int64_t plane = first / in_h, ih = first % in_h;
    int64_t oh = ih / kernel_h, kh = ih % kernel_h;
    for (int64_t r = first; r < last;) {
      const auto zeros = [&](T* p, int64_t n) {
        if constexpr (kStream) {
          streamed.append_zeros(n);
        } else {
          fill_zero(p, n);
        }
      };
      const int64_t step = kStream ? 1 : std::min({kernel_h - kh, last - r, in_h - ih});
      T* gi_rows = gi + r * in_row;
      if (oh >= out_h) {
        zeros(gi_rows, step * in_row);
      } else {
        const int64_t o_row = (plane * out_h + oh) * out_row;
        const uint8_t* am = taps.row(o_row, oh);
        if (am == nullptr || (a.indices && a.argmax_invalid->load(std::memory_order_relaxed))) {
          a.argmax_invalid->store(true, std::memory_order_relaxed);
          break;
        }
        // full vectors and the tail as separate calls: full ones unmasked
        const auto route = [&](int64_t i0, int64_t n) {
          const Router router(go + o_row + i0, am + i0, n, seen);
          for (int64_t k = 0; k < step; ++k) {
            put_routed<kStream>(gi_rows + k * in_row + 2 * i0, router.row(kh + k), 2 * n,
                                streamed);
          }
        };
        int64_t i0 = 0;
        for (; i0 + kLanes <= out_row; i0 += kLanes) route(i0, kLanes);
        if (i0 < out_row) route(i0, out_row - i0);
        for (int64_t k = 0; k < step; ++k) {
          zeros(gi_rows + k * in_row + 2 * out_row, in_row - 2 * out_row);
        }
      }
      r += step;
      ih += step;
      kh += step;
      if (kh == kernel_h) {
        kh = 0;
        ++oh;
      }
      if (ih == in_h) {
        ih = oh = kh = 0;
        ++plane;
      }
    }
    seen.report(kernel_h * 2, a.argmax_invalid);
    if constexpr (kStream) {
      streamed.finish();
      stream_fence();
    }
  });
}

// On AVX2 (an AMD EPYC) a 16-bit gradient, appended to its rows in 16-byte
// vectors, measured slower streamed than stored: bfloat16 1.7-2.2x, float16
// 0.9-1.5x.
template <typename T, bool kCopy>
constexpr bool kStreamsGradientRows =
#if defined(CPU_CAPABILITY_AVX2)
    kCopy || sizeof(T) >= 4;
#else
    true;
#endif

template <typename T, int kC, bool kCopy>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  const int64_t inputs = planes * a.g.in_h * a.g.in_w * kC;
  kStreamsGradientRows<T, kCopy> && worth_streaming(static_cast<T*>(a.grad_input), inputs)
      ? backward_tiled_rows<T, kC, kCopy, true>(a, planes)
      : backward_tiled_rows<T, kC, kCopy, false>(a, planes);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
