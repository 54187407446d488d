#include "index_rows.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "argmax_check.h"
#include "fast_paths.h"
#ifdef POOLX_HAS_TARGET_AVX512
#include <immintrin.h>
#endif
#include "tap_table.h"

namespace poolx {
namespace {

using isa_none::TapTable;

// idx[i] = base + pos[i] + tap_offset[a[i]]; returns the largest a[i].
uint8_t index_run(const uint8_t* a, int64_t* idx, int64_t n, int64_t base, const int64_t* pos,
                  const int64_t* tap_offset) {
  uint8_t most = 0;
  for (int64_t i = 0; i < n; ++i) {
    idx[i] = base + pos[i] + tap_offset[a[i]];
    most = std::max(most, a[i]);
  }
  return most;
}

#ifdef POOLX_HAS_TARGET_AVX512
// The indices of 16 outputs, base + p + the table's offset of each tap in
// `taps`, into *lo and *hi; returns the lane-wise max of `most` and `taps`.
POOLX_TARGET_AVX512 inline __m128i index_group(__m128i taps, __m512i p_lo, __m512i p_hi,
                                               __m512i base8, __m512i table, __m128i most,
                                               __m512i* lo, __m512i* hi) {
  const __m512i offset = _mm512_permutexvar_epi32(_mm512_cvtepu8_epi32(taps), table);
  *lo = _mm512_add_epi64(_mm512_add_epi64(base8, p_lo),
                         _mm512_cvtepi32_epi64(_mm512_castsi512_si256(offset)));
  *hi = _mm512_add_epi64(_mm512_add_epi64(base8, p_hi),
                         _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(offset, 1)));
  return _mm_max_epu8(most, taps);
}

// The same on AVX-512 for windows of up to 16 taps whose offsets fit in
// int32: 16 argmax bytes at a time (the last ones masked), their offsets by
// one permute of the table (which wraps taps past 15: the largest value read
// tells the caller).
// Whole groups store unmasked: a masked store, even with every lane set, is
// far slower on some cores (AMD Zen 4), and the index stores are most of
// this loop's work.
// Whole groups at 64-byte boundaries go by streaming stores where `stream`:
// the indices are 8 bytes per output, the largest tensor a forward writes,
// and an ordinary store first reads each line it fills.
POOLX_TARGET_AVX512 uint8_t index_run_avx512(
    const uint8_t* a, int64_t* idx, int64_t n, int64_t base, const int64_t* pos,
    const int32_t* table16, bool stream) {
  const __m512i table = _mm512_loadu_si512(table16);
  const __m512i base8 = _mm512_set1_epi64(base);
  __m128i most = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i idx_lo, idx_hi;
    most = index_group(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)),
                       _mm512_loadu_si512(pos + i), _mm512_loadu_si512(pos + i + 8), base8,
                       table, most, &idx_lo, &idx_hi);
    if (stream && reinterpret_cast<uintptr_t>(idx + i) % 64 == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(idx + i), idx_lo);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(idx + i + 8), idx_hi);
    } else {
      _mm512_storeu_si512(idx + i, idx_lo);
      _mm512_storeu_si512(idx + i + 8, idx_hi);
    }
  }
  if (i < n) {
    const __mmask16 in = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __mmask8 lo = static_cast<__mmask8>(in), hi = static_cast<__mmask8>(in >> 8);
    __m512i idx_lo, idx_hi;
    most = index_group(_mm_maskz_loadu_epi8(in, a + i), _mm512_maskz_loadu_epi64(lo, pos + i),
                       _mm512_maskz_loadu_epi64(hi, pos + i + 8), base8, table, most, &idx_lo,
                       &idx_hi);
    _mm512_mask_storeu_epi64(idx + i, lo, idx_lo);
    _mm512_mask_storeu_epi64(idx + i + 8, hi, idx_hi);
  }
  // the largest of the 16 per-lane maxima
  most = _mm_max_epu8(most, _mm_srli_si128(most, 8));
  most = _mm_max_epu8(most, _mm_srli_si128(most, 4));
  most = _mm_max_epu8(most, _mm_srli_si128(most, 2));
  most = _mm_max_epu8(most, _mm_srli_si128(most, 1));
  return static_cast<uint8_t>(_mm_cvtsi128_si32(most));
}

