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

}  // namespace POOLX_ISA_NAMESPACE
}  // namespace poolx
