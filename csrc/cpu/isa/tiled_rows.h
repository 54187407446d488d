// Windows kernel_h x 2 that tile rows of pixels of kC interleaved elements:
// NCHW (kC = 1, the rows of every plane) and channels_last with 1 or 2
// channels (the W * C rows of every image), where vectors along C would fill
// 1 or 2 lanes. An output row of out_w * kC elements reads 2 * out_w * kC
// input elements per window row, whose even and odd pixels are taps kw = 0
// and 1. Loops step (plane, row) instead of dividing per row: rows are short.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "forward_kernels.h"
#include "route_16bit.h"
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

// One output row of out_row elements from the kernel_h window rows at
// `window` (in_row apart), handed to store(i0, best, n) a vector at a time.
// Full vectors and the row's tail are separate calls of `vector_at`, so full
// ones load unmasked.
template <bool kArgmax, int kC, typename T, typename Store>
inline void forward_tiled_row(const T* window, int64_t in_row, int64_t kernel_h,
                              int64_t out_row, Store&& store) {
  const auto vector_at = [&](int64_t i0, int64_t n) {
    const auto [left, right] = load_pixel_pairs<kC>(window + 2 * i0, n);
    RunningMax<kArgmax> best(left, 0);
    best.update(right, 1);
    for (int64_t kh = 1; kh < kernel_h; ++kh) {
      const auto [l, r] = load_pixel_pairs<kC>(window + kh * in_row + 2 * i0, n);
      best.update(l, kh * 2);
      best.update(r, kh * 2 + 1);
    }
    store(i0, best, n);
  };
  int64_t i0 = 0;
  for (; i0 + kLanes <= out_row; i0 += kLanes) vector_at(i0, kLanes);
  if (i0 < out_row) vector_at(i0, out_row - i0);
}

// Values (and argmax) of `planes` planes. Streamed values (large outputs) go
// through a StreamAppender, tasks starting at whole vectors.
template <typename T, bool kArgmax, int kC, bool kStream>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  // Sizes as locals (see forward_channels_last): stores could alias `a`.
  const int64_t out_h = a.g.out_h, kernel_h = a.g.kernel_h, in_h = a.g.in_h;
  const int64_t in_row = a.g.in_w * kC, out_row = a.g.out_w * kC, rows = planes * out_h;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = kArgmax ? a.index_rows : nullptr;
  const int64_t unit = kStream ? rows_per_aligned_start(out_row, kLanes) : 1;
  const int64_t grain = std::max<int64_t>(1, grain_for(out_row * kernel_h * 2) / unit);
  at::parallel_for(0, ceil_div_nonneg(rows, unit), grain, [=](int64_t b, int64_t e) {
    const int64_t first = b * unit, last = std::min(rows, e * unit);
    StreamAppender<ValueLanes<T>> values(out + first * out_row);
    int64_t plane = first / out_h, oh = first % out_h;
    for (int64_t r = first; r < last; ++r) {
      const T* window = in + (plane * in_h + oh * kernel_h) * in_row;
      forward_tiled_row<kArgmax, kC>(
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
template <typename T, bool kArgmax, int kC>
void forward_tiled_rows(const FastForwardArgs& a, int64_t planes) {
  const int64_t outputs = planes * a.g.out_h * a.g.out_w * kC;
  worth_streaming(static_cast<T*>(a.values), outputs)
      ? forward_tiled_rows<T, kArgmax, kC, true>(a, planes)
      : forward_tiled_rows<T, kArgmax, kC, false>(a, planes);
}

// n <= kLanes outputs of kC-channel pixels routed to their 2 * n inputs in
// kernel row kh (even pixels tap 2 * kh, odd ones 2 * kh + 1), as the first
// 2 * n lanes of two float vectors; route_16bit.h has the 16-bit-lane twin.
template <typename T, int kC, bool kCopy>
inline std::pair<Vec, Vec> routed_pixel_pairs(const T* grad, const uint8_t* argmax, int64_t n,
                                              int64_t kh, SeenArgmax& seen) {
  const Vec g = load_float(grad, n);
  const Vec am = load_argmax(argmax, n);
  seen.add(am);
  return interleave_pixels<kC>(select_grad<kCopy>(g, am, kh * 2),
                               select_grad<kCopy>(g, am, kh * 2 + 1));
}

// The taps that the routing below compares with: the argmax, or for unpool
// by torch's int64 indices the tap each index names in its window, found
// when a task first routes the output row. Where an index lies outside its
// window, row() returns null: the windows were a wrong guess (overlapping
// windows of the same sizes), and the kernel stops at once.
template <int kC>
class RowTaps {
 public:
  RowTaps(const FastBackwardArgs& a)
      : argmax_(a.argmax), indices_(a.indices), in_w_(a.g.in_w), kernel_h_(a.g.kernel_h),
        taps_(a.indices ? a.g.out_w * kC : 0) {}

  const uint8_t* row(int64_t o_row, int64_t oh) {
    if (indices_ == nullptr) return argmax_ + o_row;
    if (o_row != converted_ && !convert(o_row, oh)) return nullptr;
    return taps_.data();
  }

 private:
  // false where an index lies outside its window
  bool convert(int64_t o_row, int64_t oh) {
    const int64_t* idx = indices_ + o_row;
    uint8_t* taps = taps_.data();
    const int64_t n = static_cast<int64_t>(taps_.size()), first = oh * kernel_h_ * in_w_;
    bool inside = true;
#if defined(CPU_CAPABILITY_AVX512)
    // 8 indices at a time, from each window's first tap: kh rows down, kw across
    const __m512i pixel = kC == 1 ? _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0)
                                  : _mm512_set_epi64(6, 6, 4, 4, 2, 2, 0, 0);
    for (int64_t e = 0; e < n; e += 8) {
      const __mmask8 in = n - e >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - e)) - 1);
      const __m512i start = _mm512_add_epi64(pixel, _mm512_set1_epi64(first + 2 * e / kC));
      prefetch_ahead(idx + e);
      const __m512i d = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(in, idx + e), start);
      __m512i tap = _mm512_setzero_si512();
      __mmask8 hit = 0;
      for (int64_t kh = 0; kh < kernel_h_; ++kh) {
        const __m512i kw = _mm512_sub_epi64(d, _mm512_set1_epi64(kh * in_w_));
        const __mmask8 here = _mm512_cmple_epu64_mask(kw, _mm512_set1_epi64(1));
        tap = _mm512_mask_add_epi64(tap, here, kw, _mm512_set1_epi64(2 * kh));
        hit |= here;
      }
      _mm512_mask_cvtepi64_storeu_epi8(taps + e, in, tap);
      inside &= (hit & in) == in;
    }
#else
    for (int64_t e = 0; e < n; ++e) {
      const int64_t d = idx[e] - (first + 2 * (e / kC));
      bool hit = false;
      for (int64_t kh = 0; kh < kernel_h_; ++kh) {
        const int64_t kw = d - kh * in_w_;
        if (kw == 0 || kw == 1) {
          taps[e] = static_cast<uint8_t>(2 * kh + kw);
          hit = true;
        }
      }
      inside &= hit;
    }
#endif
    converted_ = o_row;
    return inside;
  }

  const uint8_t* argmax_;
  const int64_t* indices_;
  int64_t in_w_, kernel_h_;
  std::vector<uint8_t> taps_;
  int64_t converted_ = -1;
};

