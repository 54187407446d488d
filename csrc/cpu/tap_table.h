// Each uint8 argmax value's offset in the input plane (or volume) from its
// window's first tap (kd * dilation_d * in_h * in_w + kh * dilation_h * in_w
// + kw * dilation_w), for all 256 values: the argmax-to-indices and scatter
// kernels look taps up instead of dividing.
#pragma once

#include <cstdint>

#include "isa_namespace.h"
#include "poolx/geometry.h"

namespace poolx {
namespace POOLX_ISA_NAMESPACE {

struct TapTable {
  int64_t offset[256];

  // a = (kd * kernel_h + kh) * kernel_w + kw, counted up (dividing each of
  // the 256 took more time than unpooling a small input)
  explicit TapTable(const Pool2dGeometry& g) {
    int64_t kd = 0, kh = 0, kw = 0;
    for (int64_t a = 0; a < 256; ++a) {
      offset[a] = (kd * g.dilation_d * g.in_h + kh * g.dilation_h) * g.in_w + kw * g.dilation_w;
      if (++kw < g.kernel_w) continue;
      kw = 0;
      if (++kh < g.kernel_h || g.planar()) continue;  // planes: rows past the window
      kh = 0;
      ++kd;
    }
  }
};

// A tap's offset from its window's first tap, by arithmetic (no division,
// no table): the tap row (kd * kernel_h + kh) and slice (kd) by ArgmaxRule's
// multiply, then whole slices, rows of taps and columns. The tables of add(),
// the flat run's vectorized targets and the vectorized indices of windows
// past 16 taps (index_rows.cpp) come from it.
struct TapOffsets {
  uint32_t row_mul, slice_mul;  // v / kernel_w, v / (kernel_h * kernel_w): (v * mul) >> 16
  int32_t col_step, row_step, slice_step;
  // g's offsets in elements of C channels: a tap further on is dilation_w
  // inputs; a tap row further down dilation_h input rows, less the kernel_w
  // taps; a tap slice dilation_d input slices, less the kernel_h rows
  static TapOffsets of(const Pool2dGeometry& g, int64_t C) {
    const int64_t area = g.kernel_h * g.kernel_w;
    return {static_cast<uint32_t>((65536 + g.kernel_w - 1) / g.kernel_w),
            static_cast<uint32_t>((65536 + area - 1) / area),
            static_cast<int32_t>(g.dilation_w * C),
            static_cast<int32_t>((g.dilation_h * g.in_w - g.kernel_w * g.dilation_w) * C),
            static_cast<int32_t>((g.dilation_d * g.in_h - g.kernel_h * g.dilation_h) * g.in_w *
                                 C)};
  }
  int32_t operator()(uint32_t tap) const {
    const uint32_t row = (tap * row_mul) >> 16, slice = (tap * slice_mul) >> 16;
    return static_cast<int32_t>(tap) * col_step + static_cast<int32_t>(row) * row_step +
           static_cast<int32_t>(slice) * slice_step;
  }
};

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
