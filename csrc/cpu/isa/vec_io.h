// Loads and stores of float, bfloat16 and half through float vectors; `n`
// limits the lanes touched. The argmax lanes are in argmax_lanes.h.
#pragma once

#include <ATen/cpu/vec/vec.h>
#include <c10/util/bit_cast.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "partial_lanes.h"
#include "scalar_16bit.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kLanes = Vec::size();
// Whether this is a build of the vector ISAs' intrinsics (AVX2, AVX-512).
constexpr bool kVectorBuild =
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
    true;
#else
    false;
#endif

// kLanes 16-bit elements fill half of an at::vec vector of them, whose
// partial loads and stores go through a buffer (a memcpy per vector). They
// move as 256-bit (AVX-512, masked when partial) or full 128-bit (AVX2) lanes
// instead; the bits are the same: widening is exact, narrowing is at::vec's.
#if defined(CPU_CAPABILITY_AVX512)
template <typename T>
inline Vec widen_16bit(__m256i h) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_cvtph_ps(h);
  }
}
#elif defined(CPU_CAPABILITY_AVX2)
template <typename T>
inline Vec widen_16bit(__m128i h) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_cvtph_ps(h);
  }
}
#endif

template <typename T>
C10_ALWAYS_INLINE Vec load_float(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
#if defined(CPU_CAPABILITY_AVX2)
    return n >= kLanes ? Vec::loadu(p) : Vec(_mm256_maskload_ps(p, lane_mask_epi32(n)));
#else
    return n >= kLanes ? Vec::loadu(p) : Vec::loadu(p, n);
#endif
  } else {
#if defined(CPU_CAPABILITY_AVX512)
    return widen_16bit<T>(n >= kLanes ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                      : _mm256_maskz_loadu_epi16(lane_mask(n), p));
#elif defined(CPU_CAPABILITY_AVX2)
    return widen_16bit<T>(n >= kLanes ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                                      : load_16bit_partial(p, n));
#else
    return at::vec::convert<float>(at::vec::Vectorized<T>::loadu(p, std::min(n, kLanes)));
#endif
  }
}

// Bytes p[0, n) widened to int32 lanes (n <= lanes; the others 0).
C10_ALWAYS_INLINE at::vec::Vectorized<int32_t> bytes_as_int32(const uint8_t* p, int64_t n) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  return at::vec::convert_to_int32<uint8_t>(p, static_cast<int>(n));
#else
  using IVec = at::vec::Vectorized<int32_t>;
  alignas(64) int32_t lanes[IVec::size()] = {};
  std::copy(p, p + n, lanes);
  return IVec::loadu(lanes);
#endif
}

// Input rows are read in streams several KB long; asking for the line some
// way ahead keeps more misses in flight than the hardware prefetcher does.
constexpr int64_t kPrefetchBytes = 2048;

template <typename T>
inline void prefetch_ahead(const T* p) {
  __builtin_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes);
}

// The same for each cache line of a read of `bytes` from p, not only the
// first: the hardware prefetcher alone leaves the others to miss; `lead`
// bytes ahead.
template <typename T>
inline void prefetch_ahead(const T* p, int64_t bytes, int64_t lead = kPrefetchBytes) {
  const char* first = reinterpret_cast<const char*>(p) + lead;
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(first + at);
}

// An input this small is likely in the caches already, where prefetches
// only take load slots.
template <typename T>
inline bool worth_prefetching(int64_t input_elements) {
  return input_elements * static_cast<int64_t>(sizeof(T)) >= (int64_t{1} << 20);
}

#if defined(CPU_CAPABILITY_AVX512)
// v in T's 16-bit lanes. kExact: every lane is a T value widened (a max of
// inputs, a routed gradient, zero, a rounded sum), so narrowing keeps the
// upper half of each bfloat16 lane, NaN bits included: one permute instead of
// at::vec's rounding sequence.
template <typename T, bool kExact>
inline __m256i narrow_16bit(const Vec& v) {
  if constexpr (kExact && std::is_same_v<T, c10::BFloat16>) {
    // one permute gathers the upper halves (vpmovdw takes two uops)
    const __m512i upper_halves = _mm512_set_epi16(
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
        31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi16(upper_halves, _mm512_castps_si512(v)));
  } else {
    return _mm512_castsi512_si256(at::vec::convert<T>(v));
  }
}
#elif defined(CPU_CAPABILITY_AVX2)
// As for AVX-512; the upper halves are packed (exact: each is below 2^16)
// and the two 64-bit halves that hold them brought together.
template <typename T, bool kExact>
inline __m128i narrow_16bit(const Vec& v) {
  if constexpr (kExact && std::is_same_v<T, c10::BFloat16>) {
    const __m256i upper = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    return _mm256_castsi256_si128(
        _mm256_permute4x64_epi64(_mm256_packus_epi32(upper, upper), 0b1000));
  } else {
    return _mm256_castsi256_si128(at::vec::convert<T>(v));
  }
}
#endif