// The same on AVX2: 8 argmax bytes at a time, their offsets by a permute of
// each half of the 16-entry table (a permute reads 8 entries), taps past 7
// taking the second; the last ones (fewer than 8) by the lookup.
// With kSteps, windows of any taps: each offset by TapOffsets' arithmetic
// from `table` = IndexRows::tap_steps_.
template <bool kSteps>
POOLX_TARGET_AVX2 uint8_t index_run_avx2(const uint8_t* a, int64_t* idx, int64_t n,
                                         int64_t base, const int64_t* pos, const int32_t* table,
                                         const int64_t* tap_offset, bool stream) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i table_lo =
      kSteps ? zero : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table));
  const __m256i table_hi =
      kSteps ? zero : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table + 8));
  const __m256i seven = _mm256_set1_epi32(7);
  const __m256i row_mul = kSteps ? _mm256_set1_epi32(table[0]) : zero;
  const __m256i slice_mul = kSteps ? _mm256_set1_epi32(table[1]) : zero;
  const __m256i col_step = kSteps ? _mm256_set1_epi32(table[2]) : zero;
  const __m256i row_step = kSteps ? _mm256_set1_epi32(table[3]) : zero;
  const __m256i slice_step = kSteps ? _mm256_set1_epi32(table[4]) : zero;
  const __m256i base4 = _mm256_set1_epi64x(base);
  __m128i most = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i));
    most = _mm_max_epu8(most, bytes);
    const __m256i taps = _mm256_cvtepu8_epi32(bytes);
    __m256i offset;
    if constexpr (kSteps) {
      const __m256i row = _mm256_srli_epi32(_mm256_mullo_epi32(taps, row_mul), 16);
      const __m256i slice = _mm256_srli_epi32(_mm256_mullo_epi32(taps, slice_mul), 16);
      offset = _mm256_add_epi32(
          _mm256_add_epi32(_mm256_mullo_epi32(taps, col_step),
                           _mm256_mullo_epi32(row, row_step)),
          _mm256_mullo_epi32(slice, slice_step));
    } else {
      offset = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(table_lo, taps),
                                  _mm256_permutevar8x32_epi32(table_hi, taps),
                                  _mm256_cmpgt_epi32(taps, seven));
    }
    const __m256i at_lo = _mm256_add_epi64(
        base4, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos + i)));
    const __m256i at_hi = _mm256_add_epi64(
        base4, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos + i + 4)));
    const __m256i idx_lo =
        _mm256_add_epi64(at_lo, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(offset)));
    const __m256i idx_hi =
        _mm256_add_epi64(at_hi, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(offset, 1)));
    __m256i* out = reinterpret_cast<__m256i*>(idx + i);
    if (stream && reinterpret_cast<uintptr_t>(out) % 64 == 0) {  // one whole line
      _mm256_stream_si256(out, idx_lo);
      _mm256_stream_si256(out + 1, idx_hi);
    } else {
      _mm256_storeu_si256(out, idx_lo);
      _mm256_storeu_si256(out + 1, idx_hi);
    }
  }
  most = _mm_max_epu8(most, _mm_srli_si128(most, 4));
  most = _mm_max_epu8(most, _mm_srli_si128(most, 2));
  most = _mm_max_epu8(most, _mm_srli_si128(most, 1));
  const uint8_t rest = index_run(a + i, idx + i, n - i, base, pos + i, tap_offset);
  return std::max(static_cast<uint8_t>(_mm_cvtsi128_si32(most)), rest);
}
#endif

}  // namespace

bool IndexRows::applies(const Pool2dGeometry& g, bool channels_last) {
  // Adaptive windows go a pixel at a time, so rows of whole pixels (C wide)
  // alone fill the vectors.
  if (g.adaptive()) return channels_last;
  // Only a dilated window that padding shifts can miss a small input with
  // every tap; such windows need the element kernels' clamped index. (The
  // rule's tables, which find whether any does, are of planes.)
  const bool none_shifted = (g.dilation_d == 1 || g.pad_d == 0) &&
                            (g.dilation_h == 1 || g.pad_h == 0) &&
                            (g.dilation_w == 1 || g.pad_w == 0);
  return none_shifted || (g.planar() && !isa_none::ArgmaxRule(g).any_empty());
}

