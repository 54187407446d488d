// Non-temporal ("streaming") stores for outputs far larger than the caches:
// a line written whole need not be read first (no read-for-ownership), and
// the output does not evict the input still being read. Used only for full,
// vector-aligned vectors; anything else takes the ordinary store.
#pragma once

#include <cstdint>

#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

// Below this an output may well be read again from the caches by the next op.
constexpr int64_t kStreamMinBytes = int64_t{8} << 20;

template <typename T>
inline bool vector_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (kLanes * sizeof(T)) == 0;
}

// Streaming pays off when the output is large and its rows of `row` elements
// keep every vector aligned (then no cache line is written by both kinds of
// store); an argmax written beside it (row bytes per row) must start aligned too.
template <typename T>
inline bool worth_streaming(const T* base, int64_t row, int64_t total,
                            const uint8_t* argmax = nullptr) {
  return kCanStream && total * static_cast<int64_t>(sizeof(T)) >= kStreamMinBytes &&
         row % kLanes == 0 && vector_aligned(base) &&
         reinterpret_cast<uintptr_t>(argmax) % kLanes == 0;
}

// Issued by each thread after its last streaming store: they are weakly
// ordered, and the threads' join must publish them.
inline void stream_fence() {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  _mm_sfence();
#endif
}

// Exact narrowing, as for store_lanes.
template <bool kNanPerElement = false, typename T>
inline void stream_vector(T* p, const Vec& v) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    _mm512_stream_ps(p, v);
  } else {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), narrow_16bit<T, true, kNanPerElement>(v));
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    _mm256_stream_ps(p, v);
  } else {
    const __m256i narrow = at::vec::convert<T>(v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(narrow));
  }
#else
  store_float(p, v, kLanes);
#endif
}

// n lanes of v at p; the lanes are T values widened (pooled maxima, routed
// gradients), so they narrow exactly. kNanPerElement: bfloat16 NaNs get the
// bits of c10's scalar conversion (see store_float_per_element_nan); where
// the vector narrowing cannot set them, such rare vectors take the ordinary
// store.
template <bool kStream, bool kNanPerElement, typename T>
inline void store_lanes(T* p, const Vec& v, int64_t n) {
  if constexpr (kStream) {
    constexpr bool kCheckNan = kNanPerElement && !kExactNarrowSetsNanBits;
    if (n >= kLanes && vector_aligned(p) && !(kCheckNan && has_bf16_nan<T>(v))) {
      stream_vector<kNanPerElement>(p, v);
      return;
    }
  }
  if constexpr (kNanPerElement) {
    store_float_per_element_nan<T, true>(p, v, n);
  } else {
    store_float<T, true>(p, v, n);
  }
}

template <bool kStream>
inline void store_argmax_lanes(uint8_t* p, const Vec& argmax, int64_t n) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (kStream) {
    if (n >= kLanes && reinterpret_cast<uintptr_t>(p) % kLanes == 0) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(p),
                       _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(argmax)));
      return;
    }
  }
#endif
  store_argmax(p, argmax, n);
}

template <bool kStream, typename T>
inline void fill_zero(T* p, int64_t n) {
  int64_t i = 0;
  if constexpr (kStream) {
    if (vector_aligned(p)) {
      for (; i + kLanes <= n; i += kLanes) stream_vector(p + i, Vec(0.f));
    }
  }
  std::fill(p + i, p + n, T(0));
}

// Runs f(std::bool_constant<stream>) so kernels take streaming as a template
// argument.
template <typename F>
inline void with_streaming(bool stream, F&& f) {
  if (stream) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
