// Forward for float64, which has no vector paths, and for NCHW rows that
// forward_nchw does not cover (stride_w over 2, dilation_w): windows side by
// side pooled as lanes of arrays whose selects the compiler vectorizes,
// without the element kernels' index arithmetic (divisions per output) and
// strided reads. channels_last: a window's contiguous channels are the lanes;
// NCHW: the windows of a row whose columns all lie inside the input, a
// stride apart (the others one by one). Max rule and first tap are
// max_pool2d_forward_elem's.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>

#include "../index_rows.h"
#include "argmax_lanes.h"
#include "forward_kernels.h"
#include "poolx/max_rule.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

// h widened to float by integer and float arithmetic that the compiler
// vectorizes (c10's conversion is one F16C instruction per element, which
// it does not): c10's portable algorithm, exact for every value.
inline float widen_in_lanes(c10::Half h) {
  const uint32_t w = static_cast<uint32_t>(h.x) << 16, two_w = w + w;
  const float normalized =
      c10::bit_cast<float>((two_w >> 4) + (UINT32_C(0xE0) << 23)) * 0x1.0p-112f;
  const float denormalized =
      c10::bit_cast<float>((two_w >> 17) | (UINT32_C(126) << 23)) - 0.5f;
  const uint32_t magnitude = (h.x & 0x7C00) == 0 ? c10::bit_cast<uint32_t>(denormalized)
                                                 : c10::bit_cast<uint32_t>(normalized);
  return c10::bit_cast<float>((w & UINT32_C(0x80000000)) | magnitude);
}
template <typename T>
inline auto widen_in_lanes(T v) {
  if constexpr (sizeof(T) == 2) return static_cast<float>(v);
  else return v;
}

// Up to kPoolLanes windows whose taps are the same rows and columns:
// lane i's tap (kh, kw) at image[first + i * lane_step + kh * row_step +
// kw * col_step]; their maxima to out[0, n), the taps to argmax (if not
// null). kLaneStep, if not 0, is lane_step known to the compiler.
constexpr int64_t kPoolLanes = 64;

// Whether pool_lanes copies its taps: where the compiler's loop would not
// vectorize. It vectorizes by 8 lanes and leaves fewer to a scalar loop that
// branches on every comparison, which random data mispredicts (below 5
// lanes that still beat the copy for 16-bit types); on AVX2 it vectorizes no
// float16 loop at all.
template <typename T>
inline bool copies_lanes(int64_t n) {
#if defined(CPU_CAPABILITY_AVX2)
  if (std::is_same_v<T, c10::Half> && n > 1) return true;
#endif
  return n >= 5 && n < 8;
}

// pool_lanes by copying each tap of up to kLanes windows into a float
// vector, pooled whole by RunningMax (the max rule and first tap are the same).
template <typename T>
inline void pool_lanes_copied(const T* image, int64_t first, int64_t lane_step, int64_t n,
                              TapRange taps_h, TapRange taps_w, int64_t row_step,
                              int64_t col_step, int64_t kernel_w, T* out, uint8_t* argmax) {
  float taps[kLanes] = {};
  for (int64_t c0 = 0; c0 < n; c0 += kLanes) {
    const int64_t lanes = std::min(kLanes, n - c0);
    RunningMax<true> best(taps_h.begin * kernel_w + taps_w.begin);
    for (int64_t kh = taps_h.begin; kh < taps_h.end; ++kh) {
      for (int64_t kw = taps_w.begin; kw < taps_w.end; ++kw) {
        const T* p = image + (first + c0 * lane_step + kh * row_step + kw * col_step);
        for (int64_t i = 0; i < lanes; ++i) {
          taps[i] = widen_in_lanes(p[i * lane_step]);
        }
        best.update(Vec::loadu(taps), kh * kernel_w + kw);
      }
    }
    store_float<T, /*kExact=*/true>(out + c0, best.value, lanes);
    if (argmax != nullptr) store_argmax(argmax + c0, best.argmax, lanes);
  }
}