// Each input row is written once, from one output row (zeros where floor
// mode dropped rows or columns). torch's backward narrows per element, in
// both layouts. Streamed, grad_input goes through a StreamAppender, tasks
// starting at whole vectors.
template <typename T, int kC, bool kCopy, bool kStream>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  constexpr bool k16Bit = kRoutesIn16BitLanes<T>;
  using Lanes = std::conditional_t<k16Bit, Bits16Lanes<T>, ValueLanes<T>>;
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
    for (int64_t r = first; r < last; ++r) {
      T* gi_row = gi + r * in_row;
      const auto zeros = [&](int64_t i, int64_t n) {
        if constexpr (kStream) {
          streamed.append_zeros(n);
        } else {
          fill_zero(gi_row + i, n);
        }
      };
      if (oh >= out_h) {
        zeros(0, in_row);
      } else {
        const int64_t o_row = (plane * out_h + oh) * out_row;
        const uint8_t* am = taps.row(o_row, oh);
        if (am == nullptr || (a.indices && a.argmax_invalid->load(std::memory_order_relaxed))) {
          a.argmax_invalid->store(true, std::memory_order_relaxed);
          break;
        }
        // full vectors and the tail as separate calls: full ones unmasked
        const auto route = [&](int64_t i0, int64_t n) {
          if constexpr (k16Bit) {
            const auto v = routed_pixel_pairs_16bit<T, kC, kCopy>(go + o_row + i0, am + i0, n,
                                                                  kh, seen);
            if constexpr (kStream) {
              streamed.append(v, 2 * n);
            } else {
              store_16bit(gi_row + 2 * i0, v, 2 * n);
            }
          } else {
            const auto [lo, hi] =
                routed_pixel_pairs<T, kC, kCopy>(go + o_row + i0, am + i0, n, kh, seen);
            const int64_t n_lo = std::min(2 * n, kLanes), n_hi = 2 * n - n_lo;
            if constexpr (kStream) {
              streamed.append(lo, n_lo);
              if (n_hi > 0) streamed.append(hi, n_hi);
            } else {
              store_lanes(gi_row + 2 * i0, lo, n_lo);
              if (n_hi > 0) store_lanes(gi_row + 2 * i0 + kLanes, hi, n_hi);
            }
          }
        };
        int64_t i0 = 0;
        for (; i0 + kLanes <= out_row; i0 += kLanes) route(i0, kLanes);
        if (i0 < out_row) route(i0, out_row - i0);
        zeros(2 * out_row, in_row - 2 * out_row);
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
    seen.report(kernel_h * 2, a.argmax_invalid);
    if constexpr (kStream) {
      streamed.finish();
      stream_fence();
    }
  });
}

template <typename T, int kC, bool kCopy>
void backward_tiled_rows(const FastBackwardArgs& a, int64_t planes) {
  const int64_t inputs = planes * a.g.in_h * a.g.in_w * kC;
  worth_streaming(static_cast<T*>(a.grad_input), inputs)
      ? backward_tiled_rows<T, kC, kCopy, true>(a, planes)
      : backward_tiled_rows<T, kC, kCopy, false>(a, planes);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
