// torch's int64 indices written straight from a forward's argmax lanes
// (return_indices in channels_last): the argmax is never read back, and the
// index stores follow the values' instead of a conversion pass of their own.
#pragma once

#include <cstdint>

#include "../index_rows.h"
#include "argmax_lanes.h"
#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// p[i] = start + table[argmax lane i] for the first n lanes (n <= kLanes):
// the lanes' windows start at `start` (one pixel's, in channels_last), and
// `table` holds the offsets of up to 16 taps (IndexRows::tap_offsets16), or
// is null where tap t lies t elements into the window (1-D windows without
// dilation), whose offsets need no lookup.
// Whole vectors at a cache line go by streaming stores where `stream`.
// Always inlined: a call would keep the caller's running maxima in memory.
C10_ALWAYS_INLINE void store_indices(int64_t* p, Vec argmax, int64_t start, const int32_t* table,
                                     int64_t n, bool stream) {
  const bool line = stream && n >= kLanes && reinterpret_cast<uintptr_t>(p) % 64 == 0;
#if defined(CPU_CAPABILITY_AVX512)
  const __m512i taps = _mm512_cvttps_epi32(argmax);
  const __m512i offset =
      table == nullptr ? taps : _mm512_permutexvar_epi32(taps, _mm512_loadu_si512(table));
  const __m512i first = _mm512_set1_epi64(start);
  const __m512i lo = _mm512_add_epi64(first, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(offset)));
  const __m512i hi =
      _mm512_add_epi64(first, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(offset, 1)));
  if (line) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), lo);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p + 8), hi);
  } else if (n >= kLanes) {  // whole: a masked store is slower even with every lane set
    _mm512_storeu_si512(p, lo);
    _mm512_storeu_si512(p + 8, hi);
  } else {
    const __mmask16 in = lane_mask(n);
    _mm512_mask_storeu_epi64(p, static_cast<__mmask8>(in), lo);
    _mm512_mask_storeu_epi64(p + 8, static_cast<__mmask8>(in >> 8), hi);
  }
#elif defined(CPU_CAPABILITY_AVX2)
  // a permute reads 8 entries: taps past 7 take the table's second half
  const __m256i taps = _mm256_cvttps_epi32(argmax);
  const __m256i offset = table == nullptr ? taps : _mm256_blendv_epi8(
      _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(table)),
                                  taps),
      _mm256_permutevar8x32_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table + 8)), taps),
      _mm256_cmpgt_epi32(taps, _mm256_set1_epi32(7)));
  const __m256i first = _mm256_set1_epi64x(start);
  const __m256i lo =
      _mm256_add_epi64(first, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(offset)));
  const __m256i hi =
      _mm256_add_epi64(first, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(offset, 1)));
  __m256i* out = reinterpret_cast<__m256i*>(p);
  if (line) {
    _mm256_stream_si256(out, lo);
    _mm256_stream_si256(out + 1, hi);
  } else if (n >= kLanes) {
    _mm256_storeu_si256(out, lo);
    _mm256_storeu_si256(out + 1, hi);
  } else {
    const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3), count = _mm256_set1_epi64x(n);
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(p), _mm256_cmpgt_epi64(count, lane), lo);
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(p + 4),
                           _mm256_cmpgt_epi64(count, _mm256_add_epi64(lane, _mm256_set1_epi64x(4))),
                           hi);
  }
#else
  (void)line;
  float taps[kLanes];
  argmax.store(taps);
  for (int64_t i = 0; i < n; ++i) {
    const auto tap = static_cast<int64_t>(taps[i]);
    p[i] = start + (table == nullptr ? tap : table[tap]);
  }
#endif
}

// A forward's index writes from its argmax lanes, for IndexRows whose windows
// have up to 16 taps that fit int32 (false otherwise: rows are converted).
struct IndexLanes {
  int64_t* indices = nullptr;
  const int32_t* table = nullptr;  // null: consecutive taps
  bool stream = false;

  IndexLanes() = default;
  explicit IndexLanes(const IndexRows* rows) {
    if (rows != nullptr && rows->tap_offsets16() != nullptr) {
      indices = rows->indices();
      table = rows->consecutive_taps() ? nullptr : rows->tap_offsets16();
      stream = rows->streams();
    }
  }
  explicit operator bool() const { return indices != nullptr; }
  // indices [at, at + n) of windows whose first tap is at `start`
  C10_ALWAYS_INLINE void store(int64_t at, Vec argmax, int64_t start, int64_t n) const {
    store_indices(indices + at, argmax, start, table, n, stream);
  }
};

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