template <int64_t kLaneStep, typename T>
inline void pool_lanes(const T* image, int64_t first, int64_t lane_step, int64_t n,
                       TapRange taps_h, TapRange taps_w, int64_t row_step, int64_t col_step,
                       int64_t kernel_w, T* out, uint8_t* argmax) {
  const int64_t step = kLaneStep != 0 ? kLaneStep : lane_step;
  if constexpr (sizeof(T) <= sizeof(float)) {
    if (copies_lanes<T>(n)) {
      pool_lanes_copied(image, first, step, n, taps_h, taps_w, row_step, col_step, kernel_w,
                        out, argmax);
      return;
    }
  }
  // 16-bit types compared widened to float (exactly), as the vector kernels do
  using L = std::conditional_t<sizeof(T) == 2, float, T>;
  L best[kPoolLanes];
  // as wide as L, so that the selects vectorize together
  std::conditional_t<sizeof(L) == 8, int64_t, int32_t> tap_of[kPoolLanes];
  std::fill_n(best, n, lowest_value<L>());
  // an argmax is 1 byte wherever one is written (windows of up to 256 taps)
  std::fill_n(tap_of, n, taps_h.begin * kernel_w + taps_w.begin);
  for (int64_t kh = taps_h.begin; kh < taps_h.end; ++kh) {
    for (int64_t kw = taps_w.begin; kw < taps_w.end; ++kw) {
      const T* p = image + (first + kh * row_step + kw * col_step);
      const int64_t tap = kh * kernel_w + kw;
      for (int64_t i = 0; i < n; ++i) {  // selects, which vectorize
        const L v = widen_in_lanes(p[i * step]);
        const bool take = replaces_max(v, best[i]);
        best[i] = take ? v : best[i];
        tap_of[i] = take ? tap : tap_of[i];
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<L, T>) out[i] = best[i];
    else out[i] = narrow<T>(best[i]);  // exact: best holds a T
  }
  if (argmax != nullptr) {
    for (int64_t i = 0; i < n; ++i) argmax[i] = static_cast<uint8_t>(tap_of[i]);
  }
}

template <typename T>
void forward_by_pixels(const FastForwardArgs& a) {
  const Pool2dGeometry g = a.g;
  const bool cl = a.in_l.channels_last;
  const int64_t C = cl ? a.in_l.c : 1, images = cl ? a.in_l.n : a.in_l.n * a.in_l.c;
  const int64_t image_size = g.in_h * g.in_w * C;
  const int64_t row_step = g.dilation_h * g.in_w * C, col_step = g.dilation_w * C;
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.values);
  uint8_t* const argmax = a.argmax;
  const IndexRows* const index_rows = a.index_rows;
  // NCHW: the windows of these columns have every column tap inside the input
  const TapRange inside =
      interior_outputs(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  const int64_t rows = images * g.out_h;
  at::parallel_for(0, rows, grain_for(g.out_w * C * g.kernel_h * g.kernel_w), [&](int64_t b,
                                                                                  int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* image = in + (r / g.out_h) * image_size;
      const int64_t h0 = (r % g.out_h) * g.stride_h - g.pad_h;
      const TapRange taps_h = window_taps(h0, g.kernel_h, g.dilation_h, g.in_h);
      const auto window = [&](int64_t ow, int64_t c0, int64_t n) {  // n channels from c0
        const int64_t w0 = ow * g.stride_w - g.pad_w;
        const int64_t o = (r * g.out_w + ow) * C + c0;
        pool_lanes<1>(image, (h0 * g.in_w + w0) * C + c0, 1, n, taps_h,
                      window_taps(w0, g.kernel_w, g.dilation_w, g.in_w), row_step, col_step,
                      g.kernel_w, out + o, argmax != nullptr ? argmax + o : nullptr);
      };
      if (cl) {
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          for (int64_t c0 = 0; c0 < C; c0 += kPoolLanes) {
            window(ow, c0, std::min(kPoolLanes, C - c0));
          }
        }
      } else {
        for (int64_t ow = 0; ow < inside.begin; ++ow) window(ow, 0, 1);
        for (int64_t ow = inside.begin; ow < inside.end; ow += kPoolLanes) {
          const int64_t n = std::min(kPoolLanes, inside.end - ow), o = r * g.out_w + ow;
          const int64_t first = h0 * g.in_w + ow * g.stride_w - g.pad_w;
          const TapRange taps_w{0, g.kernel_w};
          uint8_t* am = argmax != nullptr ? argmax + o : nullptr;
          const auto lanes = [&](auto step) {
            pool_lanes<decltype(step)::value>(image, first, g.stride_w, n, taps_h, taps_w,
                                              row_step, col_step, g.kernel_w, out + o, am);
          };
          if (g.stride_w == 1) lanes(std::integral_constant<int64_t, 1>());
          else if (g.stride_w == 2) lanes(std::integral_constant<int64_t, 2>());
          else lanes(std::integral_constant<int64_t, 0>());
        }
        for (int64_t ow = inside.end; ow < g.out_w; ++ow) window(ow, 0, 1);
      }
      if (index_rows != nullptr) index_rows->convert(r);
    }
    if (index_rows != nullptr) index_rows->publish();
  });
}

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
