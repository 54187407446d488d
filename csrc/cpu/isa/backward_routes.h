// Which backward kernel a channels_last shape takes, where more than one is
// correct: the rules that measurements chose between the gather, the
// routing of pixels by vectors and the scatter per image.
#pragma once

#include <cstdint>
#include <type_traits>

#include <c10/util/Half.h>

#include "poolx/geometry.h"
#include "vec_io.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// channels_last pixels of fewer channels gather slower than a scatter per
// image sums them (3 channels: 10x, 48: 1.1-1.3x).
constexpr int64_t kGatherMinChannels = 64;

// channels_last windows that tile the input, pixels of a few channels that
// fill no whole vector: a scatter per image sums them faster than routing
// each pixel by vectors, whose time follows the input's pixels where the
// scatter's follows the windows. On AVX2 (an AMD EPYC): float32 below two
// vectors of channels, 16-bit types up to half of one. On AVX-512: up to 8
// channels where windows have over 4 taps, and float32 up to 4 channels.
template <typename T>
inline bool scatters_few_channels(int64_t C, int64_t taps) {
#if defined(CPU_CAPABILITY_AVX2)
  (void)taps;
  if (C % kLanes == 0) return false;
  return std::is_same_v<T, float> ? C < 2 * kLanes : C <= kLanes / 2;
#else
  return C <= 8 && (taps > 4 || (std::is_same_v<T, float> && C <= 4));
#endif
}

// On AVX2 (an AMD EPYC), channels_last images of up to 256 pixels in windows
// of 16 taps or more, of any channels: the heads, 7x7 to 1 and 13x13 by 4x4,
// scatter per image faster than their pixels route; from 28x28 on the
// routing measured faster. AVX-512 was not measured on these.
inline bool scatters_small_images(const Pool2dGeometry& g) {
#if defined(CPU_CAPABILITY_AVX2)
  return g.in_h * g.in_w <= 256 && g.window_size() >= 16;
#else
  (void)g;
  return false;
#endif
}

// channels_last volumes whose windows overlap, pad or dilate: the gather of
// planes beats the plane scatter where pixels are wide and an input lies in
// few windows (3x3x3 stride 2: 3.4 on average, 2x2x2 stride 1: 8). Where it
// lies in 27 (3x3x3 stride 1) or pixels are of 64 channels, the gather's
// reads of every covering window measured slower.
inline bool gathers_volume(const Pool2dGeometry& g, int64_t C) {
  return !tiles_volume(g) && C >= 2 * kGatherMinChannels &&
         g.window_size() <= 8 * g.stride_d * g.stride_h * g.stride_w;
}

// channels_last adaptive windows (none wider than its input along an axis,
// so an input lies in at most two along each) gather where pixels are wide
// and windows dense: the scatter's adds, one element each, follow the
// windows; the gather's vectors follow the pixels. The measured crossovers:
// float32 a window per 16 pixels (13x13 -> 4x4 and 7x7 -> 2x2 gather, 13x13
// -> 3x3 and -> 2x2 scatter); bfloat16 a window per 32 pixels on AVX-512,
// whose scatter rounds each add by itself (13x13 -> 3x3 gathers too), and
// per 8 on AVX2 (13x13 -> 4x4 scatters: the gather's widening and narrowing
// measured slower); pixels of 256 channels (at 128 the gather's cost per
// pixel outweighs the adds it saves). float16 gathered measured slower than
// its scatter, whose adds convert by F16C. Vector builds only.
template <typename T>
inline bool gathers_adaptive(const Pool2dGeometry& g, const Layout4d& in_l) {
  if (std::is_same_v<T, c10::Half>) return false;
#if defined(CPU_CAPABILITY_AVX512)
  constexpr int64_t kPixelsPerWindow = kLanes * sizeof(float) / sizeof(T);
#else
  constexpr int64_t kPixelsPerWindow = std::is_same_v<T, float> ? 2 * kLanes : kLanes;
#endif
  const int64_t windows = g.out_d * g.out_h * g.out_w, pixels = g.in_d * g.in_h * g.in_w;
  return kVectorBuild && in_l.channels_last && g.adaptive() &&
         in_l.c >= kGatherMinChannels * 4 && g.out_d <= g.in_d && g.out_h <= g.in_h &&
         g.out_w <= g.in_w && windows * kPixelsPerWindow >= pixels;
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
