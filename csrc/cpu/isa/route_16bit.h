// The tiled backward's routing of bfloat16/float16 gradients in their own
// 16-bit lanes (AVX-512, 32 per vector): routing moves a gradient or a zero
// and never needs float arithmetic, so nothing is widened or narrowed and a
// vector carries twice the elements. The values are those of torch's
// "0 + g": -0 becomes +0, everything else (NaN included) goes as it is.
#pragma once

#include <cstdint>
#include <type_traits>

#include "seen_argmax.h"
#include "stream_stores.h"
#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// The 16-bit lanes a spilling store (kSpill below) writes for C channels: a
// half vector where C fits, so that it moves no more bytes than a float
// one.
inline int64_t spill_lanes_16bit(int64_t C) { return C <= 16 ? 16 : 32; }

#if defined(CPU_CAPABILITY_AVX512)

template <typename T>
constexpr bool kRoutesIn16BitLanes =
    std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;

constexpr int64_t kLanes16 = 32;

inline __mmask32 lane_mask16(int64_t n) {
  return n >= kLanes16 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1);
}

// torch's "0 + g" on the bits of 16-bit gradients: -0 to +0.
inline __m512i zero_plus_16bit(__m512i grad) {
  const __m512i magnitude = _mm512_and_si512(grad, _mm512_set1_epi16(0x7FFF));
  return _mm512_maskz_mov_epi16(_mm512_test_epi16_mask(magnitude, magnitude), grad);
}

// n (<= 32) 16-bit lanes of v at p. Streaming goes by 32-byte halves, as in
// the float path: worth_streaming keeps those whole and aligned, so that no
// cache line is written by both kinds of store (a line shared by a streamed
// and a cached store costs ten times the whole kernel).
template <typename T>
inline void store_16bit(T* p, __m512i v, int64_t n, bool stream = false) {
  constexpr int64_t kHalf = kLanes16 / 2;
  if (stream) {
    if (n >= kLanes16 && reinterpret_cast<uintptr_t>(p) % 64 == 0) {  // a whole line
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
      return;
    }
    if (n >= kHalf && vector_aligned(p)) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_castsi512_si256(v));
      const __m256i high = _mm512_extracti64x4_epi64(v, 1);
      if (n >= kLanes16) {
        _mm256_stream_si256(reinterpret_cast<__m256i*>(p + kHalf), high);
      } else if (n > kHalf) {
        _mm256_mask_storeu_epi16(p + kHalf, lane_mask(n - kHalf), high);
      }
      return;
    }
  }
  if (n >= kLanes16) {
    _mm512_storeu_si512(p, v);
  } else if (n == kHalf) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_castsi512_si256(v));
  } else {
    _mm512_mask_storeu_epi16(p, lane_mask16(n), v);
  }
}

// Tiled rows (tiled_rows.h): n <= kLanes outputs of kC-channel pixels from
// `grad` and `argmax`, loaded once and routed to their 2 * n inputs in each
// kernel row kh (the vector's first 2 * n lanes), where the even pixels are
// tap 2 * kh and the odd ones 2 * kh + 1. Each output pixel is doubled into a
// pixel pair, so one compare selects both taps. kCopy (unpool): the bits as
// they are, not "0 + g"; tiled_rows.h has the float twin.
template <typename T, int kC, bool kCopy>
class PixelPairRouter16 {
 public:
  PixelPairRouter16(const T* grad, const uint8_t* argmax, int64_t n, SeenArgmax& seen) {
    static_assert(kC == 1 || kC == 2);
    const __mmask16 in = lane_mask(std::min(n, kLanes));
    const __m256i g16 = _mm256_maskz_loadu_epi16(in, grad);
    const __m128i a8 = _mm_maskz_loadu_epi8(in, argmax);
    seen.add(a8);
    if constexpr (kC == 1) {  // 16-bit pixels in 32-bit pairs
      const __m512i g = _mm512_cvtepu16_epi32(g16), a = _mm512_cvtepu8_epi32(a8);
      grad_ = _mm512_or_si512(g, _mm512_slli_epi32(g, 16));
      argmax_ = _mm512_or_si512(a, _mm512_slli_epi32(a, 16));
    } else {  // 32-bit pixels in 64-bit pairs
      const __m512i g = _mm512_cvtepu32_epi64(g16);
      const __m512i a = _mm512_cvtepu32_epi64(_mm256_cvtepu8_epi16(a8));
      grad_ = _mm512_or_si512(g, _mm512_slli_epi64(g, 32));
      argmax_ = _mm512_or_si512(a, _mm512_slli_epi64(a, 32));
    }
    if constexpr (!kCopy) grad_ = zero_plus_16bit(grad_);
  }

