// Each uint8 argmax value's offset in the input plane from its window's first
// tap (kh * dilation_h * in_w + kw * dilation_w), for all 256 values: the
// argmax-to-indices and scatter kernels look taps up instead of dividing.
#pragma once

#include <cstdint>

#include "poolx/geometry.h"

namespace poolx {

struct TapTable {
  int64_t offset[256];

  // a = kh * kernel_w + kw, counted up (dividing each of the 256 took more
  // time than unpooling a small input)
  explicit TapTable(const Pool2dGeometry& g) {
    int64_t a = 0;
    for (int64_t kh = 0; a < 256; ++kh) {
      for (int64_t kw = 0; kw < g.kernel_w && a < 256; ++kw, ++a) {
        offset[a] = kh * g.dilation_h * g.in_w + kw * g.dilation_w;
      }
    }
  }
};

}  // namespace poolx
