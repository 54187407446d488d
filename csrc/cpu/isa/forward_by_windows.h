// NCHW forward of wide windows: global pooling (classification heads, whose
// window is the whole plane) and adaptive windows, few to a row, which the
// row paths cannot fill vectors with. Each window is reduced along its rows:
// the max in vectors (NaN propagating), then, for the argmax (or a zero,
// whose sign is the first tap's), the first tap equal to it, or the last NaN
// where there is one: max_pool2d_forward_elem's rule, found by vector compares.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>

#include <cmath>
#include <limits>

#include "forward_kernels.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// NCHW windows of this many taps or more that no row path covers take
// forward_by_windows (adaptive ones whatever their size).
constexpr int64_t kWideWindow = 16;

// The lanes of n elements from p, -inf past n.
template <typename T>
C10_ALWAYS_INLINE Vec load_or_lowest(const T* p, int64_t n) {
  const Vec v = load_float(p, n);
  return n >= kLanes ? v : Vec::set(Vec(-std::numeric_limits<float>::infinity()), v, n);
}

// A window of an NCHW plane (or folded volume): its rows of `cols` taps.
template <typename T>
struct WindowRows {
  const T* plane;
  int64_t d0, h0, w0, slice, in_w;
  TapRange depths, rows, cols;
  int64_t kernel_h, kernel_w, dilation_d, dilation_h;

  const T* row(int64_t kd, int64_t kh) const {
    return plane + (d0 + kd * dilation_d) * slice + (h0 + kh * dilation_h) * in_w + w0;
  }
  int64_t tap(int64_t kd, int64_t kh, int64_t kw) const {
    return (kd * kernel_h + kh) * kernel_w + kw;
  }

  // f(v) for each vector of the window's rows, its lanes past the row -inf
  template <typename F>
  C10_ALWAYS_INLINE void for_each_vector(F&& f) const {
    for (int64_t kd = depths.begin; kd < depths.end; ++kd) {
      for (int64_t kh = rows.begin; kh < rows.end; ++kh) {
        const T* p = row(kd, kh);
        for (int64_t kw = cols.begin; kw < cols.end; kw += kLanes) {
          f(load_or_lowest(p + kw, cols.end - kw));
        }
      }
    }
  }

  // The window's max, NaN where it holds one; of +0 and -0 either is the max
  // (the value stored is the tap's own, found by first_equal).
  float max() const {
#if defined(CPU_CAPABILITY_AVX512)
    // Plain maxima, the NaN lanes kept apart: NaN-propagating maxima put a
    // compare and a blend on the dependency chain of every step, the
    // horizontal ones too, which small adaptive windows (a pyramid level's
    // 4x4) wait on.
    __m512 best = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __mmask16 nan = 0;
    for_each_vector([&](const Vec& v) {
      best = _mm512_max_ps(best, v);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    });
    return nan != 0 ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(best);
#else
    Vec best(-std::numeric_limits<float>::infinity());
    for_each_vector([&](const Vec& v) { best = at::vec::maximum(best, v); });
    return at::vec::vec_reduce_all<float>(
        [](const Vec& x, const Vec& y) { return at::vec::maximum(x, y); }, best);
#endif
  }

