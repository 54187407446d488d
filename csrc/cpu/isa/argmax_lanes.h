// The uint8 argmax in float lanes beside the values, and the running max of
// a window by PyTorch's rule; `n` limits the lanes touched.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "partial_lanes.h"
#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

#if defined(CPU_CAPABILITY_AVX512)
// n argmax bytes (n <= 16) at p, zeros above.
inline __m128i load_argmax_bytes(const uint8_t* p, int64_t n) {
  return n >= kLanes ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                     : _mm_maskz_loadu_epi8(lane_mask(n), p);
}
#endif

// Argmax lanes are kept as small exact floats so they share the value masks.
// (at::vec's uint8 vectors are 64 lanes wide and load a partial vector
// through a buffer, so AVX-512 and AVX2 load the bytes directly.) Lanes past
// n read 0, a tap of every window.
C10_ALWAYS_INLINE Vec load_argmax(const uint8_t* p, int64_t n) {
#if defined(CPU_CAPABILITY_AVX512)
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(load_argmax_bytes(p, n)));
#elif defined(CPU_CAPABILITY_AVX2)
  uint64_t bytes;
  if (n >= kLanes) {
    std::memcpy(&bytes, p, sizeof(bytes));
  } else {
    bytes = load_first_bytes(p, n);
  }
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(bytes))));
#else
  // (at::vec's partial 8-bit loads fill the lanes past n with 1)
  uint8_t bytes[kLanes] = {};
  if (n < kLanes) {
    std::memcpy(bytes, p, n);
    p = bytes;
  }
  float lanes[kLanes];
  std::copy(p, p + kLanes, lanes);
  return Vec::loadu(lanes);
#endif
}

#if defined(CPU_CAPABILITY_AVX512)
// The argmax lanes as 16 bytes.
inline __m128i argmax_bytes(const Vec& argmax) {
  return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(argmax));
}

// n argmax bytes (n <= 16) at p.
inline void store_argmax_bytes(uint8_t* p, __m128i bytes, int64_t n) {
  if (n >= kLanes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), bytes);
  } else {
    _mm_mask_storeu_epi8(p, lane_mask(n), bytes);
  }
}
#endif

inline void store_argmax(uint8_t* p, const Vec& argmax, int64_t n) {
#if defined(CPU_CAPABILITY_AVX512)
  store_argmax_bytes(p, argmax_bytes(argmax), n);
#elif defined(CPU_CAPABILITY_AVX2)
  // the 8 bytes in a register, stored whole or by store_first_bytes
  const __m256i ints = _mm256_cvttps_epi32(argmax);
  const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(ints),
                                         _mm256_extracti128_si256(ints, 1));
  const auto bytes = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(words, words)));
  if (n >= kLanes) {
    std::memcpy(p, &bytes, sizeof(bytes));
  } else {
    store_first_bytes(p, bytes, n);
  }
#else
  // at::vec's partial store would copy a run-time length (a call to memcpy)
  using Bytes = at::vec::Vectorized<uint8_t>;
  __at_align__ uint8_t bytes[Bytes::size()];
  at::vec::convert<uint8_t>(argmax).store(bytes);
  if (n >= kLanes) {
    std::memcpy(p, bytes, kLanes);
  } else {
    std::memcpy(p, bytes, n);
  }
#endif
}

#if defined(CPU_CAPABILITY_AVX512)
// The lanes where candidate v takes the max from `best` by PyTorch's rule:
// greater, or NaN. In mask registers: at::vec's comparisons widen each mask
// to a vector and back.
inline __mmask16 lanes_won(const Vec& v, const Vec& best) {
  return _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}
#endif

// The running max of a window and the tap that holds it, lane by lane, with
// PyTorch's rule: a candidate wins if greater or NaN. Starting from the first
// tap equals starting from -inf: a -inf first tap keeps its bits and its tap.
template <bool kArgmax>
struct RunningMax {
  Vec value, argmax;
  explicit RunningMax(int64_t first_tap)
      : value(-std::numeric_limits<float>::infinity()), argmax(static_cast<float>(first_tap)) {}
  RunningMax(const Vec& first, int64_t first_tap)
      : value(first), argmax(static_cast<float>(first_tap)) {}
  // v at `tap`: it starts the max if First is std::true_type (the window's
  // first tap), else it updates the max.
  template <typename First>
  inline void take(const Vec& v, int64_t tap, First) {
    if constexpr (First::value) {
      *this = RunningMax(v, tap);
    } else {
      update(v, tap);
    }
  }
  inline void update(const Vec& v, int64_t tap) {
#if defined(CPU_CAPABILITY_AVX512)
    const __mmask16 wins = lanes_won(v, value);
    value = _mm512_mask_mov_ps(value, wins, v);
    if constexpr (kArgmax) {
      argmax = _mm512_mask_mov_ps(argmax, wins, _mm512_set1_ps(static_cast<float>(tap)));
    }
#else
    const Vec wins = (v > value) | v.isnan();
    value = Vec::blendv(value, v, wins);
    if constexpr (kArgmax) argmax = Vec::blendv(argmax, Vec(static_cast<float>(tap)), wins);
#endif
  }
#if defined(CPU_CAPABILITY_AVX2)
  // The rule for numbers alone (a pass whose inputs hold a NaN goes again by
  // take: kOrderedPasses): max_ps keeps the running max unless v is greater,
  // of +0 and -0 the first, as PyTorch's rule does.
  inline void take_ordered(const Vec& v, int64_t tap) {
    if constexpr (kArgmax) {
      argmax = Vec::blendv(argmax, Vec(static_cast<float>(tap)),
                           Vec(_mm256_cmp_ps(v, value, _CMP_GT_OQ)));
    }
    value = _mm256_max_ps(v, value);
  }
#endif
};

