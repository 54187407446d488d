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
// windows of the same sizes), and the kernel stops at once. kC: the channels
// of a pixel, or 0 for channels_last with any number.
template <int kC>
class RowTaps {
 public:
  RowTaps(const FastBackwardArgs& a)
      : argmax_(a.argmax), indices_(a.indices), in_w_(a.g.in_w), kernel_h_(a.g.kernel_h),
        kernel_w_(a.g.kernel_w), channels_(kC ? kC : a.in_l.c),
        taps_(a.indices ? a.g.out_w * channels_ : 0) {}

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
    // 8 indices at a time, whose windows start at `start`: kh rows down, kw
    // across
    const auto convert8 = [&](int64_t e, __m512i start, __mmask8 in) {
      prefetch_ahead(idx + e);
      const __m512i d = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(in, idx + e), start);
      __m512i tap = _mm512_setzero_si512();
      __mmask8 hit = 0;
      for (int64_t kh = 0; kh < kernel_h_; ++kh) {
        const __m512i kw = _mm512_sub_epi64(d, _mm512_set1_epi64(kh * in_w_));
        const __mmask8 here = _mm512_cmplt_epu64_mask(kw, _mm512_set1_epi64(kernel_w_));
        tap = _mm512_mask_add_epi64(tap, here, kw, _mm512_set1_epi64(kh * kernel_w_));
        hit |= here;
      }
      _mm512_mask_cvtepi64_storeu_epi8(taps + e, in, tap);
      inside &= (hit & in) == in;
    };
    if (kC == 0 && channels_ % 8 == 0) {
      // whole vectors of one pixel's channels
      for (int64_t e = 0, start = first; e < n; start += kernel_w_) {
        const __m512i start8 = _mm512_set1_epi64(start);
        for (const int64_t end = e + channels_; e < end; e += 8) convert8(e, start8, 0xff);
      }
    } else if (kC != 0) {
      const int64_t w = kernel_w_;
      const __m512i pixel = kC == 1 ? _mm512_set_epi64(7 * w, 6 * w, 5 * w, 4 * w, 3 * w, 2 * w, w, 0)
                                    : _mm512_set_epi64(3 * w, 3 * w, 2 * w, 2 * w, w, w, 0, 0);
      for (int64_t e = 0; e < n; e += 8) {
        const __mmask8 in = n - e >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - e)) - 1);
        convert8(e, _mm512_add_epi64(pixel, _mm512_set1_epi64(first + kernel_w_ * e / kC)), in);
      }
    } else
#endif
    {
      for (int64_t e = 0, start = first; e < n; start += kernel_w_) {
        for (const int64_t end = e + channels_; e < end; ++e) {
          const int64_t d = idx[e] - start;
          bool hit = false;
          for (int64_t kh = 0; kh < kernel_h_; ++kh) {
            const int64_t kw = d - kh * in_w_;
            if (kw >= 0 && kw < kernel_w_) {
              taps[e] = static_cast<uint8_t>(kh * kernel_w_ + kw);
              hit = true;
            }
          }
          inside &= hit;
        }
      }
    }
    converted_ = o_row;
    return inside;
  }

  const uint8_t* argmax_;
  const int64_t* indices_;
  int64_t in_w_, kernel_h_, kernel_w_, channels_;
  std::vector<uint8_t> taps_;
  int64_t converted_ = -1;
};

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
