// Checks of an argmax that a user hands in. Every CPU kernel that takes an
// argmax checks it before use, or as it reads it (a row at a time, while the
// row is in cache), so no hostile value reaches a tap table or an unchecked
// window. Valid: poolx::argmax_is_valid.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(CPU_CAPABILITY_AVX512)
#include <immintrin.h>
#endif

#include "poolx/elements.h"
#include "isa_namespace.h"
#include "poolx/layout.h"


namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// Whether every value of a[0, n) is below `taps`: the whole check for a
// window inside the input. A plain max, which the compiler vectorizes; with
// AVX-512, masked loads, as the rows of a tiled pooling are short.
template <typename argmax_t>
inline bool all_below(const argmax_t* a, int64_t n, int64_t taps) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (sizeof(argmax_t) == 1) {
    if (taps > 255) return true;
    __m512i most = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 64) {
      const __mmask64 in = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
      most = _mm512_max_epu8(most, _mm512_maskz_loadu_epi8(in, a + i));
    }
    return _mm512_cmpge_epu8_mask(most, _mm512_set1_epi8(static_cast<char>(taps))) == 0;
  }
#endif
  using U = std::make_unsigned_t<argmax_t>;  // a negative int32 compares as huge
  U most = 0;
  for (int64_t i = 0; i < n; ++i) most = std::max(most, static_cast<U>(a[i]));
  return static_cast<uint64_t>(most) < static_cast<uint64_t>(taps);
}

