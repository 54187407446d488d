// The scatter of volume_scatter.h over plain pointers: each window's value
// placed at its argmax's tap, windows in memory order. Compiled generic
// (volume_scatter.cpp) and by the fast paths for each ISA (with ISA flags, in
// the ISA's namespace), whose 16-bit conversions use the hardware's: the
// generic build widens and rounds float16 in software.
#pragma once

#include <ATen/Parallel.h>

#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "isa_namespace.h"
#include "poolx/elements.h"
#include "poolx/layout.h"
#include "tap_table.h"
#include "window_table.h"

namespace poolx {

enum class Scatter { kAdd, kCopy, kMark };

namespace POOLX_ISA_NAMESPACE {

// Whether no input lies in two windows of the axis. An adaptive axis's
// windows are disjoint where out divides in (global pooling among them);
// elsewhere neighbours share an input.
inline bool windows_disjoint(const AxisT<int64_t>& axis) {
  if (axis.stride == 0) return axis.out > 0 && axis.in % axis.out == 0;
  return (axis.kernel - 1) * axis.dilation + 1 <= axis.stride;
}
inline bool windows_disjoint(const Pool2dGeometry& g) {
  return windows_disjoint(g.axis_d()) && windows_disjoint(g.axis_h()) &&
         windows_disjoint(g.axis_w());
}

// sum + grad rounded to T, as torch adds a gradient into a 16-bit input.
// float16 by F16C in one XMM register where the ISA has it: c10's scalar
// conversion, compiled for AVX-512, widens and narrows through 512-bit ones.
template <typename T>
T added(T sum, T grad) {
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, c10::Half>) {
    const __m128 s = _mm_cvtph_ps(_mm_cvtsi32_si128(sum.x));
    const __m128 g = _mm_cvtph_ps(_mm_cvtsi32_si128(grad.x));
    const __m128i h = _mm_cvtps_ph(_mm_add_ss(s, g), _MM_FROUND_TO_NEAREST_INT);
    return c10::Half(static_cast<uint16_t>(_mm_cvtsi128_si32(h)), c10::Half::from_bits());
  }
#endif
  return static_cast<T>(static_cast<acc_t<T>>(sum) + static_cast<acc_t<T>>(grad));
}

// A tap number split into its taps along each axis.
struct TapAxes {
  int64_t kd, kh, kw;
};

// kPlanes: NCDHW, one channel per window (no channel loop).
template <Scatter kHow, bool kPlanes, typename T, typename argmax_t>
bool scatter_windows(const T* from, const argmax_t* argmax, T* to, const Layout4d& out_l,
             const Pool2dGeometry& g) {
  const AxisWindows axes[3]{AxisWindows(g.axis_d()), AxisWindows(g.axis_h()),
                            AxisWindows(g.axis_w())};
  const auto& [ds, hs, ws] = axes;
  // a plane (NCDHW) or an image (channels_last_3d) of C interleaved channels
  const int64_t C = kPlanes ? 1 : out_l.c, groups = kPlanes ? out_l.n * out_l.c : out_l.n;
  const int64_t in_group = g.in_d * g.in_h * g.in_w * C;
  const int64_t out_group = g.out_d * g.out_h * g.out_w * C;
  // window o's value (or mark) into input `at`
  // Where no two windows share an input, a gradient adds to the zero alone:
  // no read of the input back.
  const bool disjoint = windows_disjoint(g);
  const auto place = [from, disjoint](T* at, int64_t o) {
    if constexpr (kHow == Scatter::kAdd) {
      *at = added(disjoint ? T(0) : *at, from[o]);
    } else if constexpr (kHow == Scatter::kCopy) {
      *at = from[o];
    } else {
      *at = true;
    }
  };
  constexpr bool kByteArgmax = std::is_same_v<argmax_t, uint8_t>;
  if (const int64_t chunk =
          WindowTable::chunk_groups(g, axes, in_group, sizeof(T), kByteArgmax)) {
    return scatter_by_table<kPlanes>(argmax, to, WindowTable(g, axes, C, chunk, kByteArgmax),
                                     chunk, groups, in_group, out_group, C, place);
  }
  const int64_t plane_taps = g.kernel_h * g.kernel_w, taps = g.window_size();
  const auto split = [&](int64_t a) {
    return TapAxes{a / plane_taps, a % plane_taps / g.kernel_w, a % g.kernel_w};
  };
  // a 1-byte argmax's split and offset in its window looked up, not divided
  std::vector<TapAxes> table;
  if (sizeof(argmax_t) == 1) {
    for (int64_t a = 0; a < 256; ++a) table.push_back(split(a));
  }
  // each 1-byte tap's offset in elements: pixels of C channels apart
  const TapTable tap_pixels(g);
  std::vector<int64_t> tap_offset(256);
  for (int64_t a = 0; a < 256; ++a) tap_offset[a] = tap_pixels.offset[a] * C;
  std::atomic<bool> invalid{false};
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    // Disjoint windows read no input back: the task's groups are zeroed at
    // once (a call per small plane costs more). Others zero each group as
    // they reach it, which is then in the cache for the adds.
    if (disjoint) {
      std::memset(static_cast<void*>(to + begin * in_group), 0,
                  (end - begin) * in_group * sizeof(T));
    }
    // locals, which the stores through dst cannot alias
    const TapAxes* const split_taps = table.data();
    const int64_t* const offsets = tap_offset.data();
    const TapRange* const w_taps = ws.taps.data();
    const int64_t* const w_start = ws.start.data();
    const char *const w_whole = ws.whole.data(), *const w_empty = ws.empty.data();
    for (int64_t group = begin; group < end && !invalid.load(std::memory_order_relaxed);
         ++group) {
      T* dst = to + group * in_group;
      if (!disjoint) std::memset(static_cast<void*>(dst), 0, in_group * sizeof(T));
      int64_t o = group * out_group;
      for (int64_t od = 0; od < g.out_d; ++od) {
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          // what a row of windows shares
          const TapRange td = ds.taps[od], th = hs.taps[oh];
          const bool row_empty = ds.empty[od] || hs.empty[oh];
          const bool row_whole = sizeof(argmax_t) == 1 && ds.whole[od] && hs.whole[oh];
          const int64_t row_first = (ds.start[od] * g.in_h + hs.start[oh]) * g.in_w;
          for (int64_t ow = 0; ow < g.out_w; ++ow, o += C) {
            if (row_empty || w_empty[ow]) {  // any tap number; no tap to write
              for (int64_t c = 0; c < C; ++c) {
                if (static_cast<uint64_t>(argmax[o + c]) >= static_cast<uint64_t>(taps)) {
                  invalid.store(true, std::memory_order_relaxed);
                  return;
                }
              }
              continue;
            }
            const int64_t first = (row_first + w_start[ow]) * C;
            // a window wholly inside: any tap below `taps` is one of its inputs
            if (row_whole && w_whole[ow]) {
              for (int64_t c = 0; c < C; ++c) {
                const int64_t a = static_cast<int64_t>(argmax[o + c]);
                if (a >= taps) {
                  invalid.store(true, std::memory_order_relaxed);
                  return;
                }
                place(dst + first + offsets[a] + c, o + c);
              }
              continue;
            }
            const TapRange tw = w_taps[ow];
            for (int64_t c = 0; c < C; ++c) {
              const int64_t a = static_cast<int64_t>(argmax[o + c]);
              const auto [kd, kh, kw] = sizeof(argmax_t) == 1 ? split_taps[a] : split(a);
              if (a < 0 || a >= taps || kd < td.begin || kd >= td.end || kh < th.begin ||
                  kh >= th.end || kw < tw.begin || kw >= tw.end) {
                invalid.store(true, std::memory_order_relaxed);
                return;
              }
              const int64_t offset =
                  sizeof(argmax_t) == 1
                      ? offsets[a]
                      : ((kd * g.dilation_d * g.in_h + kh * g.dilation_h) * g.in_w +
                         kw * g.dilation_w) * C;
              place(dst + first + offset + c, o + c);
            }
          }
        }
      }
    }
  });
  return !invalid;
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