// Whether forward passes over channels_last windows take their inputs by
// take_ordered and add them into sums, going again by take where a sum is NaN
// (a NaN input, or infinities of both signs): on AVX2 PyTorch's rule costs
// five vector ops per input (two compares, an or, two blends) and bounds the
// forward; numbers alone cost a max, a compare and a blend, and the sum one add.
#if defined(CPU_CAPABILITY_AVX2)
constexpr bool kOrderedPasses = true;
inline bool holds_nan(const Vec& v) {
  return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0;
}
#else
constexpr bool kOrderedPasses = false;
#endif

// kCount running maxima of windows that start at first_tap.
template <bool kArgmax, size_t... kIndex>
inline std::array<RunningMax<kArgmax>, sizeof...(kIndex)> running_maxima(
    int64_t first_tap, std::index_sequence<kIndex...>) {
  return {((void)kIndex, RunningMax<kArgmax>(first_tap))...};
}

// grad where the argmax lanes equal `tap`, +0 elsewhere; 0 + g as torch sums
// (so a -0 gradient arrives as +0).
// With kCopy the selected value keeps its bits (unpool by argmax, or a sum
// that starts from +0 and adds it itself).
template <bool kCopy = false>
inline Vec select_grad(const Vec& grad, const Vec& argmax, int64_t tap) {
#if defined(CPU_CAPABILITY_AVX512)
  const Vec picked = _mm512_maskz_mov_ps(
      _mm512_cmp_ps_mask(argmax, _mm512_set1_ps(static_cast<float>(tap)), _CMP_EQ_OQ), grad);
#else
  const Vec picked = grad & (argmax == Vec(static_cast<float>(tap)));
#endif
  if constexpr (kCopy) {
    return picked;
  } else {
    return Vec(0.f) + picked;
  }
}

// The argmax of kLanes windows, for add_where: as bytes on AVX-512, which
// compare without widening; as float lanes elsewhere.
#if defined(CPU_CAPABILITY_AVX512)
using ArgmaxLanes = __m128i;
inline ArgmaxLanes load_argmax_lanes(const uint8_t* p, int64_t n) {
  return load_argmax_bytes(p, n);
}
#else
using ArgmaxLanes = Vec;
inline ArgmaxLanes load_argmax_lanes(const uint8_t* p, int64_t n) { return load_argmax(p, n); }
#endif

// sum + grad in the lanes whose argmax is `tap`; the other lanes keep their
// sum, as torch adds only the selected tap's gradient.
inline Vec add_where(const Vec& sum, const ArgmaxLanes& argmax, int64_t tap, const Vec& grad) {
#if defined(CPU_CAPABILITY_AVX512)
  const __mmask16 picked = _mm_cmpeq_epi8_mask(argmax, _mm_set1_epi8(static_cast<char>(tap)));
  return _mm512_mask_add_ps(sum, picked, sum, grad);
#else
  return Vec::blendv(sum, sum + grad, argmax == Vec(static_cast<float>(tap)));
#endif
}

// How many argmax lanes were a given tap, counted lane by lane (one vector
// add where the ISA has them): add() counts the first n lanes.
class TapCounts {
 public:
  void add(const ArgmaxLanes& argmax, int64_t tap, int64_t n) {
#if defined(CPU_CAPABILITY_AVX512)
    __mmask16 picked = _mm_cmpeq_epi8_mask(argmax, _mm_set1_epi8(static_cast<char>(tap)));
    if (n < kLanes) picked &= lane_mask(n);
    counts_ = _mm512_mask_add_epi32(counts_, picked, counts_, _mm512_set1_epi32(1));
#elif defined(CPU_CAPABILITY_AVX2)
    __m256i picked = _mm256_castps_si256(
        _mm256_cmp_ps(argmax, _mm256_set1_ps(static_cast<float>(tap)), _CMP_EQ_OQ));
    if (n < kLanes) picked = _mm256_and_si256(picked, lane_mask_epi32(n));
    counts_ = _mm256_sub_epi32(counts_, picked);  // a selecting lane is -1
#else
    for (int64_t i = 0; i < n; ++i) counts_ += argmax[i] == static_cast<float>(tap);
#endif
  }

  int64_t total() const {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
    alignas(64) int32_t lanes[kLanes];
    std::memcpy(lanes, &counts_, sizeof(lanes));
    int64_t sum = 0;
    for (const int32_t lane : lanes) sum += lane;
    return sum;
#else
    return counts_;
#endif
  }

 private:
#if defined(CPU_CAPABILITY_AVX512)
  __m512i counts_ = _mm512_setzero_si512();
#elif defined(CPU_CAPABILITY_AVX2)
  __m256i counts_ = _mm256_setzero_si256();
#else
  int64_t counts_ = 0;
#endif
};

// value in the lanes whose argmax is `tap`; the other lanes keep `kept`
// (unpool: a later window's selection replaces an earlier one's). A move,
// so the bits stay as they are.
inline Vec copy_where(const Vec& kept, const ArgmaxLanes& argmax, int64_t tap, const Vec& value) {
#if defined(CPU_CAPABILITY_AVX512)
  const __mmask16 picked = _mm_cmpeq_epi8_mask(argmax, _mm_set1_epi8(static_cast<char>(tap)));
  return _mm512_mask_mov_ps(kept, picked, value);
#else
  return Vec::blendv(kept, value, argmax == Vec(static_cast<float>(tap)));
#endif
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
