// Scalar bfloat16 and float16 rounding, for sums that torch adds into the
// 16-bit type one gradient at a time: each add rounds to nearest even, as
// c10's conversion does, kept in XMM registers where c10's own code is slow.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/bit_cast.h>

#include <cstdint>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

#if defined(__SSE2__)
// Lane 0 of f rounded so, in the vector register it lives in: no trip
// through a GPR.
inline __m128 round_lane_to_bfloat16(__m128 f) {
  const __m128i u = _mm_castps_si128(f);
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
  const __m128i biased = _mm_add_epi32(_mm_add_epi32(u, lsb), _mm_set1_epi32(0x7FFF));
  const __m128i upper = _mm_set1_epi32(static_cast<int>(0xFFFF0000u));
  return _mm_castsi128_ps(_mm_and_si128(biased, upper));
}
#endif

inline float round_to_bfloat16(float f) {
#if defined(__SSE2__)
  return _mm_cvtss_f32(round_lane_to_bfloat16(_mm_set_ss(f)));
#else
  const uint32_t u = c10::bit_cast<uint32_t>(f);
  return c10::bit_cast<float>((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
#endif
}

// *sum = round_to_bfloat16(*sum + grad), the sum loaded into a register
// whose other lanes the load clears: round_to_bfloat16 of a float already
// in a register spends an instruction on clearing them.
inline void add_rounded_to_bfloat16(float* sum, float grad) {
#if defined(__SSE2__)
  _mm_store_ss(sum, round_lane_to_bfloat16(_mm_add_ss(_mm_load_ss(sum), _mm_set_ss(grad))));
#else
  *sum = round_to_bfloat16(*sum + grad);
#endif
}

// *sum = float(Half(*sum + grad)), rounded to nearest even as c10's
// conversion rounds it (with F16C, by the same instruction), kept in one
// register: c10's scalar conversion, compiled for AVX-512, widens through
// 512-bit registers and a general-purpose one on every add.
inline void add_rounded_to_half(float* sum, float grad) {
#if defined(__F16C__)
  const __m128 added = _mm_add_ss(_mm_load_ss(sum), _mm_set_ss(grad));
  _mm_store_ss(sum, _mm_cvtph_ps(_mm_cvtps_ph(added, _MM_FROUND_TO_NEAREST_INT)));
#else
  *sum = static_cast<float>(static_cast<c10::Half>(*sum + grad));
#endif
}

// h widened, and f rounded to nearest even, by one F16C instruction in an
// XMM register: c10's scalar conversions, compiled for AVX-512, go through
// 512-bit registers.
inline float widen_half(c10::Half h) {
#if defined(__F16C__)
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.x)));
#else
  return static_cast<float>(h);
#endif
}
inline c10::Half narrow_half(float f) {
#if defined(__F16C__)
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT);
  return c10::Half(static_cast<uint16_t>(_mm_extract_epi16(h, 0)), c10::Half::from_bits());
#else
  return static_cast<c10::Half>(f);
#endif
}

// f as a T, rounded to nearest even as c10's conversion rounds it; for
// bfloat16 without its NaN branch (a NaN stays NaN).
template <typename T>
inline T narrow(float f) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const uint32_t bits = c10::bit_cast<uint32_t>(round_to_bfloat16(f));
    return c10::BFloat16(static_cast<uint16_t>(bits >> 16), c10::BFloat16::from_bits());
  } else {
    return static_cast<T>(f);
  }
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
