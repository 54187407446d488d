// Non-temporal ("streaming") stores for outputs far larger than the caches:
// a line written whole need not be read first (no read-for-ownership), and
// the output does not evict the input still being read. Used only for full,
// vector-aligned vectors; anything else takes the ordinary store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "../fast_paths.h"
#include "argmax_lanes.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

constexpr bool kCanStream = kVectorBuild;  // by the vector ISAs' intrinsics

template <typename T>
inline bool vector_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (kLanes * sizeof(T)) == 0;
}

// Streaming pays off when the output is large (see stream_min_bytes) and
// starts a cache line (every vector of a stream that starts there is
// aligned); an argmax streamed beside it must start a 16-byte vector. Callers
// that store rows of their own (channels_last pixels) must also keep every
// row a whole number of vectors: no cache line may be written by both kinds
// of store.
template <typename T>
inline bool worth_streaming(const T* base, int64_t total, const uint8_t* argmax = nullptr) {
  return kCanStream && total * static_cast<int64_t>(sizeof(T)) >= stream_min_bytes() &&
         reinterpret_cast<uintptr_t>(base) % 64 == 0 &&
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
template <typename T>
inline void stream_vector(T* p, const Vec& v) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    _mm512_stream_ps(p, v);
  } else {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), narrow_16bit<T, true>(v));
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    _mm256_stream_ps(p, v);
  } else {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow_16bit<T, true>(v));
  }
#else
  store_float(p, v, kLanes);
#endif
}

// n lanes of v at p, streamed where `stream` and a whole aligned vector; the
// lanes are T values widened (pooled maxima, routed gradients), so they
// narrow exactly. A run-time flag: beside a store to memory the branch costs
// nothing measurable, and each kernel is compiled once for both.
template <typename T>
inline void store_lanes(T* p, const Vec& v, int64_t n, bool stream = false) {
  if (stream && n >= kLanes && vector_aligned(p)) {
    stream_vector(p, v);
  } else {
    store_float<T, true>(p, v, n);
  }
}

// How many leading windows of a row of row_pixels pixels may spill: store
// each of their kernel_w taps (pixels of C <= lanes channels) as a whole
// vector of `lanes`, whose lanes past C the next tap or window overwrites.
// The last spill must stay inside the row (the rest of the row is this
// thread's to write next). A masked store of a few channels costs several
// times a whole one.
inline int64_t spilling_windows(int64_t C, int64_t row_pixels, int64_t windows,
                                int64_t kernel_w, int64_t lanes) {
  const int64_t room = row_pixels * C - (kernel_w - 1) * C - lanes;  // last spill's start
  if (C > lanes || room < 0) return 0;
  return std::min(windows, room / (kernel_w * C) + 1);
}

#if defined(CPU_CAPABILITY_AVX512)
// n argmax bytes (n <= 16) at p, streamed where `stream` and a whole aligned vector.
inline void store_argmax_lanes(uint8_t* p, __m128i bytes, int64_t n, bool stream) {
  if (stream && n >= kLanes && reinterpret_cast<uintptr_t>(p) % kLanes == 0) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), bytes);
  } else {
    store_argmax_bytes(p, bytes, n);
  }
}
#endif

inline void store_argmax_lanes(uint8_t* p, const Vec& argmax, int64_t n, bool stream) {
#if defined(CPU_CAPABILITY_AVX512)
  store_argmax_lanes(p, argmax_bytes(argmax), n, stream);
#else
  store_argmax(p, argmax, n);
#endif
}

template <typename T>
inline void fill_zero(T* p, int64_t n, bool stream = false) {
  int64_t i = 0;
  if (stream && vector_aligned(p)) {
    for (; i + kLanes <= n; i += kLanes) stream_vector(p + i, Vec(0.f));
  }
  std::fill(p + i, p + n, T(0));
}

