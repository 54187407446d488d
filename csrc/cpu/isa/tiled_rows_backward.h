// The backward of the tiled rows (tiled_rows.h): each input row written once,
// from the one output row whose windows cover it; unpool by argmax is the
// same routing with the values copied. Windows kW = 2 wide route pixel pairs,
// NCHW windows 4 wide (1-D pooling by 4) pixel quads.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "route_16bit.h"
#include "row_taps.h"
#include "stream_stores.h"
#include "tiled_rows.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

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

// n <= kLanes outputs of an NCHW row of windows 4 wide, loaded once and
// routed to their 4 * n inputs in each kernel row kh (taps 4 * kh to
// 4 * kh + 3): the inverse of load_pixel_quads, taps 0 and 2 interleaved into
// the even inputs, 1 and 3 into the odd ones, and those two interleaved.
template <typename T, bool kCopy>
class PixelQuadRouter {
 public:
  PixelQuadRouter(const T* grad, const uint8_t* argmax, int64_t n, SeenArgmax& seen)
      : grad_(load_float(grad, n)), argmax_(load_argmax(argmax, n)) {
    seen.add(argmax_);
  }

  std::array<Vec, 4> row(int64_t kh) const {
    const auto tap = [&](int64_t kw) { return select_grad<kCopy>(grad_, argmax_, kh * 4 + kw); };
    const auto [even_lo, even_hi] = interleave_pixels<1>(tap(0), tap(2));
    const auto [odd_lo, odd_hi] = interleave_pixels<1>(tap(1), tap(3));
    const auto [q0, q1] = interleave_pixels<1>(even_lo, odd_lo);
    const auto [q2, q3] = interleave_pixels<1>(even_hi, odd_hi);
    return {q0, q1, q2, q3};
  }

 private:
  Vec grad_, argmax_;
};

// n routed elements (a 16-bit vector, or two or four float ones) at p, or
// appended to `streamed`.
template <bool kStream, typename T, typename Routed, typename Appender>
inline void put_routed(T* p, const Routed& routed, int64_t n, Appender& streamed) {
  if constexpr (std::is_same_v<Routed, std::array<Vec, 4>>) {
    for (int64_t q = 0; q < 4 && q * kLanes < n; ++q) {
      put_routed<kStream>(p + q * kLanes, routed[q], std::min(kLanes, n - q * kLanes), streamed);
    }
  } else if constexpr (std::is_same_v<Routed, std::pair<Vec, Vec>>) {
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
template <typename T, int kC, int kW, bool kCopy, bool kStream>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  static_assert(kW == 2 || (kW == 4 && kC == 1));
  constexpr bool k16Bit = kRoutesIn16BitLanes<T> && kW == 2;
  using Lanes = std::conditional_t<k16Bit, Bits16Lanes<T>, ValueLanes<T>>;
  using Router = std::conditional_t<
      kW == 4, PixelQuadRouter<T, kCopy>,
      std::conditional_t<k16Bit, PixelPairRouter16<T, kC, kCopy>, PixelPairRouter<T, kC, kCopy>>>;
  // Sizes as locals (see forward_tiled_rows).
  const int64_t in_h = a.g.in_h, out_h = a.g.out_h, kernel_h = a.g.kernel_h;
  const int64_t in_d = a.g.in_d, out_d = a.g.out_d, kernel_d = a.g.kernel_d;
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC, rows = planes * in_d * in_h;
  const T* const go = static_cast<const T*>(a.grad_output);
  T* const gi = static_cast<T*>(a.grad_input);
  const int64_t unit = kStream ? rows_per_aligned_start(in_row, Lanes::kCount) : 1;
  const int64_t grain = std::max<int64_t>(1, grain_for(in_row) / unit);
  at::parallel_for(0, ceil_div_nonneg(rows, unit), grain, [=, &a](int64_t b, int64_t e) {
    const int64_t first = b * unit, last = std::min(rows, e * unit);
    StreamAppender<Lanes> streamed(gi + first * in_row);
    SeenArgmax seen;
    RowTaps<kC> taps(a);
    // input row ih of slice id of plane `plane`: window row kh of output
    // row oh, slice kd of output slice od
    int64_t slab = first / in_h, ih = first % in_h;
    int64_t plane = slab / in_d, id = slab % in_d;
    int64_t od = id / kernel_d, kd = id % kernel_d, oh = ih / kernel_h, kh = ih % kernel_h;
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
      if (oh >= out_h || od >= out_d) {
        zeros(gi_rows, step * in_row);
      } else {
        const int64_t o_row = ((plane * out_d + od) * out_h + oh) * out_row;
        const uint8_t* am = taps.row(o_row, oh);
        if (am == nullptr || (a.indices && a.argmax_invalid->load(std::memory_order_relaxed))) {
          a.argmax_invalid->store(true, std::memory_order_relaxed);
          break;
        }
        // full vectors and the tail as separate calls: full ones unmasked
        const auto route = [&](int64_t i0, int64_t n) {
          const Router router(go + o_row + i0, am + i0, n, seen);
          for (int64_t k = 0; k < step; ++k) {
            put_routed<kStream>(gi_rows + k * in_row + kW * i0,
                                router.row(kd * kernel_h + kh + k), kW * n, streamed);
          }
        };
        int64_t i0 = 0;
        for (; i0 + kLanes <= out_row; i0 += kLanes) route(i0, kLanes);
        if (i0 < out_row) route(i0, out_row - i0);
        for (int64_t k = 0; k < step; ++k) {
          zeros(gi_rows + k * in_row + kW * out_row, in_row - kW * out_row);
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
        if (++kd == kernel_d) {
          kd = 0;
          ++od;
        }
        if (++id == in_d) {
          id = od = kd = 0;
          ++plane;
        }
      }
    }
    seen.report(kernel_d * kernel_h * kW, a.argmax_invalid);
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

template <typename T, int kC, int kW, bool kCopy>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  const int64_t inputs = planes * a.g.in_d * a.g.in_h * a.g.in_w * kC;
  kStreamsGradientRows<T, kCopy> && worth_streaming(static_cast<T*>(a.grad_input), inputs)
      ? backward_tiled_rows<T, kC, kW, kCopy, true>(a, planes)
      : backward_tiled_rows<T, kC, kW, kCopy, false>(a, planes);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