// Which values each window accepts (poolx::argmax_is_valid), checked a run
// of values at a time without a division: the taps of a window that lie
// inside the input form a rectangle of rows x columns (per-axis tables), and
// a uint8 value's (kh, kw) comes by a multiply and a shift, which vectorize.
class ArgmaxRule {
 public:
  explicit ArgmaxRule(const Pool2dGeometry& g)
      : g_(g), taps_(g.kernel_h * g.kernel_w),
        // v / kernel_w == (v * div_mul_) >> 16 for v < 256, kernel_w <= 256
        div_mul_(static_cast<uint32_t>((65536 + g.kernel_w - 1) / g.kernel_w)),
        interior_cols_(
            interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w)),
        rows_(g.out_h), cols_(g.out_w) {
    for (int64_t o = 0; o < g.out_h; ++o) {
      rows_[o] = window_taps(o * g.stride_h - g.pad_h, g.kernel_h, g.dilation_h, g.in_h);
    }
    for (int64_t o = 0; o < g.out_w; ++o) {
      cols_[o] = window_taps(o * g.stride_w - g.pad_w, g.kernel_w, g.dilation_w, g.in_w);
      if (o < interior_cols_.begin || o >= interior_cols_.end) edge_cols_.push_back(o);
    }
  }

  // Whether the windows of row oh reach past the input only at edge_cols().
  bool whole_row(int64_t oh) const { return whole_row(rows_[oh]); }
  bool whole_col(int64_t ow) const {
    return ow >= interior_cols_.begin && ow < interior_cols_.end;
  }
  // The columns of windows that lie wholly inside the input along W.
  TapRange interior_cols() const { return interior_cols_; }
  // The columns of windows that reach past the input along W.
  const std::vector<int64_t>& edge_cols() const { return edge_cols_; }
  // Whether one value of window (oh, ow) is valid.
  template <typename argmax_t>
  bool one_valid(argmax_t value, int64_t oh, int64_t ow) const {
    return one_in_rect(value, rows_[oh], cols_[ow]);
  }

  // (v * tap_row_mul()) >> 16 is a uint8 value v's tap row, v / kernel_w,
  // by a multiply that vectorizes.
  uint32_t tap_row_mul() const { return div_mul_; }

  // The first tap row of window row oh that lies inside the input.
  int64_t first_row_tap(int64_t oh) const { return rows_[oh].begin; }
  static bool empty(TapRange r) { return r.begin >= r.end; }
  bool row_empty(int64_t oh) const { return empty(rows_[oh]); }
  bool col_empty(int64_t ow) const { return empty(cols_[ow]); }
  // Whether some window has no tap inside the input (dilation and padding
  // shifting a window past a small input): in a row of windows, or anywhere.
  bool any_row_empty() const { return std::any_of(rows_.begin(), rows_.end(), empty); }
  bool any_empty() const {
    return any_row_empty() || std::any_of(cols_.begin(), cols_.end(), empty);
  }

  // Whether every window lies wholly inside the input (tiled pooling): then
  // value < taps is the whole check.
  bool all_whole() const {
    return interior_cols_.begin == 0 && interior_cols_.end == g_.out_w &&
           std::all_of(rows_.begin(), rows_.end(), [&](TapRange r) { return whole_row(r); });
  }

  // Whether the values of windows [ow_begin, ow_end) of output row oh are
  // valid, `channels` consecutive values a window (channels_last; 1 for NCHW).
  // below_taps: the caller has checked value < taps for all of them, which
  // is the whole check for a window wholly inside the input.
  template <typename argmax_t>
  bool windows_valid(const argmax_t* a, int64_t oh, int64_t ow_begin, int64_t ow_end,
                     int64_t channels, bool below_taps = false) const {
    const TapRange rows = rows_[oh];
    const int64_t b = std::clamp(interior_cols_.begin, ow_begin, ow_end);
    const int64_t e = std::clamp(interior_cols_.end, b, ow_end);
    const auto edge = [&](int64_t ow) {
      const argmax_t* w = a + (ow - ow_begin) * channels;
      return channels == 1 ? one_in_rect(*w, rows, cols_[ow]) : in_rect(w, channels, rows, cols_[ow]);
    };
    // inside the input the rectangle is the whole kernel: value < taps, a
    // byte-wide max where the values are bytes
    const argmax_t* inside = a + (b - ow_begin) * channels;
    bool ok = whole_row(rows)
                  ? below_taps || all_below(inside, (e - b) * channels, taps_)
                  : in_rect(inside, (e - b) * channels, rows, {0, g_.kernel_w});
    for (int64_t ow = ow_begin; ow < b && ok; ++ow) ok = edge(ow);
    for (int64_t ow = e; ow < ow_end && ok; ++ow) ok = edge(ow);
    return ok;
  }

  // Whether output row oh is valid.
  template <typename argmax_t>
  bool row_valid(const argmax_t* a, int64_t channels, int64_t oh) const {
    return windows_valid(a, oh, 0, g_.out_w, channels);
  }

  // Whether rows [oh, oh + nchw_check_rows()) of an NCHW plane (or fewer, at
  // its end) are valid, their values from `a`: value < taps for all of them
  // in one pass (the whole check inside the input), then the windows that
  // reach past the input. NCHW rows are short (tens of windows): checked one
  // by one, the calls took a fifth of a small backward's time (perf).
  template <typename argmax_t>
  bool nchw_rows_valid(const argmax_t* a, int64_t oh) const {
    const int64_t end = std::min(g_.out_h, oh + nchw_check_rows());
    if (!all_below(a, (end - oh) * g_.out_w, taps_)) return false;
    bool ok = true;
    for (; oh < end; ++oh, a += g_.out_w) {
      if (!whole_row(rows_[oh])) {
        ok &= windows_valid(a, oh, 0, g_.out_w, 1, /*below_taps=*/true);
        continue;
      }
      for (const int64_t ow : edge_cols_) ok &= one_in_rect(a[ow], rows_[oh], cols_[ow]);
    }
    return ok;
  }

  // The NCHW rows that nchw_rows_valid checks together: about 4096 values.
  int64_t nchw_check_rows() const { return std::max<int64_t>(1, 4096 / g_.out_w); }

 private:
  bool whole_row(TapRange rows) const { return rows.begin == 0 && rows.end == g_.kernel_h; }

  // in_rect for one value, without a loop to set up (NCHW's edge windows)
  template <typename argmax_t>
  bool one_in_rect(argmax_t value, TapRange rows, TapRange cols) const {
    const int64_t v = value;
    if (v < 0 || v >= taps_) return false;
    if (rows.begin >= rows.end || cols.begin >= cols.end) return true;  // an empty window
    const int64_t kh = sizeof(argmax_t) == 1 ? (v * div_mul_) >> 16 : v / g_.kernel_w;
    const int64_t kw = v - kh * g_.kernel_w;
    return kh >= rows.begin && kh < rows.end && kw >= cols.begin && kw < cols.end;
  }

  // Whether a[0, n) lie in the taps rows x cols of their window.
  template <typename argmax_t>
  bool in_rect(const argmax_t* a, int64_t n, TapRange rows, TapRange cols) const {
    if (rows.begin >= rows.end || cols.begin >= cols.end) return all_below(a, n, taps_);  // empty
    if (rows.begin == 0 && rows.end == g_.kernel_h && cols.begin == 0 && cols.end == g_.kernel_w) {
      return all_below(a, n, taps_);  // the whole window
    }
    if constexpr (sizeof(argmax_t) > 1) {
      bool ok = true;
      for (int64_t i = 0; i < n; ++i) ok &= one_in_rect(a[i], rows, cols);
      return ok;
    } else {
      // unsigned: kh - begin >= count also where kh < begin; past the taps,
      // kh >= kernel_h >= rows.end
      const uint32_t rb = rows.begin, rn = rows.end - rows.begin;
      const uint32_t cb = cols.begin, cn = cols.end - cols.begin;
      const uint32_t kw_n = g_.kernel_w, mul = div_mul_;
      uint32_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t v = a[i], kh = (v * mul) >> 16, kw = v - kh * kw_n;
        bad |= static_cast<uint32_t>(kh - rb >= rn) | static_cast<uint32_t>(kw - cb >= cn);
      }
      return bad == 0;
    }
  }

  Pool2dGeometry g_;
  int64_t taps_;
  uint32_t div_mul_;
  TapRange interior_cols_;
  std::vector<TapRange> rows_, cols_;
  std::vector<int64_t> edge_cols_;
};

}  // namespace POOLX_ISA_NAMESPACE

// Whether every value of a 4-D argmax (layout `l`, uint8_t or int32_t) is
// valid: a parallel pass of ArgmaxRule::row_valid.
bool argmax_valid(const void* argmax, bool int32, const Layout4d& l, const Pool2dGeometry& g);

// Memory offset of the first invalid value, or -1: for the error message.
int64_t first_invalid_argmax(const void* argmax, bool int32, const Layout4d& l,
                             const Pool2dGeometry& g);

}  // namespace poolx