// A row of W pixels of C channels (C = 1 in NCHW) goes in runs of whole
// pixels, each element's window start taken from a pattern of positions that
// every run shares, so that few channels still fill whole vectors. Adaptive
// windows, whose starts do not step, go in runs of one pixel.
IndexRows::IndexRows(const uint8_t* argmax, int64_t* indices, const Layout4d& l,
                     const Pool2dGeometry& g)
    : argmax_(argmax), indices_(indices), out_h_(l.h), out_w_(l.w),
      channels_(l.channels_last ? l.c : 1) {
  row_len_ = out_w_ * channels_;
  rows_ = row_len_ > 0 ? l.numel() / row_len_ : 0;
  // the plane's element where each window row (od * out_h + oh) and column starts
  for (int64_t od = 0; od < g.out_d; ++od) {
    for (int64_t oh = 0; oh < g.out_h; ++oh) {
      row_start_.push_back((g.axis_d().start(od) * g.in_h + g.axis_h().start(oh)) * g.in_w);
    }
  }
  for (int64_t ow = 0; ow < out_w_; ++ow) column_start_.push_back(g.axis_w().start(ow));
  const int64_t stride_w = g.adaptive() ? 0 : g.stride_w;
  run_pixels_ = g.adaptive() ? 1 : std::min(out_w_, std::max<int64_t>(1, 1024 / channels_));
  pos_.resize(run_pixels_ * channels_);
  for (int64_t p = 0; p < run_pixels_; ++p) {  // (a division per element showed in small calls)
    std::fill_n(pos_.begin() + p * channels_, channels_, p * stride_w);
  }
  // Streaming stores serve whole aligned groups of 16; where rows are made of
  // those alone, no ordinary store writes between them (rows with a partial
  // group, such as vgg-128's 56-wide NCHW rows, measured slower streamed).
  stream_ = rows_ * row_len_ * static_cast<int64_t>(sizeof(int64_t)) >= stream_min_bytes() &&
            row_len_ % 16 == 0 && reinterpret_cast<uintptr_t>(indices) % 64 == 0;
  const TapTable taps(g);
  std::copy(taps.offset, taps.offset + 256, tap_offset_);
  // Vectors find the offsets on AVX-512 or AVX2 (which ATEN_CPU_CAPABILITY
  // steers, as for the fast paths) where they fit int32: windows of up to 16
  // taps by a permute of table16_, wider ones by TapOffsets' arithmetic.
  const int64_t num_taps = g.window_size();
  fits16_ = num_taps <= 16 && std::all_of(tap_offset_, tap_offset_ + num_taps, [](int64_t o) {
              return o <= std::numeric_limits<int32_t>::max();
            });
  if (fits16_) std::copy(tap_offset_, tap_offset_ + num_taps, table16_);
  consecutive_ = true;
  for (int64_t t = 0; t < num_taps; ++t) consecutive_ = consecutive_ && tap_offset_[t] == t;
  offsets_ = !fits16_ ? (num_taps > 16 && cpu_has_avx2() && steps_serve(g) ? Offsets::kAvx2Steps
                                                                           : Offsets::kTable)
             : cpu_has_avx512() ? Offsets::kAvx512Permute
             : cpu_has_avx2()   ? Offsets::kAvx2Permute
                                : Offsets::kTable;
}

// Whether TapOffsets' int32 arithmetic gives every tap of g's windows its
// table offset (past the taps, any wrapped value is only a wrong index,
// which the caller's check of the largest value catches); fills tap_steps_.
bool IndexRows::steps_serve(const Pool2dGeometry& g) {
  const isa_none::TapOffsets t = isa_none::TapOffsets::of(g, 1);
  const int64_t steps[5] = {t.row_mul, t.slice_mul, t.col_step, t.row_step, t.slice_step};
  const auto in_int32 = [](int64_t v) {
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  };
  for (int64_t tap = 0; tap < g.window_size(); ++tap) {
    const int64_t row = (tap * steps[0]) >> 16, slice = (tap * steps[1]) >> 16;
    const int64_t terms[3] = {tap * steps[2], row * steps[3], slice * steps[4]};
    if (!in_int32(terms[0]) || !in_int32(terms[1]) || !in_int32(terms[2]) ||
        !in_int32(terms[0] + terms[1]) || !in_int32(tap_offset_[tap]) ||
        terms[0] + terms[1] + terms[2] != tap_offset_[tap]) {
      return false;
    }
  }
  std::copy(steps, steps + 5, tap_steps_);
  return true;
}

void IndexRows::publish() const {
#ifdef POOLX_HAS_TARGET_AVX512
  if (stream_) _mm_sfence();
#endif
}

uint8_t IndexRows::convert(int64_t r, int64_t ow_begin, int64_t ow_end) const {
  const uint8_t* a = argmax_ + r * row_len_;
  int64_t* idx = indices_ + r * row_len_;
  const int64_t row_base = row_start_[r % out_h_];  // window row od * out_h + oh
  uint8_t most = 0;
  for (int64_t ow = ow_begin; ow < ow_end; ow += run_pixels_) {
    const int64_t first = ow * channels_, n = std::min(run_pixels_, ow_end - ow) * channels_;
    const int64_t base = row_base + column_start_[ow];
#ifdef POOLX_HAS_TARGET_AVX512
    if (offsets_ == Offsets::kAvx512Permute) {
      most = std::max(most, index_run_avx512(a + first, idx + first, n, base, pos_.data(),
                                             table16_, stream_));
      continue;
    }
    if (offsets_ == Offsets::kAvx2Permute) {
      most = std::max(most, index_run_avx2<false>(a + first, idx + first, n, base, pos_.data(),
                                                  table16_, tap_offset_, stream_));
      continue;
    }
    if (offsets_ == Offsets::kAvx2Steps) {
      most = std::max(most, index_run_avx2<true>(a + first, idx + first, n, base, pos_.data(),
                                                 tap_steps_, tap_offset_, stream_));
      continue;
    }
#endif
    most = std::max(most, index_run(a + first, idx + first, n, base, pos_.data(), tap_offset_));
  }
  return most;
}

}  // namespace poolx