// Lane j of the result is lane (j - k) mod kLanes of v.
inline Vec rotate_lanes_up(const Vec& v, int64_t k) {
#if defined(CPU_CAPABILITY_AVX512)
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  return _mm512_permutexvar_ps(_mm512_sub_epi32(lane, _mm512_set1_epi32(static_cast<int>(k))), v);
#elif defined(CPU_CAPABILITY_AVX2)
  const __m256i lane = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  return _mm256_permutevar8x32_ps(v, _mm256_sub_epi32(lane, _mm256_set1_epi32(static_cast<int>(k))));
#else
  float in[kLanes], out[kLanes];
  v.store(in);
  for (int64_t j = 0; j < kLanes; ++j) out[j] = in[(j - k + kLanes) % kLanes];
  return Vec::loadu(out);
#endif
}

// Lanes [begin, end) of b (end <= kLanes), the others of a.
inline Vec blend_lanes(const Vec& a, const Vec& b, int64_t begin, int64_t end) {
#if defined(CPU_CAPABILITY_AVX512)
  const uint32_t lanes = ((uint32_t{1} << (end - begin)) - 1) << begin;
  return _mm512_mask_mov_ps(a, static_cast<__mmask16>(lanes), b);
#else
  const Vec lane = Vec::arange(0.f, 1.f);
  return Vec::blendv(a, b, (lane >= Vec(static_cast<float>(begin))) &
                               (lane < Vec(static_cast<float>(end))));
#endif
}

// StreamAppender's lanes: float vectors holding values of T (pooled maxima,
// routed gradients), narrowed exactly, NaNs per element as in torch's NCHW
// kernels.
template <typename T>
struct ValueLanes {
  using Elem = T;
  using V = Vec;
  static constexpr int64_t kCount = kLanes;
  static V zero() { return Vec(0.f); }
  static V rotate_up(const V& v, int64_t k) { return rotate_lanes_up(v, k); }
  static V blend(const V& a, const V& b, int64_t begin, int64_t end) {
    return blend_lanes(a, b, begin, end);
  }
  static void stream(T* p, const V& v) { store_lanes(p, v, kLanes, true); }
  static void store(T* p, const V& v, int64_t n) { store_lanes(p, v, n); }
};

// Pieces of n <= kCount lanes appended to consecutive elements from a
// vector-aligned start, stored as whole aligned vectors, each by one
// streaming store: rows whose length is no multiple of a vector (vgg-256's
// 56 outputs) need not split vectors, and cache lines, at their ends, where
// ordinary stores would read every line first. finish() stores what is left.
template <typename Lanes>
class StreamAppender {
 public:
  using Elem = typename Lanes::Elem;
  using V = typename Lanes::V;
  static constexpr int64_t kCount = Lanes::kCount;

  explicit StreamAppender(Elem* start) : next_(start), pending_(Lanes::zero()) {}

  C10_ALWAYS_INLINE void append(const V& v, int64_t n) {
    if (fill_ == 0 && n == kCount) {  // rows of whole vectors take only this
      Lanes::stream(next_, v);
      next_ += kCount;
      return;
    }
    const V moved = Lanes::rotate_up(v, fill_);
    pending_ = Lanes::blend(pending_, moved, fill_, std::min(fill_ + n, kCount));
    fill_ += n;
    if (fill_ >= kCount) {
      Lanes::stream(next_, pending_);
      next_ += kCount;
      fill_ -= kCount;
      pending_ = moved;  // its lanes below fill_ are v's last ones
    }
  }

  void append_zeros(int64_t n) {
    for (; n > 0; n -= kCount) append(Lanes::zero(), std::min(n, kCount));
  }

  void finish() {
    if (fill_ > 0) Lanes::store(next_, pending_, fill_);
  }

 private:
  Elem* next_;
  V pending_;
  int64_t fill_ = 0;
};

// Rows of `row` elements per task so that every task starts a whole vector
// of `lanes` elements.
inline int64_t rows_per_aligned_start(int64_t row, int64_t lanes) {
  return lanes / std::gcd(row, lanes);
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