  __m512i row(int64_t kh) const {
    __m512i taps;
    if constexpr (kC == 1) {
      taps = _mm512_set1_epi32(static_cast<int32_t>((2 * kh) | ((2 * kh + 1) << 16)));
    } else {
      const int64_t even = 2 * kh * 0x10001, odd = (2 * kh + 1) * 0x10001;
      taps = _mm512_set1_epi64(even | (odd << 32));
    }
    return _mm512_maskz_mov_epi16(_mm512_cmpeq_epi16_mask(argmax_, taps), grad_);
  }

 private:
  __m512i grad_, argmax_;
};

// StreamAppender's lanes for 16-bit routing: 32 elements, a cache line.
template <typename T>
struct Bits16Lanes {
  using Elem = T;
  using V = __m512i;
  static constexpr int64_t kCount = kLanes16;
  static V zero() { return _mm512_setzero_si512(); }
  static V rotate_up(const V& v, int64_t k) {
    alignas(64) static constexpr int16_t kLane[32] = {0,  1,  2,  3,  4,  5,  6,  7,
                                                      8,  9,  10, 11, 12, 13, 14, 15,
                                                      16, 17, 18, 19, 20, 21, 22, 23,
                                                      24, 25, 26, 27, 28, 29, 30, 31};
    const __m512i lane = _mm512_load_si512(kLane);
    return _mm512_permutexvar_epi16(
        _mm512_sub_epi16(lane, _mm512_set1_epi16(static_cast<int16_t>(k))), v);
  }
  static V blend(const V& a, const V& b, int64_t begin, int64_t end) {
    const uint64_t lanes = ((uint64_t{1} << (end - begin)) - 1) << begin;
    return _mm512_mask_mov_epi16(a, static_cast<__mmask32>(lanes), b);
  }
  static void stream(T* p, const V& v) { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v); }
  static void store(T* p, const V& v, int64_t n) { store_16bit(p, v, n); }
};

// Tiled channels_last (backward_kernels.h): the C channels of one output
// pixel to the kernel_w input pixels of its window in kernel row kh, 32
// channels at a time; kSpill as for route_channels.
template <typename T, bool kCopy, bool kSpill>
inline void route_channels_16bit(const T* grad, const uint8_t* argmax, T* window, int64_t C,
                                 int64_t kh, int64_t kernel_w, SeenArgmax& seen, bool stream) {
  // with kSpill one vector and no channel loop, as in route_channels
  for (int64_t c0 = 0; c0 < (kSpill ? 1 : C); c0 += kLanes16) {
    const int64_t n = kSpill ? C : std::min(kLanes16, C - c0);
    const __mmask32 in = lane_mask16(n);
    __m512i g = _mm512_maskz_loadu_epi16(in, grad + c0);
    if constexpr (!kCopy) g = zero_plus_16bit(g);
    const __m512i a = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(in, argmax + c0));
    seen.add(a);
    for (int64_t kw = 0; kw < kernel_w; ++kw) {
      const __m512i tap = _mm512_set1_epi16(static_cast<int16_t>(kh * kernel_w + kw));
      store_16bit(window + kw * C + c0, _mm512_maskz_mov_epi16(_mm512_cmpeq_epi16_mask(a, tap), g),
                  kSpill ? spill_lanes_16bit(C) : n, stream);
    }
  }
}

#else

template <typename T>
constexpr bool kRoutesIn16BitLanes = false;

template <typename T>
struct Bits16Lanes;  // AVX-512 only
template <typename T, int kC, bool kCopy>
class PixelPairRouter16;  // AVX-512 only
template <typename T, bool kCopy, bool kSpill>
void route_channels_16bit(const T* grad, const uint8_t* argmax, T* window, int64_t C, int64_t kh,
                          int64_t kernel_w, SeenArgmax& seen, bool stream);  // AVX-512 only

#endif

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
