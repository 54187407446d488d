// The largest argmax value a tiled kernel has read, kept in registers as it
// routes: one max per argmax vector the kernel holds anyway. The kernels that
// route by compare (where a value past the taps selects nothing, so writes
// stay in bounds) check the argmax this way at no cost in memory traffic.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "argmax_lanes.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

class SeenArgmax {
 public:
  void add(const Vec& argmax_lanes) { floats_ = at::vec::maximum(floats_, argmax_lanes); }
#if defined(CPU_CAPABILITY_AVX512)
  void add(__m128i argmax_bytes) { bytes_ = _mm_max_epu8(bytes_, argmax_bytes); }
  void add(__m512i argmax_words) { words_ = _mm512_max_epu16(words_, argmax_words); }
#endif

  // Flags `invalid` where a value seen reaches `taps` (every window of a
  // tiled pooling lies inside the input, so that is the whole check).
  void report(int64_t taps, std::atomic<bool>* invalid) const {
    float lanes[kLanes];
    floats_.store(lanes);
    int64_t most = static_cast<int64_t>(*std::max_element(lanes, lanes + kLanes));
#if defined(CPU_CAPABILITY_AVX512)
    alignas(64) uint16_t words[32];
    _mm512_store_si512(words, _mm512_max_epu16(words_, _mm512_cvtepu8_epi16(
                                                           _mm256_castsi128_si256(bytes_))));
    most = std::max<int64_t>(most, *std::max_element(words, words + 32));
#endif
    if (most >= taps) invalid->store(true, std::memory_order_relaxed);
  }

 private:
  Vec floats_{0.f};
#if defined(CPU_CAPABILITY_AVX512)
  __m128i bytes_ = _mm_setzero_si128();
  __m512i words_ = _mm512_setzero_si512();
#endif
};

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
