// The taps that the tiled rows' routing (tiled_rows.h) compares with.
#pragma once

#include <cstdint>
#include <vector>

#include "../fast_paths.h"
#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// The taps of an output row: the argmax, or for unpool by torch's int64
// indices the tap each index names in its window, found when a task first
// routes the row. Where an index lies outside its
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

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
