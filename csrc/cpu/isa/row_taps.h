// The taps that the tiled rows' routing (tiled_rows.h) compares with.
#pragma once

#include <cstdint>
#include <cstring>
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
      // without branches: whether an index lies in one row of its window or
      // another is data, which a branch would mispredict. Unsigned, so that
      // any index wraps as the vector lanes do, with no signed overflow.
      const auto convert1 = [&](int64_t e, int64_t start) {
        const uint64_t d = static_cast<uint64_t>(idx[e]) - static_cast<uint64_t>(start);
        uint8_t tap = 0;
        bool hit = false;
        for (int64_t kh = 0; kh < kernel_h_; ++kh) {
          const uint64_t kw = d - static_cast<uint64_t>(kh * in_w_);
          const bool here = kw < static_cast<uint64_t>(kernel_w_);
          tap = here ? static_cast<uint8_t>(kh * kernel_w_ + kw) : tap;
          hit |= here;
        }
        taps[e] = tap;
        return hit;
      };
      int64_t e = 0;
#if defined(CPU_CAPABILITY_AVX2)
      // 4 at a time where whole vectors share a pattern of window starts
      const auto convert4 = [&](int64_t at, __m256i start) {
        const __m256i d = _mm256_sub_epi64(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + at)), start);
        const __m256i width = _mm256_set1_epi64x(kernel_w_), none = _mm256_set1_epi64x(-1);
        __m256i tap = _mm256_setzero_si256(), hit = _mm256_setzero_si256();
        for (int64_t kh = 0; kh < kernel_h_; ++kh) {
          const __m256i kw = _mm256_sub_epi64(d, _mm256_set1_epi64x(kh * in_w_));
          const __m256i here =
              _mm256_and_si256(_mm256_cmpgt_epi64(kw, none), _mm256_cmpgt_epi64(width, kw));
          tap = _mm256_blendv_epi8(
              tap, _mm256_add_epi64(kw, _mm256_set1_epi64x(kh * kernel_w_)), here);
          hit = _mm256_or_si256(hit, here);
        }
        // the low byte of each lane, 2 per 128-bit half
        const __m256i low = _mm256_shuffle_epi8(
            tap, _mm256_setr_epi8(0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                  0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
        const uint16_t pairs[2] = {
            static_cast<uint16_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(low))),
            static_cast<uint16_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(low, 1)))};
        std::memcpy(taps + at, pairs, 4);
        inside &= _mm256_movemask_epi8(hit) == -1;
      };
      if (kC == 0 && channels_ % 4 == 0) {
        for (int64_t start = first; e < n; start += kernel_w_) {
          const __m256i start4 = _mm256_set1_epi64x(start);
          for (const int64_t end = e + channels_; e < end; e += 4) convert4(e, start4);
        }
      } else if (kC != 0) {
        const int64_t w = kernel_w_;
        const __m256i pixel = kC == 1 ? _mm256_setr_epi64x(0, w, 2 * w, 3 * w)
                                      : _mm256_setr_epi64x(0, 0, w, w);
        for (; e + 4 <= n; e += 4) {
          convert4(e, _mm256_add_epi64(pixel, _mm256_set1_epi64x(first + kernel_w_ * e / kC)));
        }
      }
#endif
      // the rest
      if constexpr (kC != 0) {
        for (; e < n; ++e) inside &= convert1(e, first + kernel_w_ * (e / kC));
      } else {
        for (int64_t start = first + kernel_w_ * (e / channels_); e < n; start += kernel_w_) {
          for (const int64_t end = e + channels_; e < end; ++e) inside &= convert1(e, start);
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