template <typename T, bool kExact = false>
inline void store_float(T* p, const Vec& v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
#if defined(CPU_CAPABILITY_AVX2)
    n >= kLanes ? v.store(p) : store_first_floats(p, v, n);
#else
    v.store(p, std::min(n, kLanes));
#endif
  } else {
#if defined(CPU_CAPABILITY_AVX512)
    const __m256i lanes = narrow_16bit<T, kExact>(v);
    if (n >= kLanes) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), lanes);
    } else {
      _mm256_mask_storeu_epi16(p, lane_mask(n), lanes);
    }
#elif defined(CPU_CAPABILITY_AVX2)
    const __m128i lanes = narrow_16bit<T, kExact>(v);
    if (n >= kLanes) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), lanes);
    } else {
      store_first_16bit(p, lanes, n);
    }
#else
    at::vec::convert<T>(v).store(p, std::min(n, kLanes));
#endif
  }
}

// v rounded to T's precision (to nearest, ties to even), as a store to T
// and a load back would round it: torch adds into a 16-bit gradient. For
// bfloat16 the rounding is integer arithmetic on the bits; NaN lanes stay
// NaN (a sum of widened bfloat16 values is NaN only as one of them or as the
// default NaN, with no low bits to carry).
template <typename T>
inline Vec round_to(const Vec& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
    using Int = at::vec::Vectorized<int32_t>;
    const Int u = at::vec::cast<int32_t>(v);
    const Int lsb = (u >> Int(16)) & Int(1);
    return at::vec::cast<float>((u + lsb + Int(0x7FFF)) & Int(static_cast<int32_t>(0xFFFF0000u)));
  } else {
    return at::vec::convert<float>(at::vec::convert<T>(v));
  }
}

// 2 * kLanes consecutive elements (fewer if n says so) split into the even
// and the odd ones. bfloat16 needs no shuffle: each 32-bit lane of one load
// holds an (even, odd) pair, and a bfloat16 widens to float by taking the
// high half of a lane, so a shift and a mask split the pairs (AVX2: whole
// loads only, as it has no masked 16-bit load).
template <typename T>
inline std::pair<Vec, Vec> load_even_odd(const T* p, int64_t n) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const __mmask32 first_n = static_cast<__mmask32>((uint64_t{1} << n) - 1);
    const __m512i pairs =
        n >= 2 * kLanes ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(first_n, p);
    return {_mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16)),
            _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(int32_t(0xFFFF0000))))};
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (n >= 2 * kLanes) {
      const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      return {_mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)),
              _mm256_castsi256_ps(
                  _mm256_and_si256(pairs, _mm256_set1_epi32(int32_t(0xFFFF0000))))};
    }
  }
#endif
  const Vec lo = load_float(p, std::min(n, kLanes));
  const Vec hi = n > kLanes ? load_float(p + kLanes, n - kLanes) : Vec(0.f);
  return at::vec::deinterleave2(lo, hi);
}

// Whether load_even_odd splits T's pairs without a shuffle.
template <typename T>
constexpr bool kSplitsPairsByShift =
#if defined(CPU_CAPABILITY_AVX512)
    std::is_same_v<T, c10::BFloat16>;
#else
    false;
#endif

// Pixels of kC channels (kC in {1, 2}) alternately sent to two vectors: the
// block form of deinterleave2, a pair of floats moving as one double (a bit
// reinterpretation, so NaN payloads survive).
template <int kC>
inline std::pair<Vec, Vec> deinterleave_pixels(const Vec& lo, const Vec& hi) {
  static_assert(kC == 1 || kC == 2);
  if constexpr (kC == 1) {
    return at::vec::deinterleave2(lo, hi);
  } else {
    const auto [a, b] =
        at::vec::deinterleave2(at::vec::cast<double>(lo), at::vec::cast<double>(hi));
    return {at::vec::cast<float>(a), at::vec::cast<float>(b)};
  }
}

template <int kC>
inline std::pair<Vec, Vec> interleave_pixels(const Vec& even, const Vec& odd) {
  static_assert(kC == 1 || kC == 2);
  if constexpr (kC == 1) {
    return at::vec::interleave2(even, odd);
  } else {
    const auto [a, b] =
        at::vec::interleave2(at::vec::cast<double>(even), at::vec::cast<double>(odd));
    return {at::vec::cast<float>(a), at::vec::cast<float>(b)};
  }
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