  // The first tap holding `m` (which the window holds), in row-major order.
  Tap<int64_t> first_equal(float m) const {
    const Vec target(m);
    if (cols.end - cols.begin <= kLanes) {
      // A vector a row: four rows' hits at once, 16 bits each, so that the
      // row holding m costs no mispredicted exit per row (small adaptive
      // windows, where it is any row of the window).
      const int64_t n = cols.end - cols.begin;
      const uint64_t lanes = (uint64_t{1} << n) - 1;
      for (int64_t kd = depths.begin; kd < depths.end; ++kd) {
        for (int64_t kh = rows.begin; kh < rows.end; kh += 4) {
          uint64_t hits = 0;
          for (int64_t j = std::min<int64_t>(4, rows.end - kh) - 1; j >= 0; --j) {
            const uint64_t row_hits = ~static_cast<uint64_t>(
                (load_float(row(kd, kh + j) + cols.begin, n) == target).zero_mask());
            hits = hits << 16 | (row_hits & lanes);
          }
          if (hits != 0) {
            const int at = __builtin_ctzll(hits);
            return {kd, kh + at / 16, cols.begin + at % 16};
          }
        }
      }
    }
    for (int64_t kd = depths.begin; kd < depths.end; ++kd) {
      for (int64_t kh = rows.begin; kh < rows.end; ++kh) {
        const T* p = row(kd, kh);
        for (int64_t kw = cols.begin; kw < cols.end; kw += kLanes) {
          const int64_t n = std::min(kLanes, cols.end - kw);
          // lanes unequal to m (and those past n) are zero in the compare
          const int hits = ~(load_float(p + kw, n) == target).zero_mask() &
                           static_cast<int>((int64_t{1} << n) - 1);
          if (hits != 0) return {kd, kh, kw + __builtin_ctz(hits)};
        }
      }
    }
    return {depths.begin, rows.begin, cols.begin};  // unreachable: m is in the window
  }

  // The last tap holding a NaN (which the window holds).
  Tap<int64_t> last_nan() const {
    for (int64_t kd = depths.end - 1; kd >= depths.begin; --kd) {
      for (int64_t kh = rows.end - 1; kh >= rows.begin; --kh) {
        const T* p = row(kd, kh);
        const int64_t span = cols.end - cols.begin;
        for (int64_t kw = cols.begin + (span - 1) / kLanes * kLanes; kw >= cols.begin;
             kw -= kLanes) {
          const int64_t n = std::min(kLanes, cols.end - kw);
          const int nans = ~load_float(p + kw, n).isnan().zero_mask() &
                           static_cast<int>((int64_t{1} << n) - 1);
          if (nans != 0) return {kd, kh, kw + 31 - __builtin_clz(nans)};
        }
      }
    }
    return {depths.begin, rows.begin, cols.begin};  // unreachable: NaN is in the window
  }
};

template <typename T, bool kArgmax>
void forward_by_windows(const FastForwardArgs& a) {
  const Pool2dGeometry g = a.g;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const int64_t rows = a.out_l.numel() / g.out_w, slice = g.in_h * g.in_w;
  const AxisT<int64_t> depth = g.axis_d(), height = g.axis_h(), width = g.axis_w();
  at::parallel_for(0, rows, grain_for(g.out_w * g.window_size()), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t oh = r % g.out_h, slab = r / g.out_h, od = slab % g.out_d;
      WindowRows<T> w{in + slab / g.out_d * g.in_d * slice, depth.start(od), height.start(oh),
                      0, slice, g.in_w, {0, 1}, {}, {}, g.kernel_h, g.kernel_w, g.dilation_d,
                      g.dilation_h};
      if (!g.planar()) w.depths = depth.taps(od, w.d0);
      w.rows = height.taps(oh, w.h0);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        w.w0 = width.start(ow);
        w.cols = width.taps(ow, w.w0);
        const int64_t o = r * g.out_w + ow;
        if (w.depths.begin >= w.depths.end || w.rows.begin >= w.rows.end ||
            w.cols.begin >= w.cols.end) {  // a window in the padding alone
          out[o] = static_cast<T>(-std::numeric_limits<float>::infinity());
          if (kArgmax) argmax[o] = static_cast<uint8_t>(w.tap(w.depths.begin, w.rows.begin,
                                                              w.cols.begin));
          continue;
        }
        const float m = w.max();
        if (!kArgmax && m != 0.f && !std::isnan(m)) {
          out[o] = static_cast<T>(m);
          continue;
        }
        // the tap found by its position, not its number divided (a NaN's
        // too, whose bits are then the last NaN's, as torch's rule gives)
        const Tap<int64_t> k = std::isnan(m) ? w.last_nan() : w.first_equal(m);
        out[o] = *(w.row(k.kd, k.kh) + k.kw);
        if (kArgmax) argmax[o] = static_cast<uint8_t>(w.tap(k.kd, k.kh, k.kw));
      }
      if (kArgmax && a.index_rows != nullptr) a.index_rows->convert(r);
    }
    if (kArgmax && a.index_rows != nullptr) a.index_rows->publish();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
