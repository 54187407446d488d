// Addressing of a contiguous 4-D tensor stored NCHW or channels_last (NHWC).
#pragma once

#include <cstdint>

#include "poolx/elements.h"

namespace poolx {

struct Layout4d {
  int64_t n, c, h, w;
  bool channels_last;

  POOLX_HD int64_t plane_offset(int64_t in, int64_t ic) const {
    return channels_last ? in * h * w * c + ic : (in * c + ic) * h * w;
  }
  POOLX_HD PlaneStrides plane_strides() const {
    return channels_last ? PlaneStrides{w * c, c} : PlaneStrides{w, 1};
  }
  POOLX_HD int64_t numel() const { return n * c * h * w; }

  struct Coord {
    int64_t n, c, h, w;
  };
  // Coordinates of the element at `offset` in memory order.
  POOLX_HD Coord coord(int64_t offset) const {
    Coord p;
    if (channels_last) {
      p.c = offset % c;
      offset /= c;
      p.w = offset % w;
      offset /= w;
      p.h = offset % h;
      p.n = offset / h;
    } else {
      p.w = offset % w;
      offset /= w;
      p.h = offset % h;
      offset /= h;
      p.c = offset % c;
      p.n = offset / c;
    }
    return p;
  }
};

}  // namespace poolx
