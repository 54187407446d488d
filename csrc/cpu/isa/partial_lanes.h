// Partial vectors (the first n lanes) moved without a buffer: masks on
// AVX-512, masked loads and stores by 4, 2 and 1 lanes on AVX2. at::vec's
// partial loads and stores copy through a buffer of run-time size (a call to
// memcpy per vector).
#pragma once

#include <ATen/cpu/vec/vec.h>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <cstring>

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

#if defined(CPU_CAPABILITY_AVX512)
// The first n (< 16) lanes.
inline __mmask16 lane_mask(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1);
}
#endif

#if defined(CPU_CAPABILITY_AVX2)
// The first n (< 8) 32-bit lanes set, for AVX2's masked loads.
inline __m256i lane_mask_epi32(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first n (< 8) 16-bit elements, zeros above: whole pairs by a
// masked 32-bit load (it touches no masked-off byte), an odd last element
// blended in.
C10_ALWAYS_INLINE __m128i load_16bit_partial(const void* p, int64_t n) {
  const __m128i pairs = _mm_maskload_epi32(static_cast<const int*>(p),
                                           _mm256_castsi256_si128(lane_mask_epi32(n / 2)));
  if (n % 2 == 0) return pairs;
  int16_t last_bits;
  std::memcpy(&last_bits, static_cast<const char*>(p) + 2 * (n - 1), sizeof(last_bits));
  const __m128i last = _mm_set1_epi16(last_bits);
  const __m128i at_last = _mm_cmpeq_epi16(_mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm_set1_epi16(static_cast<int16_t>(n - 1)));
  return _mm_blendv_epi8(pairs, last, at_last);
}

// The first n (< 8) lanes of v at p, by 4, 2 and 1: a partial store
// through at::vec copies a run-time length (a call to memcpy).
C10_ALWAYS_INLINE void store_first_floats(float* p, __m256 v, int64_t n) {
  __m128 part = _mm256_castps256_ps128(v);
  if (n & 4) {
    _mm_storeu_ps(p, part);
    part = _mm256_extractf128_ps(v, 1);
    p += 4;
  }
  if (n & 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
    part = _mm_movehl_ps(part, part);
    p += 2;
  }
  if (n & 1) _mm_store_ss(p, part);
}

// The first n (< 8) bytes at p as the low bytes of an integer, zeros above,
// and its twin, which stores the low n bytes: by 4, 2 and 1, since a memcpy
// of run-time length is a call, and bytes read back from a buffer that
// memcpy filled wait for its stores to retire.
C10_ALWAYS_INLINE uint64_t load_first_bytes(const void* p, int64_t n) {
  const auto* bytes = static_cast<const char*>(p);
  uint64_t low = 0;
  int64_t at = 0;
  for (const int64_t width : {4, 2, 1}) {
    if ((n & width) == 0) continue;
    uint32_t part = 0;
    std::memcpy(&part, bytes + at, width);
    low |= uint64_t{part} << (8 * at);
    at += width;
  }
  return low;
}

C10_ALWAYS_INLINE void store_first_bytes(void* p, uint64_t low, int64_t n) {
  auto* bytes = static_cast<char*>(p);
  for (const int64_t width : {4, 2, 1}) {
    if ((n & width) == 0) continue;
    std::memcpy(bytes, &low, width);
    bytes += width;
    low >>= 8 * width;
  }
}

// As store_first_floats, for n (< 8) 16-bit lanes.
C10_ALWAYS_INLINE void store_first_16bit(void* p, __m128i v, int64_t n) {
  auto* bytes = static_cast<char*>(p);
  if (n & 4) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(bytes), v);
    v = _mm_srli_si128(v, 8);
    bytes += 8;
  }
  store_first_bytes(bytes, static_cast<uint64_t>(_mm_cvtsi128_si64(v)), 2 * (n & 3));
}
#endif

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
