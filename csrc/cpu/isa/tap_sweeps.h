// The tiled 2x2 channels_last forward tap by tap, for pixels of 128-256
// float32 channels: each tap's channels in one contiguous sweep, the window's
// running maxima kept in an L1 buffer between its taps, instead of the four
// taps a vector of channels at a time.
#pragma once

#include <algorithm>
#include <cstdint>

#include "argmax_lanes.h"
#include "stream_stores.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

template <bool kArgmax>
class TapSweeps {
 public:
  // Pixels of 512 bytes to 1 KiB: the four taps a vector at a time read
  // them slower than avg_pool2d reads the same bytes; smaller pixels and
  // larger ones measured faster that way than swept. Values alone are swept
  // on AVX2 only: on AVX-512 the taps a vector at a time, 256 bytes per pass
  // with prefetches, read them faster.
  static bool applies(int64_t C) {
#if defined(CPU_CAPABILITY_AVX512)
    if (!kArgmax) return false;
#endif
    return C >= 128 && C <= kMaxChannels;
  }

  // The window whose taps 0-3 start at p, p + C, p + row_stride and
  // p + row_stride + C, into C values at out (and argmax bytes at am).
  void pool(const float* p, int64_t C, int64_t row_stride, float* out, uint8_t* am, bool stream,
            bool stream_argmax) {
    sweep<true, false>(p, C, 0, out, am, stream, stream_argmax);
    sweep<false, false>(p + C, C, 1, out, am, stream, stream_argmax);
    sweep<false, false>(p + row_stride, C, 2, out, am, stream, stream_argmax);
    sweep<false, true>(p + row_stride + C, C, 3, out, am, stream, stream_argmax);
  }

 private:
  static constexpr int64_t kMaxChannels = 256;

  template <bool kFirst, bool kLast>
  inline void sweep(const float* p, int64_t C, int64_t tap, float* out, uint8_t* am, bool stream,
                    bool stream_argmax) {
    for (int64_t c = 0; c < C; c += kLanes) {
      const int64_t n = std::min(kLanes, C - c);
      const Vec v = load_float(p + c, n);
      RunningMax<kArgmax> best(v, tap);
      if constexpr (!kFirst) {
        best.value = Vec::loadu(value_ + c);
        if constexpr (kArgmax) best.argmax = Vec::loadu(argmax_ + c);
        best.update(v, tap);
      }
      if constexpr (kLast) {
        store_lanes(out + c, best.value, n, stream);
        if constexpr (kArgmax) store_argmax_lanes(am + c, best.argmax, n, stream_argmax);
      } else {
        best.value.store(value_ + c);
        if constexpr (kArgmax) best.argmax.store(argmax_ + c);
      }
    }
  }

  alignas(64) float value_[kMaxChannels], argmax_[kMaxChannels];
};

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
