// Each uint8 argmax value's offset in the input plane from its window's first
// tap (kh * dilation_h * in_w + kw * dilation_w), for all 256 values: the
// argmax-to-indices and scatter kernels look taps up instead of dividing.
#pragma once

#include <cstdint>

#include "poolx/geometry.h"

namespace poolx {

struct TapTable {
  int64_t offset[256];

  explicit TapTable(const Pool2dGeometry& g) {
    for (int64_t a = 0; a < 256; ++a) {
      offset[a] = a / g.kernel_w * g.dilation_h * g.in_w + a % g.kernel_w * g.dilation_w;
    }
  }
};

}  // namespace poolx
